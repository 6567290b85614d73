"""Run now as the surfaces ask for it: `ql task run`, `ql trigger fire` (and the HTTP API when
it comes) admit one manual Run through the store and answer with the Run's view."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from qinglong.domain.manual import ManualRequest
from qinglong.ids import new_uuid
from qinglong.service.views.runs import RunNowView, run_view
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.admission.params import ManualRunParams
from qinglong.storage.runs import RunStore


class ManualRuns:
    def __init__(self, store: RequestAdmissions, runs: RunStore, *,
                 new_request_id: Callable[[], str] = new_uuid) -> None:
        self._store = store
        self._runs = runs
        self._new_request_id = new_request_id

    def request(self, project_id: str, *, actor: str, request_id: str | None = None,
                task_id: str | None = None, trigger_id: str | None = None,
                parameters: Mapping[str, object] | None = None) -> ManualRequest:
        """A validated request; without a request id, a fresh one (the caller shows it, so the
        same request can be sent again safely). ``parameters``: values for the task's
        parameters (checked against its declaration when the Run is admitted)."""
        return ManualRequest(project_id=project_id, task_id=task_id, trigger_id=trigger_id,
                             request_id=request_id if request_id is not None
                             else self._new_request_id(), actor=actor,
                             parameters=dict(parameters or {}))

    def admit(self, request: ManualRequest) -> RunNowView:
        """Admit the Run ``request`` asks for (or find the one it admitted before): the Run's
        view, with ``admitted`` False when nothing new was written."""
        result = self._store.run_admit_manual(ManualRunParams(request=request))
        detail = self._runs.run_get(result.run_id)
        return run_view(detail.run).extended(RunNowView, admitted=result.admitted,
                                             in_doubt=result.in_doubt)

