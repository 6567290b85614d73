"""Wake-ups (storage/wakeups.py): a commit tells this process's subscribers what it changed
(``schedules`` for definitions, ``runs`` for admissions), a rolled-back transaction tells
nothing, and on PostgreSQL another process hears it through its one LISTEN connection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qinglong.domain.manual import ManualRequest
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import Conflict
from qinglong.storage.admission.params import ManualRunParams
from qinglong.storage.definitions.params import ProjectCreateParams, TaskPublishParams
from qinglong.storage.open import OpenOptions, open_database
from qinglong.storage.postgres.listener import Listener
from qinglong.storage.stores import Stores
from qinglong.storage.wakeups import Wakeups
from tests.contract.conftest import Backend
from tests.support.ql import wait_for


class Heard:
    """What a process's subscribers were told, in order."""

    def __init__(self, wakeups: Wakeups) -> None:
        self.items: list[tuple[str, str]] = []
        for topic in ("schedules", "runs", "cancel"):
            wakeups.subscribe(topic, lambda payload, t=topic: self.items.append((t, payload)))


@pytest.fixture
def opened(backend: Backend) -> Iterator[tuple[Stores, Stores, Heard]]:
    wakeups = Wakeups()
    heard = Heard(wakeups)
    options = OpenOptions(on_commit=wakeups.publish)
    admin = open_database(backend.url("ql_admin"), clock=backend.clock(), options=options)
    runtime = open_database(backend.url("ql_runtime"), clock=backend.clock(), options=options)
    try:
        yield admin, runtime, heard
    finally:
        admin.close()
        runtime.close()


def test_a_commit_wakes_this_process_and_a_refused_write_does_not(
        opened: tuple[Stores, Stores, Heard]) -> None:
    admin, runtime, heard = opened
    admin.definitions.project_create(ProjectCreateParams(project_id="wake"))
    assert heard.items == [("schedules", "")]
    with pytest.raises(Conflict):  # refused: rolled back, nobody is told
        admin.definitions.project_create(ProjectCreateParams(project_id="wake"))
    assert heard.items == [("schedules", "")]
    admin.definitions.task_publish(TaskPublishParams(
        project_id="wake", task_id="t", name="t",
        spec=CommandSpec(command=ShellCommand(command="true"))))
    assert heard.items == [("schedules", ""), ("schedules", "")]
    runtime.admissions.run_admit_manual(ManualRunParams(request=ManualRequest(
        project_id="wake", task_id="t", trigger_id=None, request_id="r1", actor="alice")))
    assert heard.items[2:] == [("runs", "")]
    runtime.admissions.run_admit_manual(ManualRunParams(request=ManualRequest(
        project_id="wake", task_id="t", trigger_id=None, request_id="r1", actor="alice")))
    assert heard.items[3:] == []  # sent again: nothing admitted, nobody woken


def test_another_process_hears_a_commit_through_its_listen_connection(
        pg_backend: Backend) -> None:
    """PostgreSQL: the NOTIFY a commit sends reaches the Wakeups of another process; a
    rolled-back transaction's never does."""
    other = Wakeups()
    heard = Heard(other)
    listener = Listener(pg_backend.url("ql_runtime"), "contract-listen", other,
                        topics=("schedules",))
    admin = open_database(pg_backend.url("ql_admin"), clock=pg_backend.clock())
    listener.start()
    try:
        wait_for(lambda: other.reliable, 30, "the LISTEN connection")
        # on connecting it wakes its subscribers once: what was sent while nobody listened
        assert heard.items == [("schedules", "")] and other.received == 0
        heard.items.clear()
        admin.definitions.project_create(ProjectCreateParams(project_id="dup"))
        wait_for(lambda: heard.items == [("schedules", "")], 30, "the publish heard")
        with pytest.raises(Conflict):  # refused: rolled back, its NOTIFY is never delivered
            admin.definitions.project_create(ProjectCreateParams(project_id="dup"))
        admin.definitions.project_create(ProjectCreateParams(project_id="heard"))
        wait_for(lambda: len(heard.items) == 2, 30, "the second publish heard")
        assert heard.items == [("schedules", ""), ("schedules", "")]
        assert other.received == 2
    finally:
        listener.stop()
        admin.close()
