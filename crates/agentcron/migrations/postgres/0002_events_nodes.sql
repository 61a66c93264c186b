-- agentcron schema, version 2 (PostgreSQL): task events and nodes.

CREATE TABLE task_events (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    kind    TEXT NOT NULL,                    -- paused | resumed
    at      BIGINT NOT NULL,
    detail  TEXT                              -- JSON
);
CREATE INDEX task_events_by_task ON task_events (task_id, at);

CREATE TABLE nodes (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,             -- last start, claim or lease renewal
    skew_ms      BIGINT NOT NULL DEFAULT 0    -- node clock minus database clock
);
