"""`ql user reset-second-factor` and `ql user reseal-second-factors` on a SQLite file, as an
operator runs them (issue 23, item 4): a reset lets the user in with the password alone; a new
secret key reseals every second factor so its codes still work; both are audited as the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from qinglong.keyring import read_key_file
from qinglong.profiles.open import open_services
from qinglong.service import totp
from qinglong.service.second_factor import SecondFactors
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from qinglong.testing import FakeClock
from tests.support.ql_process import run_ql
from tests.support.test_api_support import PASSWORD, child_env

T0 = 1_800_000_000_000


def ql(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_ql([*args], timeout=60, env=child_env(env))


def test_a_reset_and_a_reseal_from_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, FakeClock(T0))
    finally:
        db.close()
    url = f"sqlite:///{path}"
    old_file, new_file = tmp_path / "old.key", tmp_path / "new.key"
    for file in (old_file, new_file):
        assert ql("secret", "new-key", "--out", str(file)).returncode == 0
    old, new = read_key_file(old_file, "old"), read_key_file(new_file, "new")
    clock = FakeClock(T0)
    services = open_services(url, clock)
    try:
        services.accounts.user_create("ann", "operator", PASSWORD)
        services.accounts.user_create("bob", "viewer", PASSWORD)
        under_old = SecondFactors(services.stores.accounts, clock, key=lambda: old)
        secrets = {}
        for name in ("ann", "bob"):
            secrets[name] = under_old.begin(name).secret
            under_old.confirm(name, totp.code_at(secrets[name], clock.now_ms()))
        clock.advance(30_000)

        moved = ql("user", "reseal-second-factors", "--old-key-file", str(old_file),
                   "--database-url", url, "--json", env={"QL_SECRET_KEY_FILE": str(new_file)})
        assert moved.returncode == 0, moved.stderr
        assert json.loads(moved.stdout) == {"from_key": old.key_id, "resealed": 2}
        under_new = SecondFactors(services.stores.accounts, clock, key=lambda: new)
        under_new.check_login("ann", totp.code_at(secrets["ann"], clock.now_ms()), None)
        no_key = ql("user", "reseal-second-factors", "--old-key-file", str(old_file),
                    "--database-url", url)
        assert no_key.returncode == 2 and "QL_SECRET_KEY" in no_key.stderr, no_key.stderr

        reset = ql("user", "reset-second-factor", "--username", "bob", "--database-url", url)
        assert (reset.returncode, reset.stdout) == (0, "bob: second factor removed\n")
        again = ql("user", "reset-second-factor", "--username", "bob", "--database-url", url)
        assert again.stdout == "bob had no second factor\n"
        ghost = ql("user", "reset-second-factor", "--username", "ghost", "--database-url", url)
        assert ghost.returncode == 2 and "ghost" in ghost.stderr
        assert services.accounts.login("bob", PASSWORD, client=None).view.username == "bob"
        assert under_new.view("ann", "operator").enabled
        audit = [(e.action, e.via) for e in services.accounts.audit_list(None, 20)]
        assert audit[:3] == [("second-factor.reset", "cli"), ("second-factor.reset", "cli"),
                             ("second-factor.reseal", "cli")]
    finally:
        services.close()
