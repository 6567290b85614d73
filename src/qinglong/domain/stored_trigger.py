"""Stored trigger revisions rebuilt from their spec's stored text, with less work per row.

A burst rebuilds thousands of revisions that this process has never seen (every one is
digest-verified on first sight), and a fleet's revisions mostly carry the same spec text.
Parsing a spec text is a pure function of the text, so ``stored_spec`` parses each distinct
text once and keeps the spec with its canonical JSON. Each revision is still checked on its
own: its identifiers validated and its digest recomputed over its whole content, written out
by ``content_text`` byte for byte as ``canonical_json(revision.content())`` would be
(tests/unit/test_stored_trigger.py compares the two over generated revisions).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from json.encoder import encode_basestring

from qinglong.domain.canonical import canonical_json, parse_json_object, rebuild_verified
from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.task import check_revision
from qinglong.domain.trigger import (
    TRIGGER_DIGEST_PREFIX,
    TriggerRevision,
    TriggerSpec,
    parse_trigger_envelope,
)

STORED_SPECS = 1024
"""Distinct spec texts kept parsed (a fleet has few: its expressions, zones and policies)."""

_PREFIX = TRIGGER_DIGEST_PREFIX.encode("utf-8") + b"\x00"


@lru_cache(maxsize=STORED_SPECS)
def stored_spec(text: str) -> tuple[TriggerSpec, str]:
    """The spec a stored text holds (parsed as from a verified revision) and the canonical
    JSON of its envelope. Raises RecordCorrupt or InvalidInput for a text that does not
    parse; a failure is never kept, so the same text fails again next time."""
    spec = parse_trigger_envelope(parse_json_object(text, "trigger spec"), stored=True)
    return spec, canonical_json(spec.envelope())


def content_text(revision: TriggerRevision, spec_text: str) -> str:
    """``canonical_json(revision.content())``, given ``spec_text`` =
    ``canonical_json(revision.spec.envelope())``: the keys in sorted order, strings escaped
    as the canonical encoder escapes them (``ensure_ascii=False``)."""
    return "".join((
        '{"enabled":', "true" if revision.enabled else "false",
        ',"projectId":', encode_basestring(revision.project_id),
        ',"revision":', str(revision.revision),
        ',"spec":', spec_text,
        ',"taskContentDigest":', encode_basestring(revision.task_content_digest),
        ',"taskId":', encode_basestring(revision.task_id),
        ',"taskRevision":', str(revision.task_revision),
        ',"triggerId":', encode_basestring(revision.trigger_id),
        "}",
    ))


def trigger_revision_from_text(row: Mapping[str, object], spec_text: str) -> TriggerRevision:
    """Rebuild a stored trigger revision whose spec is stored as JSON text and verify its
    digest: the same checks and the same result as ``trigger_revision_from_row`` (a record
    that fails them is RecordCorrupt)."""
    what = f"trigger revision {row['project_id']}/{row['trigger_id']}@{row['revision']}"

    def build() -> TriggerRevision:
        spec, canonical_spec = stored_spec(spec_text)
        revision = TriggerRevision(
            project_id=project_id(str(row["project_id"])),
            trigger_id=entity_id(str(row["trigger_id"]), "trigger"),
            task_id=entity_id(str(row["task_id"]), "task"),
            revision=check_revision(int(row["revision"]), "revision"),  # type: ignore[call-overload]
            task_revision=check_revision(int(row["task_revision"]),  # type: ignore[call-overload]
                                         "task revision"),
            task_content_digest=str(row["task_content_digest"]),
            spec=spec,
            enabled=bool(row["enabled"]),
            content_digest="",
            created_at_ms=int(row["created_at_ms"]),  # type: ignore[call-overload]
        )
        text = content_text(revision, canonical_spec).encode("utf-8")
        digest = hashlib.sha256(_PREFIX + text).hexdigest()
        return replace(revision, content_digest=digest)

    return rebuild_verified(what, row, build)
