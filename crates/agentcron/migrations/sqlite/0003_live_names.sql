-- no-transaction
-- agentcron schema, version 3 (SQLite): a task name is unique among tasks
-- that are not cancelled, so a deleted task's name can be used again (the
-- cancelled task keeps its name and its history).
--
-- SQLite cannot drop a column's UNIQUE constraint, so the table is rebuilt
-- (the documented procedure: foreign keys off, copy, swap, check, on).
-- `-- no-transaction` above lets this file switch foreign keys off; the
-- rebuild itself is one transaction.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
CREATE TABLE tasks_new (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    spec         TEXT NOT NULL,               -- TaskSpec as JSON
    state        TEXT NOT NULL,               -- active | paused | cancelled | completed
    next_fire_at INTEGER,                     -- NULL: nothing to plan
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
INSERT INTO tasks_new (id, name, spec, state, next_fire_at, version, created_at, updated_at)
    SELECT id, name, spec, state, next_fire_at, version, created_at, updated_at FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;
CREATE INDEX tasks_due ON tasks (next_fire_at) WHERE state = 'active';
CREATE UNIQUE INDEX tasks_live_name ON tasks (name) WHERE state <> 'cancelled';
CREATE INDEX tasks_by_name ON tasks (name);
COMMIT;
PRAGMA foreign_keys = ON;
