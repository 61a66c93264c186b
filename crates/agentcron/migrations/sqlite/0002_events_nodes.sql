-- agentcron schema, version 2 (SQLite): task events and nodes.

-- What happened to a task besides its runs: paused / resumed (a paused
-- period is two events, not one ledger row per fire).
CREATE TABLE task_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    kind    TEXT NOT NULL,                    -- paused | resumed
    at      INTEGER NOT NULL,
    detail  TEXT                              -- JSON
);
CREATE INDEX task_events_by_task ON task_events (task_id, at);

-- The nodes that have run the engine on this database.
CREATE TABLE nodes (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,            -- last start, claim or lease renewal
    skew_ms      INTEGER NOT NULL DEFAULT 0   -- node clock minus database clock
);
