"""Notification delivery: the I/O over the notification model (``domain/notify``).

``senders`` does the network I/O (an HTTP request, an SMTP transaction); ``dispatcher`` is the
loop's cycle over the notify store (``storage/notify``): enqueue what rules want, send what is
due, retry with backoff; ``wiring`` builds that loop for each profile. The operations the
CLI, the HTTP API and the panel call (channels, rules, a test send, deliveries) are
``service/notifications``.
"""
