"""The label store: organising tags on tasks and triggers (migrations 0027_labels /
0026_labels; queries/labels.sql), written once over the kernel. Labels live beside the
heads, outside the revisions: setting them publishes nothing.

- ``labels_set`` replaces the labels of a live (not deleted) task or trigger with the ones
  given (none: cleared), in one transaction; NotFound when there is no such live one.
- ``labels_of`` reads the labels of the tasks of a project, or of the triggers of a project
  or of every project (of one entity when ``entity_id`` is given), as a map from
  (project, entity) to its sorted labels: one statement, whatever the number of entities.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qinglong.domain.identifiers import entity_id as check_entity
from qinglong.domain.identifiers import project_id as check_project
from qinglong.domain.organise import check_kind, check_labels
from qinglong.errors import InvalidInput, NotFound
from qinglong.storage.kernel import Database
from qinglong.storage.units import TxUnit, UnitStore, reads, writes

LabelMap = dict[tuple[str, str], tuple[str, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelsSetParams:
    kind: str  # task | trigger
    project_id: str
    entity_id: str
    labels: Sequence[str]  # the whole new set (empty: clear)


class LabelRows(TxUnit):
    def labels_set(self, params: LabelsSetParams) -> tuple[str, ...]:
        kind = check_kind(params.kind)
        key = {"project_id": check_project(params.project_id),
               "entity_id": check_entity(params.entity_id, kind)}
        labels = check_labels(params.labels)
        if self._one(f"label_{kind}_live", key) is None:
            raise NotFound(kind, params.entity_id)
        self._run(f"{kind}_labels_clear", key)
        for label in labels:
            self._run(f"{kind}_label_insert", {**key, "label": label})
        return labels

    def labels_of(self, kind: str, project_id: str | None,
                  entity_id: str | None = None) -> LabelMap:
        if check_kind(kind) == "task" and project_id is None:
            raise InvalidInput("project", "is required for the labels of tasks")
        found: dict[tuple[str, str], list[str]] = {}
        for row in self._all(f"{kind}_labels_list", {"project_id": project_id,
                                                     "entity_id": entity_id}):
            found.setdefault((str(row["project_id"]), str(row["entity_id"])), []).append(
                str(row["label"]))
        return {key: tuple(labels) for key, labels in found.items()}


class LabelStore(UnitStore[LabelRows]):
    def __init__(self, db: Database) -> None:
        super().__init__(db, LabelRows)

    labels_set = writes("set labels", LabelRows.labels_set)
    labels_of = reads("read labels", LabelRows.labels_of)
