"""The service layer: what the `ql` command and the HTTP API both call.

It turns requests into store calls and domain records into views (plain JSON-ready
dicts, the same shapes on every surface), and maps errors to exit codes and HTTP statuses.
"""

from __future__ import annotations
