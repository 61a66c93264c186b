//! The PostgreSQL backend, for several nodes on one database.
//!
//! The tables and their representations are SQLite's (`rows.rs`); what
//! differs is concurrency. Planning takes due tasks `FOR UPDATE SKIP LOCKED`,
//! so nodes plan disjoint tasks and never wait on each other; claiming is one
//! `UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) RETURNING` that
//! sets the owner, the lease and `fence = fence + 1`; every finishing write
//! names the fence it was given, so a late write from a node that lost its
//! lease changes nothing. Statements are written with `?` and numbered for
//! PostgreSQL by [`numbered`].

use jiff::Timestamp;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row, Transaction};

use super::rows::{
    OutcomeRow, RUN_COLUMNS, TASK_COLUMNS, corrupt, instant, is_unique_violation, ms, opt_instant,
    opt_json, row_readers, spec_json,
};
use super::{
    ClaimParams, ClaimedRun, FinishAttempt, NewTask, PlanOutcome, PlanParams, ReapParams, Store,
    StoreError, TaskPlan, UpdateTask,
};
use crate::model::{
    Node, Run, RunId, RunStatus, Task, TaskEvent, TaskId, TaskSpec, TaskState, Trigger,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

row_readers!(PgRow);

/// A store on a PostgreSQL database, shared by any number of nodes.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    operations: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The LISTEN/NOTIFY channel; payloads `tasks` and `runs`.
const CHANNEL: &str = "agentcron";

/// Tells the other nodes, when `tx` commits, that tasks or runs changed.
async fn notify(tx: &mut Transaction<'static, Postgres>, what: &str) -> Result<(), StoreError> {
    query("SELECT pg_notify(?, ?)")
        .bind(CHANNEL)
        .bind(what.to_string())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// [`notify`] outside a transaction.
async fn notify_now(pool: &PgPool, what: &str) -> Result<(), StoreError> {
    query("SELECT pg_notify(?, ?)")
        .bind(CHANNEL)
        .bind(what.to_string())
        .execute(pool)
        .await?;
    Ok(())
}

/// `?` placeholders as `$1, $2, …`; `?N` as `$N`. The statements here hold
/// no `?` inside string literals.
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '?' {
            out.push(c);
            continue;
        }
        out.push('$');
        if chars.peek().is_some_and(char::is_ascii_digit) {
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                out.push(d);
            }
        } else {
            n += 1;
            out.push_str(&n.to_string());
        }
    }
    out
}

/// A statement written with `?`s.
fn query<'q>(sql: &str) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(sqlx::AssertSqlSafe(numbered(sql)))
}

fn query_scalar<'q, T>(
    sql: &str,
) -> sqlx::query::QueryScalar<'q, Postgres, T, sqlx::postgres::PgArguments>
where
    T: Send + Unpin,
    (T,): for<'r> sqlx::FromRow<'r, PgRow>,
{
    sqlx::query_scalar(sqlx::AssertSqlSafe(numbered(sql)))
}

/// `(?, ?, ?), (?, ?, ?)` for `rows` rows of `cols` placeholders.
fn placeholders(rows: usize, cols: usize) -> String {
    let row = format!("({})", vec!["?"; cols].join(", "));
    vec![row; rows].join(", ")
}

/// Rows per multi-row statement: PostgreSQL binds at most 65,535 parameters.
fn chunk_rows(cols: usize) -> usize {
    60_000 / cols
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host/db`) and applies migrations.
    /// Several nodes may open the same database; migrations take a lock.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(8)
            // Short: in an outage, loops fail fast and retry every second.
            .acquire_timeout(std::time::Duration::from_secs(3))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(PgStore {
            pool,
            operations: std::sync::Arc::default(),
        })
    }

    /// Closes the connections (waiting for those in use to come back).
    pub async fn close(&self) {
        self.pool.close().await;
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
        let rows = query("SELECT status, COUNT(*) AS n FROM runs GROUP BY status")
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

    async fn task_by_id<'e, E>(executor: E, id: &str) -> Result<Option<Task>, StoreError>
    where
        E: sqlx::PgExecutor<'e>,
    {
        let row = query(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?"))
            .bind(id.to_string())
            .fetch_optional(executor)
            .await?;
        row.as_ref().map(task_from_row).transpose()
    }

    /// Records a batch of plans as multi-row statements.
    async fn apply_plans(
        tx: &mut Transaction<'static, Postgres>,
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
            let mut q = query(&sql);
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
            let mut q = query(&sql);
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

    /// Ends the attempt `(run, fence)` with `outcome` and `error`.
    async fn close_attempt(
        tx: &mut Transaction<'static, Postgres>,
        run: &str,
        fence: i64,
        now: i64,
        outcome: &str,
        error: &str,
    ) -> Result<(), StoreError> {
        query(
            "UPDATE attempts SET finished_at = ?, outcome = ?, error = ? \
             WHERE run_id = ? AND fence = ?",
        )
        .bind(now)
        .bind(outcome)
        .bind(error)
        .bind(run)
        .bind(fence)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}

impl Store for PgStore {
    async fn create_task(&self, p: NewTask) -> Result<Task, StoreError> {
        self.count();
        let res = query(
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
        if res.is_ok() {
            notify_now(&self.pool, "tasks").await?;
        }
        match res {
            Err(e) if is_unique_violation(&e) => Err(StoreError::DuplicateName(p.spec.name)),
            Err(e) => Err(e.into()),
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
        Self::task_by_id(&self.pool, &id.to_string()).await
    }

    async fn get_task_by_name(&self, name: &str) -> Result<Option<Task>, StoreError> {
        self.count();
        let row = query(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE name = ? \
             ORDER BY state = 'cancelled', created_at DESC, id DESC LIMIT 1"
        ))
        .bind(name.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(task_from_row).transpose()
    }

    async fn update_task(&self, p: UpdateTask) -> Result<Task, StoreError> {
        self.count();
        let mut tx = self.pool.begin().await?;
        let res = query(
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
                tx.rollback().await?;
                return Err(StoreError::DuplicateName(p.spec.name));
            }
            other => other?,
        };
        let Some(task) = Self::task_by_id(&mut *tx, &p.id.to_string()).await? else {
            tx.rollback().await?;
            return Err(StoreError::TaskNotFound(p.id.to_string()));
        };
        if res.rows_affected() == 0 {
            tx.rollback().await?;
            return Err(StoreError::VersionConflict {
                id: p.id,
                expected: p.expected_version,
                current: task.version,
            });
        }
        notify(&mut tx, "tasks").await?;
        tx.commit().await?;
        Ok(task)
    }

    async fn plan(
        &self,
        p: PlanParams,
        planner: &(dyn Fn(&Task) -> TaskPlan + Sync),
    ) -> Result<PlanOutcome, StoreError> {
        self.count();
        let mut tx = self.pool.begin().await?;
        // Skip tasks another node is planning right now: it will plan them.
        let rows = query(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE state = 'active' AND next_fire_at <= ? \
             ORDER BY next_fire_at LIMIT ? FOR UPDATE SKIP LOCKED"
        ))
        .bind(ms(p.horizon))
        .bind(i64::from(p.limit))
        .fetch_all(&mut *tx)
        .await?;
        let tasks = rows
            .iter()
            .map(task_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let plans: Vec<(&Task, TaskPlan)> = tasks.iter().map(|t| (t, planner(t))).collect();
        let runs_inserted = Self::apply_plans(&mut tx, &plans, p.now).await?;
        if runs_inserted > 0 {
            notify(&mut tx, "runs").await?;
        }
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
        let mut tx = self.pool.begin().await?;
        let rows = query(&format!(
            "UPDATE runs SET status = 'running', lease_owner = ?, lease_expires_at = ?, \
             fence = fence + 1, attempt = attempt + 1, started_at = GREATEST(run_at, ?) \
             WHERE id IN (SELECT id FROM runs WHERE status IN ('queued', 'retrying') \
                          AND run_at <= ? ORDER BY run_at LIMIT ? FOR UPDATE SKIP LOCKED) \
             RETURNING {RUN_COLUMNS}"
        ))
        .bind(&p.owner)
        .bind(lease_until)
        .bind(now)
        .bind(ms(p.ready_by))
        .bind(i64::from(p.limit))
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            tx.rollback().await?;
            return Ok(Vec::new());
        }
        query("UPDATE nodes SET heartbeat_at = ? WHERE id = ?")
            .bind(now)
            .bind(&p.owner)
            .execute(&mut *tx)
            .await?;
        let runs = rows
            .iter()
            .map(run_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        for chunk in runs.chunks(chunk_rows(5)) {
            let sql = format!(
                "INSERT INTO attempts (run_id, attempt, fence, node, started_at) VALUES {}",
                placeholders(chunk.len(), 5)
            );
            let mut q = query(&sql);
            for r in chunk {
                q = q
                    .bind(r.id.to_string())
                    .bind(r.attempt)
                    .bind(r.fence)
                    .bind(&p.owner)
                    .bind(r.started_at.map_or(now, ms));
            }
            q.execute(&mut *tx).await?;
        }
        let task_ids: Vec<String> = runs
            .iter()
            .map(|r| r.task_id.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let task_rows = query(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE id = ANY(?)"
        ))
        .bind(task_ids)
        .fetch_all(&mut *tx)
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
        let mut tx = self.pool.begin().await?;
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
            let mut q = query_scalar::<String>(&sql);
            for r in chunk {
                q = q
                    .bind(r.id.clone())
                    .bind(r.fence)
                    .bind(r.status.as_str())
                    .bind(r.run_at)
                    .bind(r.finished_at)
                    .bind(r.result.clone())
                    .bind(r.error.clone())
                    .bind(r.output.clone());
            }
            applied.extend(q.fetch_all(&mut *tx).await?);
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
            let mut q = query(&sql);
            for r in chunk {
                q = q
                    .bind(r.id.clone())
                    .bind(r.fence)
                    .bind(r.now)
                    .bind(r.status.as_str())
                    .bind(r.error.clone());
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(batch
            .iter()
            .map(|p| applied.contains(&p.id.to_string()))
            .collect())
    }

    async fn release_run(&self, id: RunId, fence: i64, now: Timestamp) -> Result<bool, StoreError> {
        self.count();
        let mut tx = self.pool.begin().await?;
        let res = query(
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
            tx.rollback().await?;
            return Ok(false);
        }
        let why = "the node stopped before the attempt finished";
        Self::close_attempt(&mut tx, &id.to_string(), fence, ms(now), "released", why).await?;
        notify(&mut tx, "runs").await?;
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
        let mut tx = self.pool.begin().await?;
        let res = query(
            "UPDATE runs SET status = 'queued', run_at = ?, attempt = attempt - 1, \
             started_at = NULL, lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = ? AND fence = ? AND status = 'running'",
        )
        .bind(ms(run_at))
        .bind(id.to_string())
        .bind(fence)
        .execute(&mut *tx)
        .await?;
        if res.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        query("DELETE FROM attempts WHERE run_id = ? AND fence = ?")
            .bind(id.to_string())
            .bind(fence)
            .execute(&mut *tx)
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
        let mut tx = self.pool.begin().await?;
        let res = query(
            "UPDATE runs SET status = 'cancelled', finished_at = ?, error = ?, \
             lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = ? AND status IN ('queued', 'retrying', 'running')",
        )
        .bind(ms(now))
        .bind(reason.to_string())
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        if res.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        query(
            "UPDATE attempts SET finished_at = ?, outcome = 'cancelled', error = ? \
             WHERE run_id = ? AND finished_at IS NULL",
        )
        .bind(ms(now))
        .bind(reason.to_string())
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn next_lease_expiry(&self) -> Result<Option<Timestamp>, StoreError> {
        self.count();
        let next: Option<i64> =
            query_scalar("SELECT MIN(lease_expires_at) FROM runs WHERE status = 'running'")
                .fetch_one(&self.pool)
                .await?;
        opt_instant("runs", next)
    }

    async fn wake_waiting(&self, task: TaskId, now: Timestamp) -> Result<u64, StoreError> {
        self.count();
        let res = query(
            "UPDATE runs SET run_at = ?1 WHERE task_id = ?2 AND status = 'queued' \
             AND scheduled_for <= ?1 AND run_at > ?1",
        )
        .bind(ms(now))
        .bind(task.to_string())
        .execute(&self.pool)
        .await?;
        if res.rows_affected() > 0 {
            notify_now(&self.pool, "runs").await?;
        }
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
        let mut tx = self.pool.begin().await?;
        let ids: Vec<String> = query_scalar(
            "UPDATE runs SET status = 'cancelled', finished_at = ?, error = ?, \
             lease_owner = NULL, lease_expires_at = NULL \
             WHERE task_id = ? AND status = 'running' AND id <> ? RETURNING id",
        )
        .bind(ms(now))
        .bind(reason.to_string())
        .bind(task.to_string())
        .bind(except.to_string())
        .fetch_all(&mut *tx)
        .await?;
        query(
            "UPDATE attempts SET finished_at = ?, outcome = 'cancelled', error = ? \
             WHERE run_id = ANY(?) AND finished_at IS NULL",
        )
        .bind(ms(now))
        .bind(reason.to_string())
        .bind(ids.clone())
        .execute(&mut *tx)
        .await?;
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
        let mut tx = self.pool.begin().await?;
        query("UPDATE nodes SET heartbeat_at = ? WHERE id = ?")
            .bind(ms(now))
            .bind(owner.to_string())
            .execute(&mut *tx)
            .await?;
        let mut held = std::collections::HashSet::new();
        for chunk in runs.chunks(chunk_rows(2)) {
            let sql = format!(
                "WITH v (id, fence) AS (VALUES {}) \
                 UPDATE runs SET lease_expires_at = ? FROM v \
                 WHERE runs.id = v.id AND runs.fence = v.fence AND runs.lease_owner = ? \
                 AND runs.status = 'running' RETURNING runs.id",
                placeholders(chunk.len(), 2)
            );
            let mut q = query_scalar::<String>(&sql);
            for (id, fence) in chunk {
                q = q.bind(id.to_string()).bind(*fence);
            }
            held.extend(
                q.bind(ms(until))
                    .bind(owner.to_string())
                    .fetch_all(&mut *tx)
                    .await?,
            );
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
        let mut tx = self.pool.begin().await?;
        // Another node reaping at the same time takes other rows.
        let rows = query(
            "SELECT id, fence, attempt, max_attempts FROM runs \
             WHERE status = 'running' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ? \
             FOR UPDATE SKIP LOCKED",
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
            Self::close_attempt(&mut tx, &id, fence, now, "lost", lost).await?;
            let sql = if spent {
                "UPDATE runs SET status = 'failed', finished_at = ?, error = ?, \
                 lease_owner = NULL, lease_expires_at = NULL WHERE id = ? AND fence = ?"
            } else {
                "UPDATE runs SET status = 'queued', trigger = 'recovery', run_at = ?, error = ?, \
                 lease_owner = NULL, lease_expires_at = NULL WHERE id = ? AND fence = ?"
            };
            query(sql)
                .bind(now)
                .bind(lost)
                .bind(id.clone())
                .bind(fence)
                .execute(&mut *tx)
                .await?;
            reaped.push(id.parse().map_err(|e| corrupt("runs", e))?);
        }
        if !reaped.is_empty() {
            notify(&mut tx, "runs").await?;
        }
        tx.commit().await?;
        Ok(reaped)
    }

    async fn prune(&self, p: super::PruneParams) -> Result<u64, StoreError> {
        self.count();
        let res = query(
            "DELETE FROM runs WHERE id IN ( \
               SELECT id FROM ( \
                 SELECT id, created_at, ROW_NUMBER() OVER ( \
                   PARTITION BY task_id ORDER BY scheduled_for DESC) AS newest \
                 FROM runs WHERE status NOT IN ('queued', 'running', 'retrying')) AS r \
               WHERE newest > ? OR created_at < ? LIMIT ?)",
        )
        .bind(i64::from(p.keep_runs))
        .bind(ms(p.older_than))
        .bind(i64::from(p.limit))
        .execute(&self.pool)
        .await?;
        Ok(res.rows_affected())
    }

    async fn pause_task(&self, id: TaskId, now: Timestamp) -> Result<Option<Task>, StoreError> {
        self.count();
        let mut tx = self.pool.begin().await?;
        let res = query(
            "UPDATE tasks SET state = 'paused', version = version + 1, updated_at = ? \
             WHERE id = ? AND state = 'active'",
        )
        .bind(ms(now))
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        if res.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        query(
            "DELETE FROM runs WHERE task_id = ?1 AND trigger = 'schedule' AND scheduled_for > ?2 \
             AND (status = 'queued' AND attempt = 0 OR status = 'running' AND started_at > ?2)",
        )
        .bind(id.to_string())
        .bind(ms(now))
        .execute(&mut *tx)
        .await?;
        query("INSERT INTO task_events (task_id, kind, at) VALUES (?, 'paused', ?)")
            .bind(id.to_string())
            .bind(ms(now))
            .execute(&mut *tx)
            .await?;
        let task = Self::task_by_id(&mut *tx, &id.to_string()).await?;
        tx.commit().await?;
        Ok(task)
    }

    async fn resume_task(
        &self,
        id: TaskId,
        now: Timestamp,
        next_fire_at: Option<Timestamp>,
        detail: serde_json::Value,
    ) -> Result<Option<Task>, StoreError> {
        self.count();
        let mut tx = self.pool.begin().await?;
        let res = query(
            "UPDATE tasks SET state = 'active', next_fire_at = ?, version = version + 1, \
             updated_at = ? WHERE id = ? AND state = 'paused'",
        )
        .bind(next_fire_at.map(ms))
        .bind(ms(now))
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        if res.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        query("INSERT INTO task_events (task_id, kind, at, detail) VALUES (?, 'resumed', ?, ?)")
            .bind(id.to_string())
            .bind(ms(now))
            .bind(detail.to_string())
            .execute(&mut *tx)
            .await?;
        let task = Self::task_by_id(&mut *tx, &id.to_string()).await?;
        notify(&mut tx, "tasks").await?;
        tx.commit().await?;
        Ok(task)
    }

    async fn task_events(&self, id: TaskId) -> Result<Vec<TaskEvent>, StoreError> {
        self.count();
        let rows = query(
            "SELECT task_id, kind, at, detail FROM task_events WHERE task_id = ? ORDER BY at, id",
        )
        .bind(id.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    async fn register_node(&self, node: Node) -> Result<(), StoreError> {
        self.count();
        query(
            "INSERT INTO nodes (id, host, version, started_at, heartbeat_at, skew_ms) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET host = excluded.host, \
             version = excluded.version, started_at = excluded.started_at, \
             heartbeat_at = excluded.heartbeat_at, skew_ms = excluded.skew_ms",
        )
        .bind(node.id)
        .bind(node.host)
        .bind(node.version)
        .bind(ms(node.started_at))
        .bind(ms(node.heartbeat_at))
        .bind(node.skew_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn nodes(&self) -> Result<Vec<Node>, StoreError> {
        self.count();
        let rows = query(
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
        let mut tx = self.pool.begin().await?;
        let plan = TaskPlan {
            runs: vec![run],
            next_fire_at: task.next_fire_at,
            state: task.state,
        };
        let inserted = Self::apply_plans(&mut tx, &[(task, plan)], now).await?;
        if inserted > 0 {
            notify(&mut tx, "runs").await?;
        }
        tx.commit().await?;
        Ok(inserted == 1)
    }

    async fn list_tasks(&self, p: super::ListTasks) -> Result<Vec<Task>, StoreError> {
        self.count();
        let (label_key, label_value) = p.label.map_or((None, None), |(k, v)| (Some(k), Some(v)));
        let rows = query(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks \
             WHERE (CAST(?1 AS TEXT) IS NULL OR state = ?1) \
             AND (CAST(?2 AS TEXT) IS NULL OR (CAST(spec AS JSONB) -> 'labels' ->> ?2) = ?3) \
             AND (CAST(?4 AS TEXT) IS NULL OR starts_with(name, ?4)) \
             AND (CAST(?5 AS TEXT) IS NULL OR id > ?5) \
             ORDER BY id LIMIT ?6"
        ))
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
        let rows = query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs \
             WHERE (CAST(?1 AS TEXT) IS NULL OR status = ?1) \
             AND (CAST(?2 AS TEXT) IS NULL OR task_id = ?2) \
             AND (CAST(?3 AS TEXT) IS NULL OR id < ?3) ORDER BY id DESC LIMIT ?4"
        ))
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
        let rows = query(
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
        let row = query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?"))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn runs_of_task(&self, task: TaskId, limit: u32) -> Result<Vec<Run>, StoreError> {
        self.count();
        let rows = query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE task_id = ? ORDER BY scheduled_for DESC LIMIT ?"
        ))
        .bind(task.to_string())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(run_from_row).collect()
    }

    async fn next_fire_at(&self) -> Result<Option<Timestamp>, StoreError> {
        self.count();
        let next: Option<i64> =
            query_scalar("SELECT MIN(next_fire_at) FROM tasks WHERE state = 'active'")
                .fetch_one(&self.pool)
                .await?;
        opt_instant("tasks", next)
    }

    async fn next_run_at(&self) -> Result<Option<Timestamp>, StoreError> {
        self.count();
        let next: Option<i64> =
            query_scalar("SELECT MIN(run_at) FROM runs WHERE status IN ('queued', 'retrying')")
                .fetch_one(&self.pool)
                .await?;
        opt_instant("runs", next)
    }

    async fn changes(
        &self,
    ) -> Result<Option<tokio::sync::mpsc::Receiver<super::Change>>, StoreError> {
        use super::Change;
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(CHANNEL).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let changes: &[Change] = match listener.try_recv().await {
                    Ok(Some(n)) if n.payload() == "tasks" => &[Change::Tasks],
                    Ok(Some(_)) => &[Change::Runs],
                    Ok(None) => {
                        tracing::warn!("the LISTEN connection dropped and was re-established");
                        &[Change::Tasks, Change::Runs]
                    }
                    Err(sqlx::Error::PoolClosed) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, "listening for changes failed; retrying in 1s");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        &[Change::Tasks, Change::Runs]
                    }
                };
                for change in changes {
                    // A full queue already holds a wake-up; a closed one has no reader.
                    if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) =
                        tx.try_send(*change)
                    {
                        return;
                    }
                }
            }
        });
        Ok(Some(rx))
    }

    async fn database_now(&self) -> Result<Option<Timestamp>, StoreError> {
        let ms: i64 = query_scalar(
            "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
        )
        .fetch_one(&self.pool)
        .await?;
        instant("nodes", ms).map(Some)
    }

    async fn heartbeat(&self, node: &str, now: Timestamp, skew_ms: i64) -> Result<(), StoreError> {
        self.count();
        query("UPDATE nodes SET heartbeat_at = ?, skew_ms = ? WHERE id = ?")
            .bind(ms(now))
            .bind(skew_ms)
            .bind(node.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn running_count(&self, task: TaskId, except: RunId) -> Result<i64, StoreError> {
        self.count();
        Ok(query_scalar(
            "SELECT COUNT(*) FROM runs WHERE task_id = ? AND status = 'running' AND id <> ?",
        )
        .bind(task.to_string())
        .bind(except.to_string())
        .fetch_one(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::numbered;

    #[test]
    fn placeholders_are_numbered() {
        assert_eq!(
            numbered("a = ? AND b IN (?, ?) LIMIT ?"),
            "a = $1 AND b IN ($2, $3) LIMIT $4"
        );
        assert_eq!(
            numbered("?1 IS NULL OR x = ?1 AND y = ?12"),
            "$1 IS NULL OR x = $1 AND y = $12"
        );
    }
}
