"""Flows as the surfaces ask for them (`ql flow ...`, the HTTP API, the panel): publish a
flow document, read flows, start one (once per request id), show, list and cancel flow runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from qinglong.domain.flow import parse_flow
from qinglong.domain.flow_runs import FlowStart
from qinglong.domain.identifiers import project_id as check_project
from qinglong.errors import InvalidInput
from qinglong.ids import new_uuid
from qinglong.service.views.flows import (
    FlowPublishView,
    FlowRunView,
    FlowStartView,
    FlowView,
    flow_run_view,
    flow_view,
)
from qinglong.storage.runs.flow_store import FlowStore


class Flows:
    def __init__(self, store: FlowStore, *,
                 new_request_id: Callable[[], str] = new_uuid) -> None:
        self._store = store
        self._new_request_id = new_request_id

    def publish(self, document: object, project_id: str | None = None) -> FlowPublishView:
        """Publish a flow document (a mapping from YAML or JSON) into ``project_id``, or the
        project the document names; refused when both are given and differ."""
        parsed = parse_flow(document)
        project = project_id or parsed.project_id
        if project is None:
            raise InvalidInput("project", "name the project (--project, or project: in the "
                                          "document)")
        if parsed.project_id is not None and parsed.project_id != project:
            raise InvalidInput("project", f"the document is for project {parsed.project_id}, "
                                          f"not {project}")
        published = self._store.flow_publish(parsed, check_project(project))
        return flow_view(published.revision).extended(FlowPublishView,
                                                      created=published.created)

    def get(self, project_id: str, flow_id: str) -> FlowView:
        return flow_view(self._store.flow_get(project_id, flow_id))

    def list_flows(self, project_id: str) -> list[FlowView]:
        return [flow_view(r) for r in self._store.flow_list(project_id)]

    def request(self, project_id: str, flow_id: str, *, actor: str,
                request_id: str | None = None,
                parameters: Mapping[str, object] | None = None) -> FlowStart:
        return FlowStart(project_id=project_id, flow_id=flow_id, actor=actor,
                         request_id=request_id if request_id is not None
                         else self._new_request_id(), parameters=dict(parameters or {}))

    def start(self, start: FlowStart) -> FlowStartView:
        started = self._store.flow_start(start)
        return self.show(started.flow_run_id).extended(
            FlowStartView, started=started.started, in_doubt=started.in_doubt)

    def show(self, flow_run_id: str) -> FlowRunView:
        run = self._store.flow_run_get(self._store.flow_run_id(flow_run_id))
        revision = self._store.flow_revision_get(run.project_id, run.flow_id, run.flow_revision)
        return flow_run_view(run, revision)

    def list_runs(self, project_id: str, flow_id: str | None = None,
             limit: int = 50) -> list[FlowRunView]:
        found = self._store.flow_run_list(project_id, flow_id, limit)
        revisions = {}
        views = []
        for run in found:
            key = (run.flow_id, run.flow_revision)
            if key not in revisions:
                revisions[key] = self._store.flow_revision_get(run.project_id, *key)
            views.append(flow_run_view(run, revisions[key]))
        return views

    def cancel(self, flow_run_id: str, actor: str) -> FlowRunView:
        full = self._store.flow_run_id(flow_run_id)
        run = self._store.flow_cancel(full, actor_id=actor)
        revision = self._store.flow_revision_get(run.project_id, run.flow_id, run.flow_revision)
        return flow_run_view(run, revision)


def read_flow_file(path: str) -> object:
    """The document in a flow file (YAML, of which JSON is a part); InvalidInput naming the
    file, and the line, when it cannot be read or parsed."""
    import yaml  # type: ignore[import-untyped, unused-ignore]

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput("file", f"{path}: cannot be read ({exc})") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise InvalidInput("file", f"{path}{where}: {problem}") from None
    return document
