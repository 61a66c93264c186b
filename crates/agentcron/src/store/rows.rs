//! What the SQL backends share: the column lists, how instants, JSON and
//! outcomes are stored (epoch milliseconds, JSON text), and the row readers
//! (a macro, instantiated per backend's row type, since sqlx's generic row
//! bounds would be longer than the readers).

use jiff::Timestamp;

use super::{FinishAttempt, Outcome, StoreError};
use crate::model::{RunStatus, TaskSpec};

pub(super) const TASK_COLUMNS: &str =
    "id, name, spec, state, next_fire_at, version, created_at, updated_at";
pub(super) const RUN_COLUMNS: &str = "id, task_id, scheduled_for, last_scheduled_for, fire_count, \
     status, trigger, attempt, max_attempts, run_at, lease_owner, lease_expires_at, fence, \
     started_at, finished_at, result, error, output, payload";

pub(super) fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

pub(super) fn corrupt(table: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        table,
        detail: detail.to_string(),
    }
}

pub(super) fn instant(table: &'static str, v: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_millisecond(v).map_err(|e| corrupt(table, e))
}

pub(super) fn opt_instant(
    table: &'static str,
    v: Option<i64>,
) -> Result<Option<Timestamp>, StoreError> {
    v.map(|v| instant(table, v)).transpose()
}

pub(super) fn opt_json(
    table: &'static str,
    v: Option<String>,
) -> Result<Option<serde_json::Value>, StoreError> {
    v.map(|s| serde_json::from_str(&s).map_err(|e| corrupt(table, e)))
        .transpose()
}

/// One attempt outcome as the columns it writes.
pub(super) struct OutcomeRow {
    pub(super) id: String,
    pub(super) fence: i64,
    pub(super) now: i64,
    pub(super) status: RunStatus,
    pub(super) run_at: Option<i64>,
    pub(super) finished_at: Option<i64>,
    pub(super) result: Option<String>,
    pub(super) error: Option<String>,
    pub(super) output: Option<String>,
}

impl OutcomeRow {
    pub(super) fn new(p: &FinishAttempt) -> Self {
        let now = ms(p.now);
        let mut row = OutcomeRow {
            id: p.id.to_string(),
            fence: p.fence,
            now,
            status: RunStatus::Succeeded,
            run_at: None,
            finished_at: Some(now),
            result: None,
            error: None,
            output: None,
        };
        match &p.outcome {
            Outcome::Succeeded { result, output } => {
                row.result = result.as_ref().map(|r| r.to_string());
                row.output = output.clone();
            }
            Outcome::Failed { error, output } => {
                row.status = RunStatus::Failed;
                row.error = Some(error.clone());
                row.output = output.clone();
            }
            Outcome::TimedOut { error } => {
                row.status = RunStatus::TimedOut;
                row.error = Some(error.clone());
            }
            Outcome::Cancelled { reason } => {
                row.status = RunStatus::Cancelled;
                row.error = Some(reason.clone());
            }
            Outcome::Skipped { reason } => {
                row.status = RunStatus::Skipped;
                row.error = Some(reason.clone());
            }
            Outcome::Retry { run_at, error } => {
                row.status = RunStatus::Retrying;
                row.run_at = Some(ms(*run_at));
                row.finished_at = None;
                row.error = Some(error.clone());
            }
        }
        row
    }
}

pub(super) fn spec_json(spec: &TaskSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|e| corrupt("tasks", e))
}

pub(super) fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
}

/// Defines `task_from_row`, `run_from_row`, `attempt_from_row`,
/// `node_from_row` and `event_from_row` for a backend's row type.
macro_rules! row_readers {
    ($row:ty) => {
        pub(super) fn task_from_row(row: &$row) -> Result<Task, StoreError> {
            let id: String = row.try_get("id")?;
            let spec: String = row.try_get("spec")?;
            let state: String = row.try_get("state")?;
            Ok(Task {
                id: id.parse().map_err(|e| corrupt("tasks", e))?,
                spec: serde_json::from_str::<TaskSpec>(&spec).map_err(|e| corrupt("tasks", e))?,
                state: TaskState::parse(&state)
                    .ok_or_else(|| corrupt("tasks", format!("state `{state}`")))?,
                next_fire_at: opt_instant("tasks", row.try_get("next_fire_at")?)?,
                version: row.try_get("version")?,
                created_at: instant("tasks", row.try_get("created_at")?)?,
                updated_at: instant("tasks", row.try_get("updated_at")?)?,
            })
        }

        pub(super) fn run_from_row(row: &$row) -> Result<Run, StoreError> {
            let id: String = row.try_get("id")?;
            let task_id: String = row.try_get("task_id")?;
            let status: String = row.try_get("status")?;
            let trigger: String = row.try_get("trigger")?;
            Ok(Run {
                id: id.parse().map_err(|e| corrupt("runs", e))?,
                task_id: task_id.parse().map_err(|e| corrupt("runs", e))?,
                scheduled_for: instant("runs", row.try_get("scheduled_for")?)?,
                last_scheduled_for: opt_instant("runs", row.try_get("last_scheduled_for")?)?,
                fire_count: row.try_get("fire_count")?,
                status: RunStatus::parse(&status)
                    .ok_or_else(|| corrupt("runs", format!("status `{status}`")))?,
                trigger: Trigger::parse(&trigger)
                    .ok_or_else(|| corrupt("runs", format!("trigger `{trigger}`")))?,
                attempt: row.try_get("attempt")?,
                max_attempts: row.try_get("max_attempts")?,
                run_at: instant("runs", row.try_get("run_at")?)?,
                lease_owner: row.try_get("lease_owner")?,
                lease_expires_at: opt_instant("runs", row.try_get("lease_expires_at")?)?,
                fence: row.try_get("fence")?,
                started_at: opt_instant("runs", row.try_get("started_at")?)?,
                finished_at: opt_instant("runs", row.try_get("finished_at")?)?,
                result: opt_json("runs", row.try_get("result")?)?,
                error: row.try_get("error")?,
                output: row.try_get("output")?,
                payload: opt_json("runs", row.try_get("payload")?)?,
            })
        }

        pub(super) fn attempt_from_row(row: &$row) -> Result<$crate::store::Attempt, StoreError> {
            Ok($crate::store::Attempt {
                attempt: row.try_get("attempt")?,
                fence: row.try_get("fence")?,
                node: row.try_get("node")?,
                started_at: instant("attempts", row.try_get("started_at")?)?,
                finished_at: opt_instant("attempts", row.try_get("finished_at")?)?,
                outcome: row.try_get("outcome")?,
                error: row.try_get("error")?,
            })
        }

        pub(super) fn node_from_row(row: &$row) -> Result<Node, StoreError> {
            Ok(Node {
                id: row.try_get("id")?,
                host: row.try_get("host")?,
                version: row.try_get("version")?,
                started_at: instant("nodes", row.try_get("started_at")?)?,
                heartbeat_at: instant("nodes", row.try_get("heartbeat_at")?)?,
                skew_ms: row.try_get("skew_ms")?,
            })
        }

        pub(super) fn event_from_row(row: &$row) -> Result<TaskEvent, StoreError> {
            let task_id: String = row.try_get("task_id")?;
            Ok(TaskEvent {
                task_id: task_id.parse().map_err(|e| corrupt("task_events", e))?,
                kind: row.try_get("kind")?,
                at: instant("task_events", row.try_get("at")?)?,
                detail: opt_json("task_events", row.try_get("detail")?)?,
            })
        }
    };
}
pub(super) use row_readers;
