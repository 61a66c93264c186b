-- agentcron schema, version 2 (MySQL/MariaDB): task events and nodes.
CREATE TABLE task_events (
    id      BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id VARCHAR(36) NOT NULL,
    kind    VARCHAR(16) NOT NULL,
    at      BIGINT NOT NULL,
    detail  LONGTEXT NULL,
    KEY task_events_by_task (task_id, at),
    CONSTRAINT task_events_task FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB;

CREATE TABLE nodes (
    id           VARCHAR(255) NOT NULL PRIMARY KEY,
    host         VARCHAR(255) NOT NULL,
    version      VARCHAR(64) NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    skew_ms      BIGINT NOT NULL DEFAULT 0
) ENGINE = InnoDB;
