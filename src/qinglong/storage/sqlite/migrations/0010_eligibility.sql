-- The one statement of what lets a trigger fire (storage/admission): its head's current
-- revision is enabled and of a schedule kind this version decides, it pins its task's current
-- revision with that revision's digest, that revision is enabled, and its project is active.
-- The claim and the commit of the scheduler ask this view, so the rule lives in one place
-- (PostgreSQL has the same view, its migration 0012).
CREATE VIEW eligible_triggers AS
SELECT h.project_id, h.trigger_id, h.current_revision AS trigger_revision
FROM triggers h
JOIN trigger_revisions tr
  ON tr.project_id = h.project_id AND tr.trigger_id = h.trigger_id
 AND tr.revision = h.current_revision
JOIN task_definitions th
  ON th.project_id = tr.project_id AND th.task_id = tr.task_id
 AND th.current_revision = tr.task_revision
JOIN task_definition_revisions kr
  ON kr.project_id = tr.project_id AND kr.task_id = tr.task_id AND kr.revision = tr.task_revision
 AND kr.content_digest = tr.task_content_digest
JOIN projects p ON p.id = h.project_id
WHERE p.status = 'active' AND tr.enabled = 1 AND kr.enabled = 1
  AND json_extract(tr.spec_json, '$.schema') IN ('qinglong/cron@v1', 'qinglong/interval@v1',
                                                 'qinglong/once@v1');
