"""Labels on tasks and triggers as the surfaces ask for them (``PUT .../labels``, ``ql label``)
and as the listings show them: set and cleared by an operator of the project, outside the
revisions (setting one publishes nothing). A listing reads the labels of its whole project
(or of every project) in one statement and puts them on its views (``with_labels``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.organise import check_kind, check_label
from qinglong.service.views.base import ViewModel
from qinglong.service.views.organise import LabelsView
from qinglong.storage.labels import LabelMap, LabelsSetParams, LabelStore

V = TypeVar("V", bound=ViewModel)


def with_labels(views: Sequence[V], found: LabelMap, key: Callable[[V], tuple[str, str]]
                ) -> list[V]:
    """``views``, each with its labels (an empty list when it has none)."""
    return [view.model_copy(update={"labels": list(found.get(key(view), ()))})
            for view in views]


def label_filter(label: str | None) -> str | None:
    """A listing's ``label`` filter, checked (None: no filter)."""
    return None if label is None else check_label(label)


class Labels:
    def __init__(self, store: LabelStore) -> None:
        self._store = store

    def put(self, kind: str, project: str, entity: str, labels: Sequence[str]) -> LabelsView:
        """Replace the labels of a live task or trigger (an empty list clears them)."""
        check_kind(kind)
        found = self._store.labels_set(LabelsSetParams(
            kind=kind, project_id=project_id(project), entity_id=entity_id(entity, kind),
            labels=labels))
        return LabelsView(project=project, kind=kind, id=entity, labels=list(found))

    def of(self, kind: str, project: str | None, entity: str | None = None) -> LabelMap:
        """The labels of the tasks (of a project) or triggers (of a project or every one)."""
        return self._store.labels_of(kind, project, entity)
