-- agentcron schema, version 1 (MySQL/MariaDB). The same tables and representations as
-- SQLite's and PostgreSQL's: UUID text ids, epoch milliseconds, JSON text.
CREATE TABLE tasks (
    id           VARCHAR(36) NOT NULL PRIMARY KEY,
    name         VARCHAR(128) NOT NULL,
    spec         LONGTEXT NOT NULL,
    state        VARCHAR(16) NOT NULL,
    next_fire_at BIGINT NULL,
    version      BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    UNIQUE KEY tasks_name (name),
    KEY tasks_due (state, next_fire_at)
) ENGINE = InnoDB;

CREATE TABLE runs (
    id                 VARCHAR(36) NOT NULL PRIMARY KEY,
    task_id            VARCHAR(36) NOT NULL,
    scheduled_for      BIGINT NOT NULL,
    last_scheduled_for BIGINT NULL,
    fire_count         BIGINT NOT NULL DEFAULT 1,
    status             VARCHAR(16) NOT NULL,
    `trigger`          VARCHAR(16) NOT NULL,
    attempt            BIGINT NOT NULL DEFAULT 0,
    max_attempts       BIGINT NOT NULL,
    run_at             BIGINT NOT NULL,
    lease_owner        VARCHAR(255) NULL,
    lease_expires_at   BIGINT NULL,
    fence              BIGINT NOT NULL DEFAULT 0,
    started_at         BIGINT NULL,
    finished_at        BIGINT NULL,
    result             LONGTEXT NULL,
    error              LONGTEXT NULL,
    output             LONGTEXT NULL,
    payload            LONGTEXT NULL,
    created_at         BIGINT NOT NULL,
    UNIQUE KEY runs_fire (task_id, scheduled_for),
    KEY runs_ready (status, run_at),
    KEY runs_leased (status, lease_expires_at),
    CONSTRAINT runs_task FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB;

CREATE TABLE attempts (
    run_id      VARCHAR(36) NOT NULL,
    attempt     BIGINT NOT NULL,
    fence       BIGINT NOT NULL,
    node        VARCHAR(255) NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT NULL,
    outcome     VARCHAR(16) NULL,
    error       LONGTEXT NULL,
    PRIMARY KEY (run_id, attempt),
    CONSTRAINT attempts_run FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE
) ENGINE = InnoDB;
