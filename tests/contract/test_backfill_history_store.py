"""Issue 18, item 7, on every database: a backfill reaches back before the trigger's first
publish (the history of a migrated crontab) and admits one Run per occurrence there too, up
to the cursor, which still bounds it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import InvalidInput
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from tests.contract.conftest import Backend
from tests.contract.test_backfill import SECOND, Bed, backfill_store, next_second


@pytest.fixture
def bed(backend: Backend) -> Iterator[Bed]:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="Hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    published = d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="tick", task_id="hello", expression="* * * * * *",
        timezone="UTC"))
    yield Bed(backend, backfill_store(backend), next_second(published.revision.created_at_ms))


def test_occurrences_before_the_first_publish_are_backfilled_once_each(bed: Bed) -> None:
    first = bed.first  # the trigger's first occurrence after its publish
    bed.backend.set_cursor("demo", "tick", first + 3 * SECOND)  # decided up to there
    earlier = first - 10 * SECOND
    progress = bed.backfill(earlier, first + 2 * SECOND)
    wanted = [earlier + n * SECOND for n in range(13)]
    assert (progress.state, progress.admitted, [at for at, _ in progress.runs]) == (
        "done", 13, wanted)
    assert bed.runs() == [(at, "backfill") for at in wanted]
    again = bed.backfill(earlier, first + 2 * SECOND)  # a rerun admits nothing twice
    assert (again.admitted, again.existing) == (0, 13)
    with pytest.raises(InvalidInput) as refused:  # the cursor still bounds it
        bed.plan(earlier, first + 3 * SECOND)
    assert refused.value.field == "to" and "cursor" in refused.value.rule
    assert bed.counts() == (13, 13, 26)
