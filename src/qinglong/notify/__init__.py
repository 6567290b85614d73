"""Notifications: channels (a signed webhook, SMTP email, webhook templates such as Telegram
and Bark), rules that attach them to projects and tasks, and the dispatcher that delivers from
a durable outbox (see docs/controls/notifications.md).

The pure parts (events, channel specs, templates, payloads, signatures) import nothing but the
domain; ``senders`` does the network I/O; ``dispatcher`` is the loop's cycle over the
NotifyStore port (``storage/notify_ports.py``); ``wiring`` builds it for each profile.
"""
