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
    /// SQLite has one writer. Taking turns here, rather than letting
    /// `BEGIN IMMEDIATE` collide, keeps writers out of SQLite's busy handler,
    /// which sleeps in steps of up to 100 ms.
    writer: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// A write transaction and this process's turn to write.
struct Write {
    tx: Transaction<'static, Sqlite>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl std::ops::Deref for Write {
    type Target = Transaction<'static, Sqlite>;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl std::ops::DerefMut for Write {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl Write {
    async fn commit(self) -> Result<(), StoreError> {
        Ok(self.tx.commit().await?)
    }
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
        Ok(SqliteStore {
            pool,
            writer: std::sync::Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    /// How many runs are in each status (for metrics and benchmarks).
    pub async fn run_status_counts(&self) -> Result<Vec<(RunStatus, i64)>, StoreError> {
        let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM runs GROUP BY status")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let status: String = row.try_get("status")?;
                let status = RunStatus::parse(&status)
                    .ok_or_else(|| corrupt("runs", format!("status `{status}`")))?;
                Ok((status, row.try_get("n")?))
            })
            .collect()
    }

    async fn write(&self) -> Result<Write, StoreError> {
        let turn = self.writer.clone().lock_owned().await;
        Ok(Write {
            tx: self.pool.begin_with("BEGIN IMMEDIATE").await?,
            _turn: turn,
        })
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

    /// Records a batch of plans with two statements: every run row from one
    /// JSON array (`json_each`), every task update from another. One
    /// statement per row would cost a worker-thread round trip each.
    async fn apply_plans(
        tx: &mut Transaction<'static, Sqlite>,
        plans: &[(&Task, TaskPlan)],
        now: Timestamp,
    ) -> Result<usize, StoreError> {
        let mut runs = Vec::new();
        let mut tasks = Vec::with_capacity(plans.len());
        for (task, plan) in plans {
            for run in &plan.runs {
                runs.push(serde_json::json!({
                    "id": run.id.to_string(),
                    "task_id": task.id.to_string(),
                    "scheduled_for": ms(run.scheduled_for),
                    "last": run.last_scheduled_for.map(ms),
                    "fire_count": run.fire_count,
                    "status": run.status.as_str(),
                    "trigger": run.trigger.as_str(),
                    "max_attempts": i64::from(task.spec.retry.max_attempts),
                    "run_at": ms(run.run_at),
                    "error": run.error,
                    "payload": run.payload.as_ref().map(|p| p.to_string()),
                    "finished_at": run.status.is_terminal().then(|| ms(now)),
                }));
            }
            tasks.push(serde_json::json!({
                "id": task.id.to_string(),
                "next": plan.next_fire_at.map(ms),
                "state": plan.state.as_str(),
            }));
        }
        let mut inserted = 0;
        if !runs.is_empty() {
            let res = sqlx::query(
                "INSERT INTO runs (id, task_id, scheduled_for, last_scheduled_for, fire_count, \
                 status, trigger, max_attempts, run_at, error, payload, finished_at, created_at) \
                 SELECT j.value ->> 'id', j.value ->> 'task_id', j.value ->> 'scheduled_for', \
                 j.value ->> 'last', j.value ->> 'fire_count', j.value ->> 'status', \
                 j.value ->> 'trigger', j.value ->> 'max_attempts', j.value ->> 'run_at', \
                 j.value ->> 'error', j.value ->> 'payload', j.value ->> 'finished_at', ? \
                 FROM json_each(?) AS j WHERE true \
                 ON CONFLICT (task_id, scheduled_for) DO NOTHING",
            )
            .bind(ms(now))
            .bind(serde_json::Value::Array(runs).to_string())
            .execute(&mut **tx)
            .await?;
            inserted = res.rows_affected() as usize;
        }
        sqlx::query(
            "UPDATE tasks SET next_fire_at = j.value ->> 'next', state = j.value ->> 'state', \
             updated_at = ? FROM json_each(?) AS j WHERE tasks.id = j.value ->> 'id'",
        )
        .bind(ms(now))
        .bind(serde_json::Value::Array(tasks).to_string())
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
        .execute(&mut **tx)
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
            .fetch_optional(&mut **tx)
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
            .fetch_all(&mut **tx)
            .await?;
        let tasks = rows
            .iter()
            .map(task_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let plans: Vec<(&Task, TaskPlan)> = tasks.iter().map(|t| (t, planner(t))).collect();
        let runs_inserted = Self::apply_plans(&mut tx.tx, &plans, p.now).await?;
        tx.commit().await?;
        Ok(PlanOutcome {
            tasks: tasks.len(),
            runs_inserted,
        })
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
            .fetch_all(&mut **tx)
            .await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let runs = rows
            .iter()
            .map(run_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        // The attempts, and the runs' tasks, in one statement each.
        let attempts: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| serde_json::json!({"id": r.id.to_string(), "attempt": r.attempt, "fence": r.fence}))
            .collect();
        sqlx::query(
            "INSERT INTO attempts (run_id, attempt, fence, node, started_at) \
             SELECT j.value ->> 'id', j.value ->> 'attempt', j.value ->> 'fence', ?, ? \
             FROM json_each(?) AS j",
        )
        .bind(&p.owner)
        .bind(now)
        .bind(serde_json::Value::Array(attempts).to_string())
        .execute(&mut **tx)
        .await?;
        let task_ids: std::collections::BTreeSet<String> =
            runs.iter().map(|r| r.task_id.to_string()).collect();
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE id IN (SELECT value FROM json_each(?))"
        );
        let task_rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(serde_json::to_string(&task_ids).map_err(|e| corrupt("tasks", e))?)
            .fetch_all(&mut **tx)
            .await?;
        tx.commit().await?;
        let tasks: std::collections::HashMap<TaskId, Task> = task_rows
            .iter()
            .map(|row| task_from_row(row).map(|t| (t.id, t)))
            .collect::<Result<_, _>>()?;
        let mut claimed = runs
            .into_iter()
            .map(|run| {
                let task = tasks
                    .get(&run.task_id)
                    .cloned()
                    .ok_or_else(|| corrupt("runs", format!("run {} has no task", run.id)))?;
                Ok(ClaimedRun { run, task })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        claimed.sort_by_key(|c| c.run.run_at);
        Ok(claimed)
    }

    async fn finish_attempt(&self, p: FinishAttempt) -> Result<bool, StoreError> {
        Ok(self
            .finish_attempts(vec![p])
            .await?
            .first()
            .copied()
            .unwrap_or(false))
    }

    async fn finish_attempts(&self, batch: Vec<FinishAttempt>) -> Result<Vec<bool>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<serde_json::Value> = batch
            .iter()
            .map(|p| {
                let now = ms(p.now);
                let (status, run_at, finished, result, error, output) = match &p.outcome {
                    Outcome::Succeeded { result, output } => (
                        RunStatus::Succeeded,
                        None,
                        Some(now),
                        result.as_ref().map(|r| r.to_string()),
                        None,
                        output.clone(),
                    ),
                    Outcome::Failed { error, output } => (
                        RunStatus::Failed,
                        None,
                        Some(now),
                        None,
                        Some(error.clone()),
                        output.clone(),
                    ),
                    Outcome::TimedOut { error } => (
                        RunStatus::TimedOut,
                        None,
                        Some(now),
                        None,
                        Some(error.clone()),
                        None,
                    ),
                    Outcome::Cancelled { reason } => (
                        RunStatus::Cancelled,
                        None,
                        Some(now),
                        None,
                        Some(reason.clone()),
                        None,
                    ),
                    Outcome::Skipped { reason } => (
                        RunStatus::Skipped,
                        None,
                        Some(now),
                        None,
                        Some(reason.clone()),
                        None,
                    ),
                    Outcome::Retry { run_at, error } => (
                        RunStatus::Retrying,
                        Some(ms(*run_at)),
                        None,
                        None,
                        Some(error.clone()),
                        None,
                    ),
                };
                serde_json::json!({
                    "id": p.id.to_string(), "fence": p.fence, "now": now,
                    "status": status.as_str(), "run_at": run_at, "finished_at": finished,
                    "result": result, "error": error, "output": output,
                })
            })
            .collect();
        let all = serde_json::Value::Array(rows.clone()).to_string();
        let mut tx = self.write().await?;
        let applied: Vec<String> = sqlx::query_scalar(
            "UPDATE runs SET status = j.value ->> 'status', \
             run_at = COALESCE(j.value ->> 'run_at', runs.run_at), \
             finished_at = j.value ->> 'finished_at', lease_owner = NULL, lease_expires_at = NULL, \
             result = j.value ->> 'result', error = j.value ->> 'error', \
             output = COALESCE(j.value ->> 'output', runs.output) \
             FROM json_each(?) AS j \
             WHERE runs.id = j.value ->> 'id' AND runs.fence = j.value ->> 'fence' \
             AND runs.status = 'running' \
             RETURNING runs.id",
        )
        .bind(&all)
        .fetch_all(&mut **tx)
        .await?;
        let applied: std::collections::HashSet<String> = applied.into_iter().collect();
        if !applied.is_empty() {
            let done: Vec<&serde_json::Value> = rows
                .iter()
                .filter(|r| r["id"].as_str().is_some_and(|id| applied.contains(id)))
                .collect();
            sqlx::query(
                "UPDATE attempts SET finished_at = j.value ->> 'now', outcome = j.value ->> 'status', \
                 error = j.value ->> 'error' FROM json_each(?) AS j \
                 WHERE attempts.run_id = j.value ->> 'id' AND attempts.fence = j.value ->> 'fence' \
                 AND attempts.finished_at IS NULL",
            )
            .bind(serde_json::to_string(&done).map_err(|e| corrupt("runs", e))?)
            .execute(&mut **tx)
            .await?;
        }
        tx.commit().await?;
        Ok(batch
            .iter()
            .map(|p| applied.contains(&p.id.to_string()))
            .collect())
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
        .execute(&mut **tx)
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
        .execute(&mut **tx)
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
            .execute(&mut **tx)
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
        .fetch_all(&mut **tx)
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
            .execute(&mut **tx)
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
                .execute(&mut **tx)
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
