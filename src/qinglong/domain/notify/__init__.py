"""The notification model, without I/O: events, channel specs and their validation, webhook
templates, the notification document and its signature (see docs/controls/notifications.md).

What sends (``notify/senders``), the dispatcher's loop over the notify store
(``notify/dispatcher``, ``notify/wiring``) and the operations the surfaces call
(``service/notifications``) are built on it.
"""

from __future__ import annotations
