"""Presets: template channels written for a service, so that a channel for it needs only its
parameters and its secret."""

from __future__ import annotations

from collections.abc import Mapping

from qinglong.domain.notify.channels import TemplateTarget
from qinglong.domain.notify.urls import check_http_url
from qinglong.errors import InvalidInput

TELEGRAM_SERVER = "https://api.telegram.org"
BARK_SERVER = "https://api.day.app"
PRESETS = ("telegram", "bark")


def _server(params: dict[str, str], default: str) -> str:
    server = params.pop("server", default).rstrip("/")
    check_http_url(server, "param")
    if "{" in server or "}" in server:
        raise InvalidInput("param", "server must not contain braces")
    return server


def preset_target(preset: str, params: Mapping[str, str]) -> TemplateTarget:
    """The template a preset stands for. ``telegram``: the secret is the bot token, the
    parameter ``chat_id`` is required (``server`` for a self-hosted Bot API). ``bark``: the
    secret is the device key (``server`` and ``group`` optional)."""
    rest = dict(params)
    if preset == "telegram":
        server = _server(rest, TELEGRAM_SERVER)
        if "chat_id" not in rest:
            raise InvalidInput("param", "the telegram preset needs --param chat_id=ID")
        return TemplateTarget(
            url=server + "/bot{secret}/sendMessage",
            body={"chat_id": "{chat_id}", "text": "{title}\n{summary}",
                  "disable_web_page_preview": True},
            params=tuple(sorted(rest.items())), preset=preset)
    if preset == "bark":
        server = _server(rest, BARK_SERVER)
        rest.setdefault("group", "qinglong")
        return TemplateTarget(
            url=server + "/push",
            body={"device_key": "{secret}", "title": "{title}", "body": "{summary}",
                  "group": "{group}"},
            params=tuple(sorted(rest.items())), preset=preset)
    raise InvalidInput("preset", f"unknown preset {preset!r}; use {', '.join(PRESETS)}")
