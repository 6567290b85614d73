"""Issue 18, authentication, the parts without a database: the password rule, the hash gate,
the session touch interval, trusted proxies and the plain-HTTP login, the password file."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from qinglong.cli.commands.user import first_line
from qinglong.errors import InvalidConfig, InvalidInput, RateLimited
from qinglong.service.accounts import SessionPolicy
from qinglong.service.hash_gate import HashGate
from qinglong.service.passwords import check_password
from qinglong.web.transport import Transport, is_loopback_host, parse_trusted_proxies


@pytest.mark.parametrize(("password", "why"), [
    ("password12", "common password"),
    ("Password123!", "common password"),
    ("P@ssw0rd2024", "common password"),
    ("2024summer!", "common password"),
    ("passwordpassword", "common password"),
    ("qinglong2026", "common password"),
    ("woaini1314520", "common password"),
    ("qwertyuiop", "keyboard or alphabet sequence"),
    ("1q2w3e4r5t", "keyboard or alphabet sequence"),
    ("abcdef1234", "keyboard or alphabet sequence"),
    ("0987654321", "keyboard or alphabet sequence"),
    ("aaaaaaaaaa", "too repetitive"),
    ("1212121212", "too repetitive"),
    ("8675309123", "only digits and symbols"),
    ("tiger12345", "short word padded"),
    ("ann.lee2024", "the user name"),
    ("short", "must be 10-1024 characters"),
], ids=lambda value: str(value).replace(" ", "_"))
def test_easily_guessed_passwords_are_refused_with_the_rule_not_the_password(
        password: str, why: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_password(password, username="ann.lee")
    assert why in refused.value.rule, refused.value.rule
    assert password not in refused.value.message


@pytest.mark.parametrize("password", [
    "correct horse battery staple", "trombone2024", "Tr0ub4dor&3", "Zk9#xq2!7bLm",
    "lighthouse-walrus-57", "my cat eats tulips", "青龙定时任务很好用吧"])
def test_passphrases_and_random_passwords_pass(password: str) -> None:
    assert check_password(password, username="ann") == password


def test_the_hash_gate_refuses_beyond_its_slots_and_queue_and_frees_its_slot() -> None:
    gate = HashGate(slots=1, queue=0)
    with gate.slot():
        assert (gate.busy, gate.waiting) == (1, 0)
        with pytest.raises(RateLimited) as refused, gate.slot():
            pass
        assert refused.value.retry_after_s == 1
    assert gate.busy == 0
    with gate.slot():  # free again
        assert gate.busy == 1
    with pytest.raises(ValueError, match="at least one slot"):
        HashGate(slots=0)


@pytest.mark.parametrize(("idle_ms", "touch_ms"), [
    (60_000, 15_000), (120_000, 30_000), (3_600_000, 60_000), (2, 1)])
def test_a_session_is_touched_four_times_per_idle_window_at_most_once_a_minute(
        idle_ms: int, touch_ms: int) -> None:
    assert SessionPolicy(idle_ms=idle_ms).touch_after_ms == touch_ms


def test_trusted_proxies_are_addresses_or_networks() -> None:
    assert [str(n) for n in parse_trusted_proxies(["10.0.0.5", "10.1.0.0/16", "::1"])] == [
        "10.0.0.5/32", "10.1.0.0/16", "::1/128"]
    for bad in ("proxy.local", "10.0.0.0/33", "*", ""):
        with pytest.raises(InvalidConfig) as refused:
            parse_trusted_proxies([bad])
        assert refused.value.field == "--trusted-proxy"


@pytest.mark.parametrize(("host", "loopback"), [
    ("localhost", True), ("localhost:8080", True), ("127.0.0.1:8080", True),
    ("127.8.9.10", True), ("[::1]:8080", True), ("app.localhost", True),
    ("192.0.2.10:8080", False), ("ql.example.com", False), ("[2001:db8::1]:443", False),
    ("", False)])
def test_which_hosts_a_browser_keeps_a_secure_cookie_for_over_http(host: str,
                                                                   loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def _through(trusted: list[str], peer: str, headers: list[tuple[bytes, bytes]],
             path: str = "/api/v1/projects") -> tuple[dict[str, Any] | None, list[Any]]:
    """One request through the Transport middleware: the scope the app saw (None: answered
    before it) and what was sent."""
    seen: list[dict[str, Any]] = []
    sent: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(dict(scope))

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    middleware = Transport(app, parse_trusted_proxies(trusted))
    scope = {"type": "http", "method": "POST", "path": path, "scheme": "http",
             "client": (peer, 5555), "server": ("127.0.0.1", 8080),
             "headers": headers if any(name == b"host" for name, _ in headers)
             else [(b"host", b"127.0.0.1:8080"), *headers]}
    asyncio.run(middleware(scope, receive, send))
    return (seen[0] if seen else None), sent


def test_forwarded_headers_count_only_from_trusted_proxies() -> None:
    xff = [(b"x-forwarded-for", b"198.51.100.7"), (b"x-forwarded-proto", b"https")]
    scope, _ = _through([], "127.0.0.1", xff)
    assert scope is not None and (scope["client"], scope["scheme"]) == (("127.0.0.1", 5555),
                                                                        "http")
    scope, _ = _through(["127.0.0.1"], "127.0.0.1", xff)
    assert scope is not None and (scope["client"][0], scope["scheme"]) == ("198.51.100.7",
                                                                           "https")
    chain = [(b"x-forwarded-for", b"6.6.6.6, 198.51.100.7, 10.0.0.2")]
    scope, _ = _through(["127.0.0.1", "10.0.0.0/8"], "127.0.0.1", chain)
    assert scope is not None and scope["client"][0] == "198.51.100.7"  # 6.6.6.6: its claim
    for junk in (b"not-an-address", b"198.51.100.7, <script>", b""):
        scope, _ = _through(["127.0.0.1"], "127.0.0.1", [(b"x-forwarded-for", junk)])
        assert scope is not None and scope["client"][0] == "127.0.0.1", junk
    scope, _ = _through(["10.0.0.0/8"], "192.0.2.1", xff)  # the peer is no trusted proxy
    assert scope is not None and scope["client"][0] == "192.0.2.1"


def test_a_plain_http_login_for_a_remote_host_is_answered_before_the_app() -> None:
    remote = [(b"host", b"192.0.2.10:8080")]
    scope, sent = _through([], "192.0.2.99", remote, path="/api/v1/session")
    assert scope is None and sent[0]["status"] == 403
    assert b"QL_INSECURE_TRANSPORT" in sent[1]["body"]
    headers = dict(sent[0]["headers"])
    assert headers[b"content-type"] == b"application/problem+json"
    assert headers[b"x-content-type-options"] == b"nosniff"
    scope, _ = _through(["127.0.0.1"], "127.0.0.1",
                        [*remote, (b"x-forwarded-proto", b"https")], path="/api/v1/session")
    assert scope is not None  # HTTPS at the trusted proxy
    scope, _ = _through([], "192.0.2.99", remote, path="/api/v1/projects")
    assert scope is not None  # only the login sets the cookie


def test_the_password_file_must_be_a_small_regular_file(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_text("correct horse battery staple\nmore\n")
    assert first_line(good) == "correct horse battery staple"
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for path, rule in ((pipe, "is not a regular file"), (tmp_path, "is not a regular file"),
                       (tmp_path / "missing", "cannot read it")):
        with pytest.raises(InvalidInput) as refused:
            first_line(path)
        assert refused.value.rule.startswith(rule), refused.value.rule
    big = tmp_path / "big"
    big.write_bytes(b"x" * 4097)
    with pytest.raises(InvalidInput, match="larger than 4096 bytes"):
        first_line(big)
    big.write_bytes(b"x" * 4096)
    assert first_line(big) == "x" * 4096
    latin = tmp_path / "latin"
    latin.write_bytes(b"caf\xe9 au lait, tr\xe8s chaud")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        first_line(latin)
