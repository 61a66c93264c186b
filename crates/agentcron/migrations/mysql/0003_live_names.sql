-- agentcron schema, version 3 (MySQL/MariaDB): a task name is unique among tasks that are
-- not cancelled. No partial indexes here: a generated column holds the name of a live task
-- and NULL for a cancelled one, and NULLs never collide in a UNIQUE index.
ALTER TABLE tasks
    ADD COLUMN live_name VARCHAR(128) AS (IF(state <> 'cancelled', name, NULL)) PERSISTENT,
    ADD UNIQUE KEY tasks_live_name (live_name),
    ADD KEY tasks_by_name (name),
    DROP INDEX tasks_name;
