-- agentcron schema, version 1 (PostgreSQL). The same tables as SQLite's version 1, with the
-- same column meanings: ids are UUID text, instants epoch milliseconds (BIGINT), JSON text.
-- Keeping the representations equal lets the backends share their row readers.

CREATE TABLE tasks (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    spec         TEXT NOT NULL,               -- TaskSpec as JSON
    state        TEXT NOT NULL,               -- active | paused | cancelled | completed
    next_fire_at BIGINT,                      -- NULL: nothing to plan
    version      BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX tasks_due ON tasks (next_fire_at) WHERE state = 'active';

CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    task_id            TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    scheduled_for      BIGINT NOT NULL,
    last_scheduled_for BIGINT,
    fire_count         BIGINT NOT NULL DEFAULT 1,
    status             TEXT NOT NULL,
    trigger            TEXT NOT NULL,
    attempt            BIGINT NOT NULL DEFAULT 0,
    max_attempts       BIGINT NOT NULL,
    run_at             BIGINT NOT NULL,
    lease_owner        TEXT,
    lease_expires_at   BIGINT,
    fence              BIGINT NOT NULL DEFAULT 0,
    started_at         BIGINT,
    finished_at        BIGINT,
    result             TEXT,
    error              TEXT,
    output             TEXT,
    payload            TEXT,
    created_at         BIGINT NOT NULL,
    UNIQUE (task_id, scheduled_for)
);
CREATE INDEX runs_ready ON runs (run_at) WHERE status IN ('queued', 'retrying');
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_by_task ON runs (task_id, scheduled_for DESC);

CREATE TABLE attempts (
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt     BIGINT NOT NULL,
    fence       BIGINT NOT NULL,
    node        TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT,
    outcome     TEXT,
    error       TEXT,
    PRIMARY KEY (run_id, attempt)
);
