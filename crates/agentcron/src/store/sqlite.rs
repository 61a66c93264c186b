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
    ClaimParams, ClaimedRun, FinishAttempt, NewTask, PlanOutcome, PlanParams, ReapParams, Store,
    StoreError, TaskPlan, UpdateTask,
};
use crate::model::{
    Node, Run, RunId, RunStatus, Task, TaskEvent, TaskId, TaskSpec, TaskState, Trigger,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

use super::rows::{
    OutcomeRow, RUN_COLUMNS, TASK_COLUMNS, corrupt, instant, is_unique_violation, ms, opt_instant,
    opt_json, row_readers, spec_json,
};

/// A store on one SQLite file.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// SQLite has one writer. Taking turns here, rather than letting
    /// `BEGIN IMMEDIATE` collide, keeps writers out of SQLite's busy handler,
    /// which sleeps in steps of up to 100 ms.
    writer: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// Store operations performed, for metrics and tests.
    operations: std::sync::Arc<std::sync::atomic::AtomicU64>,
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
            operations: std::sync::Arc::default(),
        })
    }

    /// How many store operations (trait method calls) this store has served.
    pub fn operations(&self) -> u64 {
        self.operations.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count(&self) {
        self.operations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

/// `(?, ?, ?), (?, ?, ?)` for `rows` rows of `cols` placeholders. Only
/// placeholders go into the SQL text; values are bound.
fn placeholders(rows: usize, cols: usize) -> String {
    let row = format!("({})", vec!["?"; cols].join(", "));
    vec![row; rows].join(", ")
}

/// Rows per multi-row statement for `cols` columns: SQLite binds at most
/// 32,766 parameters in one statement.
fn chunk_rows(cols: usize) -> usize {
    32_000 / cols
}

row_readers!(SqliteRow);

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

    /// Records a batch of plans: the run rows and the task updates as
    /// multi-row statements (one statement per row would cost a worker-thread
    /// round trip each).
    async fn apply_plans(
        tx: &mut Transaction<'static, Sqlite>,
        plans: &[(&Task, TaskPlan)],
        now: Timestamp,
    ) -> Result<usize, StoreError> {
        let runs: Vec<(&Task, &super::NewRun)> = plans
            .iter()
            .flat_map(|(task, plan)| plan.runs.iter().map(move |r| (*task, r)))
            .collect();
        let mut inserted = 0;
        const RUN_COLS: usize = 13;
        for chunk in runs.chunks(chunk_rows(RUN_COLS)) {
            let sql = format!(
                "INSERT INTO runs (id, task_id, scheduled_for, last_scheduled_for, fire_count, \
                 status, trigger, max_attempts, run_at, error, payload, finished_at, created_at) \
                 VALUES {} ON CONFLICT (task_id, scheduled_for) DO NOTHING",
                placeholders(chunk.len(), RUN_COLS)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (task, run) in chunk {
                q = q
                    .bind(run.id.to_string())
                    .bind(task.id.to_string())
                    .bind(ms(run.scheduled_for))
                    .bind(run.last_scheduled_for.map(ms))
                    .bind(run.fire_count)
                    .bind(run.status.as_str())
                    .bind(run.trigger.as_str())
                    .bind(i64::from(task.spec.retry.max_attempts))
                    .bind(ms(run.run_at))
                    .bind(run.error.clone())
                    .bind(run.payload.as_ref().map(|p| p.to_string()))
                    .bind(run.status.is_terminal().then(|| ms(now)))
                    .bind(ms(now));
            }
            inserted += q.execute(&mut **tx).await?.rows_affected() as usize;
        }
        const TASK_COLS: usize = 3;
        for chunk in plans.chunks(chunk_rows(TASK_COLS)) {
            let sql = format!(
                "WITH v (id, next_fire_at, state) AS (VALUES {}) \
                 UPDATE tasks SET next_fire_at = v.next_fire_at, state = v.state, updated_at = ? \
                 FROM v WHERE tasks.id = v.id",
                placeholders(chunk.len(), TASK_COLS)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (task, plan) in chunk {
                q = q
                    .bind(task.id.to_string())
                    .bind(plan.next_fire_at.map(ms))
                    .bind(plan.state.as_str());
            }
            q.bind(ms(now)).execute(&mut **tx).await?;
        }
        Ok(inserted)
    }
}

impl Store for SqliteStore {
    async fn create_task(&self, p: NewTask) -> Result<Task, StoreError> {
        self.count();
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
            // What was stored: instants at millisecond precision.
            Ok(_) => Ok(Task {
                id: p.id,
                spec: p.spec,
                state: TaskState::Active,
                next_fire_at: opt_instant("tasks", p.next_fire_at.map(ms))?,
                version: 1,
                created_at: instant("tasks", ms(p.now))?,
                updated_at: instant("tasks", ms(p.now))?,
            }),
        }
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<Task>, StoreError> {
        self.count();
        self.task_where("id", &id.to_string()).await
    }

    async fn get_task_by_name(&self, name: &str) -> Result<Option<Task>, StoreError> {
        self.count();
        // The live task of that name, else the newest cancelled one.
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE name = ? \
             ORDER BY state = 'cancelled', created_at DESC, id DESC LIMIT 1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(task_from_row).transpose()
    }

    async fn update_task(&self, p: UpdateTask) -> Result<Task, StoreError> {
        self.count();
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
        self.count();
        let mut tx = self.write().await?;
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE state = 'active' AND next_fire_at <= ? \
             ORDER BY next_fire_at LIMIT ?"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ms(p.horizon))
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
        self.count();
        let now = ms(p.now);
        let lease_until = now + i64::try_from(p.lease.as_millis()).unwrap_or(i64::MAX / 2);
        let mut tx = self.write().await?;
        let sql = format!(
            "UPDATE runs SET status = 'running', lease_owner = ?, lease_expires_at = ?, \
             fence = fence + 1, attempt = attempt + 1, started_at = MAX(run_at, ?) \
             WHERE id IN (SELECT id FROM runs WHERE status IN ('queued', 'retrying') \
                          AND run_at <= ? ORDER BY run_at LIMIT ?) \
             RETURNING {RUN_COLUMNS}"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&p.owner)
            .bind(lease_until)
            .bind(now)
            .bind(ms(p.ready_by))
            .bind(i64::from(p.limit))
            .fetch_all(&mut **tx)
            .await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query("UPDATE nodes SET heartbeat_at = ? WHERE id = ?")
            .bind(now)
            .bind(&p.owner)
            .execute(&mut **tx)
            .await?;
        let runs = rows
            .iter()
            .map(run_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        // The attempts as multi-row inserts; the runs' tasks in one query.
        for chunk in runs.chunks(chunk_rows(5)) {
            let sql = format!(
                "INSERT INTO attempts (run_id, attempt, fence, node, started_at) VALUES {}",
                placeholders(chunk.len(), 5)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for r in chunk {
                q = q
                    .bind(r.id.to_string())
                    .bind(r.attempt)
                    .bind(r.fence)
                    .bind(&p.owner)
                    .bind(r.started_at.map_or(now, ms));
            }
            q.execute(&mut **tx).await?;
        }
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
        self.count();
        Ok(self
            .finish_attempts(vec![p])
            .await?
            .first()
            .copied()
            .unwrap_or(false))
    }

    async fn finish_attempts(&self, batch: Vec<FinishAttempt>) -> Result<Vec<bool>, StoreError> {
        self.count();
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<OutcomeRow> = batch.iter().map(OutcomeRow::new).collect();
        let mut tx = self.write().await?;
        let mut applied = std::collections::HashSet::new();
        const COLS: usize = 8;
        for chunk in rows.chunks(chunk_rows(COLS)) {
            let sql = format!(
                "WITH v (id, fence, status, run_at, finished_at, result, error, output) AS (VALUES {}) \
                 UPDATE runs SET status = v.status, run_at = COALESCE(v.run_at, runs.run_at), \
                 finished_at = v.finished_at, lease_owner = NULL, lease_expires_at = NULL, \
                 result = v.result, error = v.error, output = COALESCE(v.output, runs.output) \
                 FROM v WHERE runs.id = v.id AND runs.fence = v.fence AND runs.status = 'running' \
                 RETURNING runs.id",
                placeholders(chunk.len(), COLS)
            );
            let mut q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql));
            for r in chunk {
                q = q
                    .bind(&r.id)
                    .bind(r.fence)
                    .bind(r.status.as_str())
                    .bind(r.run_at)
                    .bind(r.finished_at)
                    .bind(&r.result)
                    .bind(&r.error)
                    .bind(&r.output);
            }
            applied.extend(q.fetch_all(&mut **tx).await?);
        }
        let done: Vec<&OutcomeRow> = rows.iter().filter(|r| applied.contains(&r.id)).collect();
        const ATTEMPT_COLS: usize = 5;
        for chunk in done.chunks(chunk_rows(ATTEMPT_COLS)) {
            let sql = format!(
                "WITH v (id, fence, finished_at, outcome, error) AS (VALUES {}) \
                 UPDATE attempts SET finished_at = v.finished_at, outcome = v.outcome, \
                 error = v.error FROM v WHERE attempts.run_id = v.id AND attempts.fence = v.fence",
                placeholders(chunk.len(), ATTEMPT_COLS)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for r in chunk {
                q = q
                    .bind(&r.id)
                    .bind(r.fence)
                    .bind(r.now)
                    .bind(r.status.as_str())
                    .bind(&r.error);
            }
            q.execute(&mut **tx).await?;
        }
        tx.commit().await?;
        Ok(batch
            .iter()
            .map(|p| applied.contains(&p.id.to_string()))
            .collect())
    }

    async fn release_run(&self, id: RunId, fence: i64, now: Timestamp) -> Result<bool, StoreError> {
        self.count();
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

    async fn defer_run(
        &self,
        id: RunId,
        fence: i64,
        run_at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "UPDATE runs SET status = 'queued', run_at = ?, attempt = attempt - 1, \
             started_at = NULL, lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = ? AND fence = ? AND status = 'running'",
        )
        .bind(ms(run_at))
        .bind(id.to_string())
        .bind(fence)
        .execute(&mut **tx)
        .await?;
        if res.rows_affected() == 0 {
            return Ok(false);
        }
        // The attempt never started; the next claim records it afresh.
        sqlx::query("DELETE FROM attempts WHERE run_id = ? AND fence = ?")
            .bind(id.to_string())
            .bind(fence)
            .execute(&mut **tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn cancel_run(
        &self,
        id: RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<bool, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "UPDATE runs SET status = 'cancelled', finished_at = ?, error = ?, \
             lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = ? AND status IN ('queued', 'retrying', 'running')",
        )
        .bind(ms(now))
        .bind(reason)
        .bind(id.to_string())
        .execute(&mut **tx)
        .await?;
        if res.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE attempts SET finished_at = ?, outcome = 'cancelled', error = ? \
             WHERE run_id = ? AND finished_at IS NULL",
        )
        .bind(ms(now))
        .bind(reason)
        .bind(id.to_string())
        .execute(&mut **tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn next_lease_expiry(&self) -> Result<Option<Timestamp>, StoreError> {
        self.count();
        let next: Option<i64> =
            sqlx::query_scalar("SELECT MIN(lease_expires_at) FROM runs WHERE status = 'running'")
                .fetch_one(&self.pool)
                .await?;
        opt_instant("runs", next)
    }

    async fn wake_waiting(&self, task: TaskId, now: Timestamp) -> Result<u64, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "UPDATE runs SET run_at = ? WHERE task_id = ? AND status = 'queued' \
             AND scheduled_for <= ? AND run_at > ?",
        )
        .bind(ms(now))
        .bind(task.to_string())
        .bind(ms(now))
        .bind(ms(now))
        .execute(&mut **tx)
        .await?;
        tx.commit().await?;
        Ok(res.rows_affected())
    }

    async fn cancel_running(
        &self,
        task: TaskId,
        except: RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Vec<RunId>, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        let ids: Vec<String> = sqlx::query_scalar(
            "UPDATE runs SET status = 'cancelled', finished_at = ?, error = ?, \
             lease_owner = NULL, lease_expires_at = NULL \
             WHERE task_id = ? AND status = 'running' AND id <> ? RETURNING id",
        )
        .bind(ms(now))
        .bind(reason)
        .bind(task.to_string())
        .bind(except.to_string())
        .fetch_all(&mut **tx)
        .await?;
        for id in &ids {
            sqlx::query(
                "UPDATE attempts SET finished_at = ?, outcome = 'cancelled', error = ? \
                 WHERE run_id = ? AND finished_at IS NULL",
            )
            .bind(ms(now))
            .bind(reason)
            .bind(id)
            .execute(&mut **tx)
            .await?;
        }
        tx.commit().await?;
        ids.iter()
            .map(|id| id.parse().map_err(|e| corrupt("runs", e)))
            .collect()
    }

    async fn extend_leases(
        &self,
        owner: &str,
        runs: &[(RunId, i64)],
        now: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<RunId>, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        sqlx::query("UPDATE nodes SET heartbeat_at = ? WHERE id = ?")
            .bind(ms(now))
            .bind(owner)
            .execute(&mut **tx)
            .await?;
        // One statement per chunk; the leases still held come back.
        let mut held = std::collections::HashSet::new();
        for chunk in runs.chunks(chunk_rows(2)) {
            let sql = format!(
                "WITH v (id, fence) AS (VALUES {}) \
                 UPDATE runs SET lease_expires_at = ? FROM v \
                 WHERE runs.id = v.id AND runs.fence = v.fence AND runs.lease_owner = ? \
                 AND runs.status = 'running' RETURNING runs.id",
                placeholders(chunk.len(), 2)
            );
            let mut q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql));
            for (id, fence) in chunk {
                q = q.bind(id.to_string()).bind(*fence);
            }
            held.extend(q.bind(ms(until)).bind(owner).fetch_all(&mut **tx).await?);
        }
        let lost = runs
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !held.contains(&id.to_string()))
            .collect();
        tx.commit().await?;
        Ok(lost)
    }

    async fn reap_expired(&self, p: ReapParams) -> Result<Vec<RunId>, StoreError> {
        self.count();
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

    async fn prune(&self, p: super::PruneParams) -> Result<u64, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "DELETE FROM runs WHERE id IN ( \
               SELECT id FROM ( \
                 SELECT id, created_at, ROW_NUMBER() OVER ( \
                   PARTITION BY task_id ORDER BY scheduled_for DESC) AS newest \
                 FROM runs WHERE status NOT IN ('queued', 'running', 'retrying')) \
               WHERE newest > ? OR created_at < ? LIMIT ?)",
        )
        .bind(i64::from(p.keep_runs))
        .bind(ms(p.older_than))
        .bind(i64::from(p.limit))
        .execute(&mut **tx)
        .await?;
        tx.commit().await?;
        Ok(res.rows_affected())
    }

    async fn pause_task(&self, id: TaskId, now: Timestamp) -> Result<Option<Task>, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "UPDATE tasks SET state = 'paused', version = version + 1, updated_at = ? \
             WHERE id = ? AND state = 'active'",
        )
        .bind(ms(now))
        .bind(id.to_string())
        .execute(&mut **tx)
        .await?;
        if res.rows_affected() == 0 {
            return Ok(None);
        }
        // Fires inside the pause that were planned, or even claimed, ahead of
        // time and have not started: they never happen.
        sqlx::query(
            "DELETE FROM runs WHERE task_id = ? AND trigger = 'schedule' AND scheduled_for > ? \
             AND (status = 'queued' AND attempt = 0 OR status = 'running' AND started_at > ?)",
        )
        .bind(id.to_string())
        .bind(ms(now))
        .bind(ms(now))
        .execute(&mut **tx)
        .await?;
        sqlx::query("INSERT INTO task_events (task_id, kind, at) VALUES (?, 'paused', ?)")
            .bind(id.to_string())
            .bind(ms(now))
            .execute(&mut **tx)
            .await?;
        let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_one(&mut **tx)
            .await?;
        tx.commit().await?;
        task_from_row(&row).map(Some)
    }

    async fn resume_task(
        &self,
        id: TaskId,
        now: Timestamp,
        next_fire_at: Option<Timestamp>,
        detail: serde_json::Value,
    ) -> Result<Option<Task>, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        let res = sqlx::query(
            "UPDATE tasks SET state = 'active', next_fire_at = ?, version = version + 1, \
             updated_at = ? WHERE id = ? AND state = 'paused'",
        )
        .bind(next_fire_at.map(ms))
        .bind(ms(now))
        .bind(id.to_string())
        .execute(&mut **tx)
        .await?;
        if res.rows_affected() == 0 {
            return Ok(None);
        }
        sqlx::query(
            "INSERT INTO task_events (task_id, kind, at, detail) VALUES (?, 'resumed', ?, ?)",
        )
        .bind(id.to_string())
        .bind(ms(now))
        .bind(detail.to_string())
        .execute(&mut **tx)
        .await?;
        let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_one(&mut **tx)
            .await?;
        tx.commit().await?;
        task_from_row(&row).map(Some)
    }

    async fn task_events(&self, id: TaskId) -> Result<Vec<TaskEvent>, StoreError> {
        self.count();
        let rows = sqlx::query(
            "SELECT task_id, kind, at, detail FROM task_events WHERE task_id = ? ORDER BY at, id",
        )
        .bind(id.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    async fn register_node(&self, node: Node) -> Result<(), StoreError> {
        self.count();
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO nodes (id, host, version, started_at, heartbeat_at, skew_ms) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET host = excluded.host, \
             version = excluded.version, started_at = excluded.started_at, \
             heartbeat_at = excluded.heartbeat_at, skew_ms = excluded.skew_ms",
        )
        .bind(&node.id)
        .bind(&node.host)
        .bind(&node.version)
        .bind(ms(node.started_at))
        .bind(ms(node.heartbeat_at))
        .bind(node.skew_ms)
        .execute(&mut **tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn nodes(&self) -> Result<Vec<Node>, StoreError> {
        self.count();
        let rows = sqlx::query(
            "SELECT id, host, version, started_at, heartbeat_at, skew_ms FROM nodes \
             ORDER BY heartbeat_at DESC",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(node_from_row).collect()
    }

    async fn insert_run(
        &self,
        task: &Task,
        run: super::NewRun,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.count();
        let mut tx = self.write().await?;
        let plan = TaskPlan {
            runs: vec![run],
            next_fire_at: task.next_fire_at,
            state: task.state,
        };
        let inserted = Self::apply_plans(&mut tx.tx, &[(task, plan)], now).await?;
        tx.commit().await?;
        Ok(inserted == 1)
    }

    async fn list_tasks(&self, p: super::ListTasks) -> Result<Vec<Task>, StoreError> {
        self.count();
        let (label_key, label_value) = p.label.map_or((None, None), |(k, v)| (Some(k), Some(v)));
        // Unused filters bind NULL and drop out; the label path is bound, not spliced.
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks \
             WHERE (?1 IS NULL OR state = ?1) \
             AND (?2 IS NULL OR json_extract(spec, '$.labels.\"' || ?2 || '\"') = ?3) \
             AND (?4 IS NULL OR substr(name, 1, length(?4)) = ?4) \
             AND (?5 IS NULL OR id > ?5) \
             ORDER BY id LIMIT ?6"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(p.state.map(TaskState::as_str))
            .bind(label_key)
            .bind(label_value)
            .bind(p.name_prefix)
            .bind(p.after.map(|a| a.to_string()))
            .bind(i64::from(p.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(task_from_row).collect()
    }

    async fn list_runs(&self, p: super::ListRuns) -> Result<Vec<Run>, StoreError> {
        self.count();
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs \
             WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR task_id = ?2) \
             AND (?3 IS NULL OR id < ?3) ORDER BY id DESC LIMIT ?4"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(p.status.map(RunStatus::as_str))
            .bind(p.task.map(|t| t.to_string()))
            .bind(p.before.map(|b| b.to_string()))
            .bind(i64::from(p.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(run_from_row).collect()
    }

    async fn attempts(&self, run: RunId) -> Result<Vec<super::Attempt>, StoreError> {
        self.count();
        let rows = sqlx::query(
            "SELECT attempt, fence, node, started_at, finished_at, outcome, error \
             FROM attempts WHERE run_id = ? ORDER BY attempt",
        )
        .bind(run.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(attempt_from_row).collect()
    }

    async fn get_run(&self, id: RunId) -> Result<Option<Run>, StoreError> {
        self.count();
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn runs_of_task(&self, task: TaskId, limit: u32) -> Result<Vec<Run>, StoreError> {
        self.count();
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
        self.count();
        let next: Option<i64> =
            sqlx::query_scalar("SELECT MIN(next_fire_at) FROM tasks WHERE state = 'active'")
                .fetch_one(&self.pool)
                .await?;
        opt_instant("tasks", next)
    }

    async fn next_run_at(&self) -> Result<Option<Timestamp>, StoreError> {
        self.count();
        let next: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(run_at) FROM runs WHERE status IN ('queued', 'retrying')",
        )
        .fetch_one(&self.pool)
        .await?;
        opt_instant("runs", next)
    }

    async fn heartbeat(&self, node: &str, now: Timestamp, skew_ms: i64) -> Result<(), StoreError> {
        self.count();
        let mut tx = self.write().await?;
        sqlx::query("UPDATE nodes SET heartbeat_at = ?, skew_ms = ? WHERE id = ?")
            .bind(ms(now))
            .bind(skew_ms)
            .bind(node)
            .execute(&mut **tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn running_count(&self, task: TaskId, except: RunId) -> Result<i64, StoreError> {
        self.count();
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM runs WHERE task_id = ? AND status = 'running' AND id <> ?",
        )
        .bind(task.to_string())
        .bind(except.to_string())
        .fetch_one(&self.pool)
        .await?)
    }
}
