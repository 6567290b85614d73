"""/metrics over HTTP from a real `ql serve --http` (SQLite) and a `ql web` beside it: a
token with read scope is needed, and the scrape carries the scheduler's per-trigger lag, the
executor's finished Runs per task and trigger, and the processes serving the database."""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_api_sqlite import migrated
from tests.support.test_api_support import Http, make_people, start_server, start_web

WAIT_S = 30.0
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(http: Http, token_auth: object) -> Samples:
    answer = http.call("GET", "/metrics", auth=token_auth)  # type: ignore[arg-type]
    assert answer.status == 200, answer.raw[:300]
    assert answer.headers["content-type"].startswith("text/plain"), answer.headers
    assert answer.headers.get("cache-control") == "no-store"
    found: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_serve_http_exposes_per_trigger_metrics_to_a_read_token(tmp_path: Path) -> None:
    url, _ = migrated(tmp_path)
    people = make_people(url)
    admin, viewer = people.tokens["admin"], people.tokens["viewer"]
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0",
                           "--interval", "250ms"], tmp_path / "serve.log")
    web = None
    try:
        http = server.http
        # nothing without a token: a problem object, like every other route
        http.call("GET", "/metrics").problem(401, "QL_UNAUTHENTICATED")
        http.call("GET", "/metrics", headers={"Authorization": "Bearer qlt_nope"}).problem(401)
        http.ok("POST", "/api/v1/projects", admin, {"id": "demo"}, 201)
        http.ok("POST", "/api/v1/projects/demo/tasks/hello/revisions", admin,
                {"command": {"kind": "argv", "argv": ["/bin/true"]}}, 201)
        http.ok("POST", "/api/v1/projects/demo/triggers/tick/revisions", admin,
                {"task": "hello", "cron": "* * * * * *", "timezone": "UTC"}, 201)
        deadline = time.monotonic() + WAIT_S
        while True:
            samples = scrape(http, viewer)
            finished = value(samples, "ql_runs_finished_total", project="demo", task="hello",
                             trigger="tick", status="succeeded")
            if finished:
                break
            assert time.monotonic() < deadline, (samples, server.log.read_text()[-2000:])
            time.sleep(0.25)
        tick = {"project": "demo", "trigger": "tick"}
        assert (value(samples, "ql_trigger_admission_lag_seconds_count", **tick) or 0) >= 1
        assert value(samples, "ql_trigger_admission_lag_seconds_bucket", le="+Inf", **tick) == \
            value(samples, "ql_trigger_admission_lag_seconds_count", **tick)
        assert (value(samples, "ql_trigger_admitted_total", **tick) or 0) >= 1
        assert (value(samples, "ql_run_duration_seconds_count", project="demo", task="hello",
                      trigger="tick") or 0) >= 1
        assert value(samples, "ql_worker_slots") == 4
        assert value(samples, "ql_queue_depth") is not None
        assert value(samples, "ql_instances_alive", role="serve") == 1
        assert value(samples, "ql_metrics_label_limit", cap="trigger") == 100
        assert any(key[0] == "process_resident_memory_bytes" for key in samples)
        assert any(key[0] == "ql_build_info" for key in samples)

        # `ql web` on the same file: its own process, and the processes serving the database
        web = start_web(url, tmp_path)
        web.http.call("GET", "/metrics").problem(401, "QL_UNAUTHENTICATED")
        beside = scrape(web.http, viewer)
        assert value(beside, "ql_instances_alive", role="serve") == 1
        assert value(beside, "ql_instances_alive", role="web") == 1
        assert not any(key[0].startswith("ql_trigger_") for key in beside)  # no scheduler here
    finally:
        if web is not None:
            assert web.stop() == 0, web.log.read_text()
        assert server.stop() == 0, server.log.read_text()
