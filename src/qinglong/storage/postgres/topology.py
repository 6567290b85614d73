"""Pick the one writable primary among the hosts of a (multi-host) URL, or refuse.

libpq's ``target_session_attrs=read-write`` connects to the first writable host it finds,
so after a failover a stale old primary that was restarted writable (split brain) could be
chosen if it is listed first. Before every activation we ask every listed host instead: it
must be a writable primary, and when several are, they must not be two primaries of the
same cluster (same system identifier). The survivor is the highest timeline; two writable
primaries of one cluster are refused, whatever their timelines, until one is fenced.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from qinglong.errors import NotReady
from qinglong.storage.postgres.connection import conninfo

PROBE = (
    "SELECT (SELECT system_identifier FROM pg_control_system())::text AS system_identifier, "
    "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int AS timeline, "
    "current_setting('transaction_read_only') = 'on' AS read_only"
)


@dataclass(frozen=True, slots=True)
class HostFacts:
    host: str
    port: str
    system_identifier: str
    timeline: int


def _hosts(params: dict[str, str]) -> list[tuple[str, str]]:
    hosts = params.get("host", "").split(",")
    ports = params.get("port", "").split(",") if params.get("port") else [""]
    if len(ports) == 1:
        ports = ports * len(hosts)
    return list(zip(hosts, ports, strict=False))


def choose_primary(url: str, *, application_name: str, timeout_s: int = 3) -> str:
    """A conninfo naming exactly one host: the writable primary. Single-host URLs pass through."""
    params = psycopg.conninfo.conninfo_to_dict(conninfo(url, application_name=application_name))
    hosts = _hosts({k: str(v) for k, v in params.items()})
    if len(hosts) <= 1:
        return url
    writable: list[HostFacts] = []
    for host, port in hosts:
        single = {**params, "host": host, "port": port, "connect_timeout": str(timeout_s)}
        single.pop("target_session_attrs", None)
        try:
            with psycopg.connect(**single, autocommit=True) as conn:  # type: ignore[arg-type]
                row = conn.execute(PROBE).fetchone()
        except psycopg.Error:
            continue  # a standby or an unreachable host is simply not a candidate
        if row is not None and not row[2]:
            writable.append(HostFacts(host, port, str(row[0]), int(row[1])))
    if not writable:
        raise NotReady(["no-writable-primary"], "none of the listed hosts is a writable primary")
    clusters = {facts.system_identifier for facts in writable}
    if len(writable) > 1 and len(clusters) < len(writable):
        listed = ", ".join(f"{f.host}:{f.port} (timeline {f.timeline})" for f in writable)
        raise NotReady(["split-brain"], f"two writable primaries of one cluster: {listed}; "
                       "fence the stale one before replicas may write")
    chosen = max(writable, key=lambda facts: facts.timeline)
    single = {k: v for k, v in params.items() if k not in ("target_session_attrs", "host", "port")}
    return psycopg.conninfo.make_conninfo("", **single, host=chosen.host, port=chosen.port)
