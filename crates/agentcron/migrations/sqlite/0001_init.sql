-- agentcron schema, version 1 (SQLite). Instants are epoch milliseconds (INTEGER).
-- PostgreSQL and MySQL get the same version numbers in their own folders.

CREATE TABLE tasks (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    spec         TEXT NOT NULL,               -- TaskSpec as JSON
    state        TEXT NOT NULL,               -- active | paused | cancelled | completed
    next_fire_at INTEGER,                     -- NULL: nothing to plan
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
-- The planner's question: which active tasks are due?
CREATE INDEX tasks_due ON tasks (next_fire_at) WHERE state = 'active';

-- The fire ledger: one row per nominal fire, or per stretch of consecutive missed fires.
CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    task_id            TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    scheduled_for      INTEGER NOT NULL,
    last_scheduled_for INTEGER,               -- set on a collapsed stretch of missed fires
    fire_count         INTEGER NOT NULL DEFAULT 1,
    status             TEXT NOT NULL,         -- queued running retrying succeeded failed timed_out cancelled skipped missed
    trigger            TEXT NOT NULL,         -- schedule manual recovery dependency backfill catchup
    attempt            INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL,
    run_at             INTEGER NOT NULL,      -- when the next attempt may start
    lease_owner        TEXT,
    lease_expires_at   INTEGER,
    fence              INTEGER NOT NULL DEFAULT 0,
    started_at         INTEGER,
    finished_at        INTEGER,
    result             TEXT,
    error              TEXT,
    output             TEXT,
    payload            TEXT,
    created_at         INTEGER NOT NULL,
    UNIQUE (task_id, scheduled_for)
);
-- The dispatcher's question: which runs may start now?
CREATE INDEX runs_ready ON runs (run_at) WHERE status IN ('queued', 'retrying');
-- The reaper's question: whose lease ran out?
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_by_task ON runs (task_id, scheduled_for DESC);

-- One row per attempt of a run: history survives retries.
CREATE TABLE attempts (
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    fence       INTEGER NOT NULL,
    node        TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    outcome     TEXT,                         -- the run status the attempt ended with, or lost
    error       TEXT,
    PRIMARY KEY (run_id, attempt)
);
