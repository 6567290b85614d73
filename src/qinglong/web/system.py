"""Routes about the server itself: /livez and /readyz (the only ones without authentication),
health with the processes serving the database, Prometheus /metrics (read scope), the OpenAPI
document and its docs page."""

from __future__ import annotations

import html
import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge, ProcessCollector
from starlette.responses import HTMLResponse, Response

from qinglong import __version__
from qinglong import metrics as ql_metrics
from qinglong.errors import QinglongError, StorageError
from qinglong.service.access import Reach
from qinglong.service.accounts import Level
from qinglong.service.processes import INSTANCE_STALE_MS, Instance
from qinglong.service.queue import QueueView
from qinglong.service.times import rfc3339
from qinglong.service.views.base import instant
from qinglong.service.views.system import HealthView, InstanceView, Liveness
from qinglong.web.problems import JsonAnswer, problem_response, status_for
from qinglong.web.routing import Call, Endpoint, Reply

ALIVE_WITHIN_MS = INSTANCE_STALE_MS  # seen this recently (and not stopped): alive


def livez(call: Call) -> Reply:
    del call
    return Reply(Liveness(status="alive"))


def readyz(call: Call) -> Response:
    """200 while the database answers; else 503 with the problem (its code says why)."""
    try:
        call.backend.ping()
    except QinglongError as exc:
        return problem_response(exc if status_for(exc) == 503 else StorageError(exc.message))
    except Exception:  # noqa: BLE001 - an untranslated driver error: not ready all the same
        return problem_response(StorageError("the database does not answer"))
    return JsonAnswer(Liveness(status="ready"))


def instance_view(item: Instance, now_ms: int) -> InstanceView:
    return InstanceView(
        id=item.instance_id, role=item.role, host=item.host, pid=item.pid,
        started_at=instant(item.started_at_ms), seen_at=instant(item.seen_at_ms),
        stopped_at=rfc3339(item.stopped_at_ms),
        alive=item.stopped_at_ms is None and now_ms - item.seen_at_ms <= ALIVE_WITHIN_MS,
        labels=dict(item.labels))


def health(call: Call) -> Reply:
    now_ms = call.clock.now_ms()
    call.backend.ping()
    return Reply(HealthView(
        status="ok", profile=call.backend.profile, version=__version__, time=instant(now_ms),
        instances=[instance_view(i, now_ms) for i in call.backend.processes.listed()]))


def queue(call: Call) -> Reply:
    return Reply(call.backend.queue())


INSTANCE_ROLES = ("control", "worker", "web", "serve")
_process_registry: CollectorRegistry | None = None
_process_lock = threading.Lock()


def process_registry() -> CollectorRegistry:
    """This process's own families, made once: its CPU, memory and descriptors, and the
    version."""
    global _process_registry
    with _process_lock:
        if _process_registry is None:
            registry = ql_metrics.new_registry()
            ProcessCollector(registry=registry)
            Gauge("ql_build_info", "Always 1: the qinglong version serving", ["version"],
                  registry=registry).labels(__version__).set(1)
            _process_registry = registry
        return _process_registry


def instances_registry(call: Call) -> CollectorRegistry:
    """The processes serving the database, alive now, by role (read at the scrape: one read
    of the small instances table)."""
    registry = CollectorRegistry(auto_describe=True)
    alive = Gauge("ql_instances_alive", "Processes serving this database seen alive within "
                  f"{ALIVE_WITHIN_MS // 1000} s, by role", ["role"], registry=registry)
    for role in INSTANCE_ROLES:
        alive.labels(role).set(0)
    now_ms = call.clock.now_ms()
    for item in call.backend.processes.listed():
        if item.stopped_at_ms is None and now_ms - item.seen_at_ms <= ALIVE_WITHIN_MS:
            alive.labels(item.role).inc()
    return registry


def metrics(call: Call) -> Response:
    """Prometheus text: this process (and, inside `ql serve --http`, its scheduler and
    executor), and the processes serving the database."""
    body = ql_metrics.render([*ql_metrics.published(), process_registry(),
                              instances_registry(call)])
    return Response(body, media_type=ql_metrics.CONTENT_TYPE)


def openapi_document(document: Callable[[], dict[str, object]]) -> Endpoint:
    def handler(call: Call) -> Reply:
        del call
        return Reply(document())

    handler.__name__ = "openapi"
    return Endpoint("GET", "/api/v1/openapi.json", handler, "This API's OpenAPI 3.1 document",
                    "system", Level.READ, media="application/json",
                    medias=("application/json",), reach=Reach.SELF)


def docs_endpoint(document: Callable[[], dict[str, object]]) -> Endpoint:
    def handler(call: Call) -> Response:
        del call
        return HTMLResponse(docs_page(document()))

    handler.__name__ = "docs"
    return Endpoint("GET", "/api/v1/docs", handler, "The API reference as a page", "system",
                    Level.READ, media="text/html", medias=("text/html",), reach=Reach.SELF)


def _schema_text(schema: object) -> str:
    if not isinstance(schema, dict):
        return ""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f'<a href="#schema-{html.escape(name)}">{html.escape(name)}</a>'
    if schema.get("type") == "array":
        return "array of " + _schema_text(schema.get("items"))
    for key in ("anyOf", "oneOf"):
        if key in schema and isinstance(schema[key], list):
            return " or ".join(_schema_text(part) for part in schema[key])
    if "enum" in schema:
        return " | ".join(html.escape(str(v)) for v in schema["enum"])
    if "const" in schema:
        return html.escape(str(schema["const"]))
    return html.escape(str(schema.get("type", "any")))


def docs_page(document: dict[str, object]) -> str:
    """A self-contained page (no scripts, nothing fetched): every route with its parameters,
    body and responses, then every schema with its fields."""
    info = document["info"]
    assert isinstance(info, dict)
    parts = [(f"<!doctype html><html><head><meta charset='utf-8'><title>"
              f"{html.escape(info['title'])}</title><style>body{{font-family:sans-serif;"
              "max-width:60em;margin:auto;padding:1em}code,pre{background:#f4f4f4}"
              "h3{margin-bottom:.2em}td{padding:0 .6em;vertical-align:top}</style></head><body>"),
             f"<h1>{html.escape(info['title'])} {html.escape(info['version'])}</h1>",
             f"<p>{html.escape(info['description'])}</p>",
             ("<p>The machine-readable document: <a href='/api/v1/openapi.json'>"
              "/api/v1/openapi.json</a>.</p><h2>Routes</h2>")]
    paths = document["paths"]
    assert isinstance(paths, dict)
    for path, operations in paths.items():
        for method, op in operations.items():
            parts.append(f"<h3><code>{method.upper()} {html.escape(path)}</code></h3>"
                         f"<p>{html.escape(op['summary'])}"
                         f" <em>(scope: {html.escape(op.get('x-qinglong-scope', 'none'))})</em></p>")
            if op.get("description"):
                parts.append(f"<p>{html.escape(op['description'])}</p>")
            rows = [f"<tr><td><code>{html.escape(p['name'])}</code></td><td>{p['in']}</td>"
                    f"<td>{_schema_text(p['schema'])}</td><td>{html.escape(p['description'])}"
                    "</td></tr>" for p in op.get("parameters", [])]
            if rows:
                parts.append("<table>" + "".join(rows) + "</table>")
            body = op.get("requestBody")
            if body:
                parts.append("<p>Body: " + _schema_text(
                    body["content"]["application/json"]["schema"]) + "</p>")
            answers = ", ".join(
                f"{status} " + " / ".join(_schema_text(c["schema"]) for c in
                                          answer.get("content", {}).values())
                for status, answer in op["responses"].items())
            parts.append(f"<p>Responses: {answers}</p>")
    parts.append("<h2>Schemas</h2>")
    components = document["components"]
    assert isinstance(components, dict)
    for name, schema in components["schemas"].items():
        parts.append(f"<h3 id='schema-{html.escape(name)}'>{html.escape(name)}</h3>")
        if schema.get("description"):
            parts.append(f"<p>{html.escape(schema['description'])}</p>")
        required = set(schema.get("required", []))
        rows = [f"<tr><td><code>{html.escape(field)}</code>{'' if field in required else '?'}"
                f"</td><td>{_schema_text(spec)}</td><td>{html.escape(spec.get('description', ''))}"
                "</td></tr>" for field, spec in schema.get("properties", {}).items()]
        if rows:
            parts.append("<table>" + "".join(rows) + "</table>")
    parts.append("</body></html>")
    return "".join(parts)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/livez", livez, "Alive while the process runs (no authentication)",
             "system", None, response=Liveness),
    Endpoint("GET", "/readyz", readyz, "Ready while the database answers (no authentication)",
             "system", None, response=Liveness),
    Endpoint("GET", "/api/v1/health", health, "Health: the database, and the processes "
             "serving it (replicas, workers, web servers)", "system", Level.READ,
             response=HealthView, reach=Reach.SELF),
    Endpoint("GET", "/api/v1/queue", queue, "The queued Runs: how many, the oldest's wait, and "
             "those that require worker labels by set, each marked when no live worker offers "
             "them all (docs/controls/placement.md)", "system", Level.READ,
             response=QueueView),
    Endpoint("GET", "/metrics", metrics, "Prometheus metrics of this process (text exposition "
             "format; docs/metrics.md)", "system", Level.READ, media="text/plain",
             medias=("text/plain",)),
)
