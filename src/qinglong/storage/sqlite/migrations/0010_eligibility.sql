-- The one statement of what lets a trigger fire (storage/schedules): its current revision
-- is enabled, pins its task's current revision (same digest), that revision is enabled, and
-- its project is active. The scheduler's claim and commit, run now and backfill all ask this
-- view, so the rule lives in one place per dialect.
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
WHERE p.status = 'active' AND tr.enabled = 1 AND kr.enabled = 1;
