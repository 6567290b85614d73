-- Cheaper Run inserts (issue 20). runs.project_id no longer references projects: the
-- reference was checked by a trigger for every Run written, which read the project's row
-- and locked it FOR KEY SHARE, so every transaction writing Runs took a lock on the same
-- row (concurrent ones turn it into a multixact). It guarded nothing a path can break: no
-- role may delete a project (they are archived, never deleted), and every Run copies its
-- project from the task revision it runs, which references projects itself and is read and
-- verified in the transaction that writes the Run.
ALTER TABLE qinglong.runs DROP CONSTRAINT runs_project_id_fkey;
