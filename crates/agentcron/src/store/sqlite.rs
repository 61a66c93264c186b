//! The SQLite backend: WAL, `synchronous=NORMAL`, writes in `BEGIN IMMEDIATE`
//! transactions so that two writers never deadlock on a lock upgrade.

use std::str::FromStr;
use std::time::Duration;

use jiff::Timestamp;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};

use super::{
    ClaimParams, ClaimedRun, FinishAttempt, NewTask, Outcome, PlanOutcome, PlanParams, ReapParams,
    Store, StoreError, TaskPlan, UpdateTask,
};
use crate::model::{Run, RunId, RunStatus, Task, TaskId, TaskSpec, TaskState, Trigger};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

const TASK_COLUMNS: &str = "id, name, spec, state, next_fire_at, version, created_at, updated_at";
const RUN_COLUMNS: &str = "id, task_id, scheduled_for, last_scheduled_for, fire_count, status, \
     trigger, attempt, max_attempts, run_at, lease_owner, lease_expires_at, fence, started_at, \
     finished_at, result, error, output, payload";

/// A store on one SQLite file.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url`
    /// (`sqlite://agentcron.db`) and applies migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(SqliteStore { pool })
    }

    async fn write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
}

fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

fn corrupt(table: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        table,
        detail: detail.to_string(),
    }
}

fn instant(table: &'static str, v: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_millisecond(v).map_err(|e| corrupt(table, e))
}

fn opt_instant(table: &'static str, v: Option<i64>) -> Result<Option<Timestamp>, StoreError> {
    v.map(|v| instant(table, v)).transpose()
}

fn opt_json(
    table: &'static str,
    v: Option<String>,
) -> Result<Option<serde_json::Value>, StoreError> {
    v.map(|s| serde_json::from_str(&s).map_err(|e| corrupt(table, e)))
        .transpose()
}

fn task_from_row(row: &SqliteRow) -> Result<Task, StoreError> {
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

fn run_from_row(row: &SqliteRow) -> Result<Run, StoreError> {
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

fn spec_json(spec: &TaskSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|e| corrupt("tasks", e))
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
}

impl SqliteStore {
    async fn task_where(
        &self,
        clause: &'static str,
        key: &str,
    ) -> Result<Option<Task>, StoreError> {
        let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE {clause} = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(task_from_row).transpose()
    }

    async fn apply_plan(
        tx: &mut Transaction<'static, Sqlite>,
        task: &Task,
        plan: TaskPlan,
        now: Timestamp,
    ) -> Result<usize, StoreError> {
        let mut inserted = 0;
        for run in plan.runs {
            let payload = run.payload.map(|p| p.to_string());
            let done = run.status.is_terminal().then(|| ms(now));
            let res = sqlx::query(
                "INSERT INTO runs (id, task_id, scheduled_for, last_scheduled_for, fire_count, \
                 status, trigger, max_attempts, run_at, error, payload, finished_at, created_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (task_id, scheduled_for) DO NOTHING",
            )
            .bind(run.id.to_string())
            .bind(task.id.to_string())
            .bind(ms(run.scheduled_for))
            .bind(run.last_scheduled_for.map(ms))
            .bind(run.fire_count)
            .bind(run.status.as_str())
            .bind(run.trigger.as_str())
            .bind(i64::from(task.spec.retry.max_attempts))
            .bind(ms(run.run_at))
            .bind(run.error)
            .bind(payload)
            .bind(done)
            .bind(ms(now))
            .execute(&mut **tx)
            .await?;
            inserted += res.rows_affected() as usize;
        }
        sqlx::query("UPDATE tasks SET next_fire_at = ?, state = ?, updated_at = ? WHERE id = ?")
            .bind(plan.next_fire_at.map(ms))
            .bind(plan.state.as_str())
            .bind(ms(now))
            .bind(task.id.to_string())
            .execute(&mut **tx)
            .await?;
        Ok(inserted)
    }
}

impl Store for SqliteStore {
    async fn create_task(&self, p: NewTask) -> Result<Task, StoreError> {
        let res = sqlx::query(
            "INSERT INTO tasks (id, name, spec, state, next_fire_at, version, created_at, updated_at) \
             VALUES (?, ?, ?, 'active', ?, 1, ?, ?)",
        )
        .bind(p.id.to_string())
        .bind(&p.spec.name)
        .bind(spec_json(&p.spec)?)
        .bind(p.next_fire_at.map(ms))
        .bind(ms(p.now))
        .bind(ms(p.now))
        .execute(&self.pool)
        .await;
        match res {
            Err(e) if is_unique_violation(&e) => Err(StoreError::DuplicateName(p.spec.name)),
            Err(e) => Err(e.into()),
            Ok(_) => Ok(Task {
                id: p.id,
                spec: p.spec,
                state: TaskState::Active,
                next_fire_at: p.next_fire_at,
                version: 1,
                created_at: p.now,
                updated_at: p.now,
            }),
        }
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<Task>, StoreError> {
        self.task_where("id", &id.to_string()).await
    }

    async fn get_task_by_name(&self, name: &str) -> Result<Option<Task>, StoreError> {
        self.task_where("name", name).await
    }

    async fn update_task(&self, p: UpdateTask) -> Result<Task, StoreError> {
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "UPDATE tasks SET name = ?, spec = ?, state = ?, next_fire_at = ?, \
             version = version + 1, updated_at = ? WHERE id = ? AND version = ?",
        )
        .bind(&p.spec.name)
        .bind(spec_json(&p.spec)?)
        .bind(p.state.as_str())
        .bind(p.next_fire_at.map(ms))
        .bind(ms(p.now))
        .bind(p.id.to_string())
        .bind(p.expected_version)
        .execute(&mut *tx)
        .await;
        let res = match res {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::DuplicateName(p.spec.name));
            }
            other => other?,
        };
        let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(p.id.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(task) = row.as_ref().map(task_from_row).transpose()? else {
            return Err(StoreError::TaskNotFound(p.id.to_string()));
        };
        if res.rows_affected() == 0 {
            return Err(StoreError::VersionConflict {
                id: p.id,
                expected: p.expected_version,
                current: task.version,
            });
        }
        tx.commit().await?;
        Ok(task)
    }

    async fn plan(
        &self,
        p: PlanParams,
        planner: &(dyn Fn(&Task) -> TaskPlan + Sync),
    ) -> Result<PlanOutcome, StoreError> {
        let mut tx = self.write().await?;
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE state = 'active' AND next_fire_at <= ? \
             ORDER BY next_fire_at LIMIT ?"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ms(p.now))
            .bind(i64::from(p.limit))
            .fetch_all(&mut *tx)
            .await?;
        let mut outcome = PlanOutcome::default();
        for row in &rows {
            let task = task_from_row(row)?;
            let plan = planner(&task);
            outcome.runs_inserted += Self::apply_plan(&mut tx, &task, plan, p.now).await?;
            outcome.tasks += 1;
        }
        tx.commit().await?;
        Ok(outcome)
    }

    async fn claim_runs(&self, p: ClaimParams) -> Result<Vec<ClaimedRun>, StoreError> {
        let now = ms(p.now);
        let lease_until = now + i64::try_from(p.lease.as_millis()).unwrap_or(i64::MAX / 2);
        let mut tx = self.write().await?;
        let sql = format!(
            "UPDATE runs SET status = 'running', lease_owner = ?, lease_expires_at = ?, \
             fence = fence + 1, attempt = attempt + 1, started_at = ? \
             WHERE id IN (SELECT id FROM runs WHERE status IN ('queued', 'retrying') \
                          AND run_at <= ? ORDER BY run_at LIMIT ?) \
             RETURNING {RUN_COLUMNS}"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&p.owner)
            .bind(lease_until)
            .bind(now)
            .bind(now)
            .bind(i64::from(p.limit))
            .fetch_all(&mut *tx)
            .await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let run = run_from_row(row)?;
            sqlx::query(
                "INSERT INTO attempts (run_id, attempt, fence, node, started_at) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(run.id.to_string())
            .bind(run.attempt)
            .bind(run.fence)
            .bind(&p.owner)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?");
            let task_row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(run.task_id.to_string())
                .fetch_one(&mut *tx)
                .await?;
            claimed.push(ClaimedRun {
                task: task_from_row(&task_row)?,
                run,
            });
        }
        tx.commit().await?;
        claimed.sort_by_key(|c| c.run.run_at);
        Ok(claimed)
    }

    async fn finish_attempt(&self, p: FinishAttempt) -> Result<bool, StoreError> {
        let now = ms(p.now);
        let (status, run_at, finished, result, error, output) = match p.outcome {
            Outcome::Succeeded { result, output } => (
                RunStatus::Succeeded,
                None,
                Some(now),
                result.map(|r| r.to_string()),
                None,
                output,
            ),
            Outcome::Failed { error, output } => (
                RunStatus::Failed,
                None,
                Some(now),
                None,
                Some(error),
                output,
            ),
            Outcome::TimedOut { error } => (
                RunStatus::TimedOut,
                None,
                Some(now),
                None,
                Some(error),
                None,
            ),
            Outcome::Cancelled { reason } => (
                RunStatus::Cancelled,
                None,
                Some(now),
                None,
                Some(reason),
                None,
            ),
            Outcome::Skipped { reason } => (
                RunStatus::Skipped,
                None,
                Some(now),
                None,
                Some(reason),
                None,
            ),
            Outcome::Retry { run_at, error } => (
                RunStatus::Retrying,
                Some(ms(run_at)),
                None,
                None,
                Some(error),
                None,
            ),
        };
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "UPDATE runs SET status = ?, run_at = COALESCE(?, run_at), finished_at = ?, \
             lease_owner = NULL, lease_expires_at = NULL, result = ?, error = ?, \
             output = COALESCE(?, output) \
             WHERE id = ? AND fence = ? AND status = 'running'",
        )
        .bind(status.as_str())
        .bind(run_at)
        .bind(finished)
        .bind(result)
        .bind(&error)
        .bind(output)
        .bind(p.id.to_string())
        .bind(p.fence)
        .execute(&mut *tx)
        .await?;
        if res.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE attempts SET finished_at = ?, outcome = ?, error = ? WHERE run_id = ? AND fence = ?",
        )
        .bind(now)
        .bind(status.as_str())
        .bind(error)
        .bind(p.id.to_string())
        .bind(p.fence)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn release_run(&self, id: RunId, fence: i64, now: Timestamp) -> Result<bool, StoreError> {
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "UPDATE runs SET status = 'queued', trigger = 'recovery', run_at = ?, \
             lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = ? AND fence = ? AND status = 'running'",
        )
        .bind(ms(now))
        .bind(id.to_string())
        .bind(fence)
        .execute(&mut *tx)
        .await?;
        if res.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE attempts SET finished_at = ?, outcome = 'released', \
             error = 'the node stopped before the attempt finished' WHERE run_id = ? AND fence = ?",
        )
        .bind(ms(now))
        .bind(id.to_string())
        .bind(fence)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn extend_leases(
        &self,
        owner: &str,
        runs: &[(RunId, i64)],
        until: Timestamp,
    ) -> Result<Vec<RunId>, StoreError> {
        let mut tx = self.write().await?;
        let mut lost = Vec::new();
        for (id, fence) in runs {
            let res = sqlx::query(
                "UPDATE runs SET lease_expires_at = ? \
                 WHERE id = ? AND fence = ? AND lease_owner = ? AND status = 'running'",
            )
            .bind(ms(until))
            .bind(id.to_string())
            .bind(fence)
            .bind(owner)
            .execute(&mut *tx)
            .await?;
            if res.rows_affected() == 0 {
                lost.push(*id);
            }
        }
        tx.commit().await?;
        Ok(lost)
    }

    async fn reap_expired(&self, p: ReapParams) -> Result<Vec<RunId>, StoreError> {
        let now = ms(p.now);
        let mut tx = self.write().await?;
        let rows = sqlx::query(
            "SELECT id, fence, attempt, max_attempts FROM runs \
             WHERE status = 'running' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ?",
        )
        .bind(now)
        .bind(i64::from(p.limit))
        .fetch_all(&mut *tx)
        .await?;
        let mut reaped = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: String = row.try_get("id")?;
            let fence: i64 = row.try_get("fence")?;
            let spent =
                row.try_get::<i64, _>("attempt")? >= row.try_get::<i64, _>("max_attempts")?;
            let lost = "lease expired: the node running this attempt stopped renewing it";
            sqlx::query(
                "UPDATE attempts SET finished_at = ?, outcome = 'lost', error = ? WHERE run_id = ? AND fence = ?",
            )
            .bind(now)
            .bind(lost)
            .bind(&id)
            .bind(fence)
            .execute(&mut *tx)
            .await?;
            let sql = if spent {
                "UPDATE runs SET status = 'failed', finished_at = ?, error = ?, \
                 lease_owner = NULL, lease_expires_at = NULL WHERE id = ? AND fence = ?"
            } else {
                "UPDATE runs SET status = 'queued', trigger = 'recovery', run_at = ?, error = ?, \
                 lease_owner = NULL, lease_expires_at = NULL WHERE id = ? AND fence = ?"
            };
            sqlx::query(sql)
                .bind(now)
                .bind(lost)
                .bind(&id)
                .bind(fence)
                .execute(&mut *tx)
                .await?;
            reaped.push(id.parse().map_err(|e| corrupt("runs", e))?);
        }
        tx.commit().await?;
        Ok(reaped)
    }

    async fn get_run(&self, id: RunId) -> Result<Option<Run>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn runs_of_task(&self, task: TaskId, limit: u32) -> Result<Vec<Run>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE task_id = ? ORDER BY scheduled_for DESC LIMIT ?"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(task.to_string())
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(run_from_row).collect()
    }

    async fn next_fire_at(&self) -> Result<Option<Timestamp>, StoreError> {
        let next: Option<i64> =
            sqlx::query_scalar("SELECT MIN(next_fire_at) FROM tasks WHERE state = 'active'")
                .fetch_one(&self.pool)
                .await?;
        opt_instant("tasks", next)
    }

    async fn next_run_at(&self) -> Result<Option<Timestamp>, StoreError> {
        let next: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(run_at) FROM runs WHERE status IN ('queued', 'retrying')",
        )
        .fetch_one(&self.pool)
        .await?;
        opt_instant("runs", next)
    }

    async fn running_count(&self, task: TaskId, except: RunId) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM runs WHERE task_id = ? AND status = 'running' AND id <> ?",
        )
        .bind(task.to_string())
        .bind(except.to_string())
        .fetch_one(&self.pool)
        .await?)
    }
}
