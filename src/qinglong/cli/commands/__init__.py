"""One module per `ql` subcommand group."""

from __future__ import annotations
