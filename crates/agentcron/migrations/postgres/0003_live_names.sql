-- agentcron schema, version 3 (PostgreSQL): a task name is unique among tasks that are
-- not cancelled, so a deleted task's name can be used again.
ALTER TABLE tasks DROP CONSTRAINT tasks_name_key;
CREATE UNIQUE INDEX tasks_live_name ON tasks (name) WHERE state <> 'cancelled';
CREATE INDEX tasks_by_name ON tasks (name);
