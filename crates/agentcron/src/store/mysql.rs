//! The MySQL/MariaDB backend, for several nodes on one database.
//!
//! The tables and their representations are those of the other backends
//! (`rows.rs`). MariaDB has no `UPDATE … RETURNING` and no `UPDATE … FROM
//! (VALUES …)`, so this backend takes its own paths: claiming selects the
//! ready runs `FOR UPDATE SKIP LOCKED`, updates them and reads them back in
//! one transaction; finishing and lease renewal lock the rows they name, keep
//! those whose fence still holds, and update only those. Connections run at
//! READ COMMITTED, so locking reads take no gap locks. There is no
//! LISTEN/NOTIFY: engines poll (`max_sleep`).

use jiff::Timestamp;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions, MySqlRow};
use sqlx::{Executor, MySql, Row, Transaction};

use super::rows::{
    OutcomeRow, TASK_COLUMNS, corrupt, instant, is_unique_violation, ms, opt_instant, opt_json,
    row_readers, spec_json,
};
use super::{
    ClaimParams, ClaimedRun, FinishAttempt, NewTask, PlanOutcome, PlanParams, ReapParams, Store,
    StoreError, TaskPlan, UpdateTask,
};
use crate::model::{
    Node, Run, RunId, RunStatus, Task, TaskEvent, TaskId, TaskSpec, TaskState, Trigger,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/mysql");

row_readers!(MySqlRow);

/// `rows::RUN_COLUMNS` with `trigger` quoted: it is a reserved word here.
const RUN_COLUMNS: &str = "id, task_id, scheduled_for, last_scheduled_for, fire_count, \
     status, `trigger`, attempt, max_attempts, run_at, lease_owner, lease_expires_at, fence, \
     started_at, finished_at, result, error, output, payload";

/// A store on a MySQL or MariaDB database, shared by any number of nodes.
#[derive(Clone, Debug)]
pub struct MySqlStore {
    pool: MySqlPool,
    operations: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// `?, ?, ?` for `n` values.
fn list(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// A statement built at run time (only placeholders are spliced in).
fn query<'q>(sql: &str) -> sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments> {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
}

fn query_scalar<'q, T>(
    sql: &str,
) -> sqlx::query::QueryScalar<'q, MySql, T, sqlx::mysql::MySqlArguments>
where
    T: Send + Unpin,
    (T,): for<'r> sqlx::FromRow<'r, MySqlRow>,
{
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
}

/// `(?, ?, ?), (?, ?, ?)` for `rows` rows of `cols` placeholders.
fn placeholders(rows: usize, cols: usize) -> String {
    let row = format!("({})", vec!["?"; cols].join(", "));
    vec![row; rows].join(", ")
}

/// Rows per multi-row statement: MySQL binds at most 65,535 parameters.
fn chunk_rows(cols: usize) -> usize {
    60_000 / cols
}

impl MySqlStore {
    /// Connects to `url` (`mysql://user@host/db`) and applies migrations.
    /// Several nodes may open the same database; migrations take a lock.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let options: MySqlConnectOptions = url.parse()?;
        let pool = MySqlPoolOptions::new()
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .await?;
                    Ok(())
                })
            })
            .max_connections(8)
            // Short: in an outage, loops fail fast and retry every second.
            .acquire_timeout(std::time::Duration::from_secs(3))
            .connect_with(options)
            .await?;
        // Nodes starting together must not migrate together. sqlx's own lock
        // does not hold on MariaDB (two nodes both applied version 1), so take
        // a named lock on one connection and migrate on that connection.
        let mut conn = pool.acquire().await?;
        let got: Option<i64> =
            query_scalar("SELECT CAST(GET_LOCK('agentcron_migrations', 60) AS SIGNED)")
                .fetch_one(&mut *conn)
                .await?;
        if got != Some(1) {
            return Err(StoreError::Database(sqlx::Error::Protocol(
                "could not take the migration lock within 60 s".into(),
            )));
        }
        let migrated = MIGRATOR.run(&mut *conn).await;
        let _ = query("SELECT RELEASE_LOCK('agentcron_migrations')")
            .execute(&mut *conn)
            .await;
        drop(conn);
        migrated?;
        Ok(MySqlStore {
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
        E: sqlx::MySqlExecutor<'e>,
    {
        let row = query(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?"))
            .bind(id.to_string())
            .fetch_optional(executor)
            .await?;
        row.as_ref().map(task_from_row).transpose()
    }

    /// Records a batch of plans as multi-row statements.
    async fn apply_plans(
        tx: &mut Transaction<'static, MySql>,
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
                "INSERT IGNORE INTO runs (id, task_id, scheduled_for, last_scheduled_for, fire_count, \
                 status, `trigger`, max_attempts, run_at, error, payload, finished_at, created_at) \
                 VALUES {}",
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
        for (task, plan) in plans {
            query("UPDATE tasks SET next_fire_at = ?, state = ?, updated_at = ? WHERE id = ?")
                .bind(plan.next_fire_at.map(ms))
                .bind(plan.state.as_str())
                .bind(ms(now))
                .bind(task.id.to_string())
                .execute(&mut **tx)
                .await?;
        }
        Ok(inserted)
    }

    /// Ends the attempt `(run, fence)` with `outcome` and `error`.
    async fn close_attempt(
        tx: &mut Transaction<'static, MySql>,
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

impl Store for MySqlStore {
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
        // No UPDATE … RETURNING here: lock the ready runs (skipping those
        // another node is taking), update them, read them back.
        let ids: Vec<String> = query_scalar(
            "SELECT id FROM runs WHERE status IN ('queued', 'retrying') AND run_at <= ? \
             ORDER BY run_at LIMIT ? FOR UPDATE SKIP LOCKED",
        )
        .bind(ms(p.ready_by))
        .bind(i64::from(p.limit))
        .fetch_all(&mut *tx)
        .await?;
        if ids.is_empty() {
            tx.rollback().await?;
            return Ok(Vec::new());
        }
        let mut update = query(&format!(
            "UPDATE runs SET status = 'running', lease_owner = ?, lease_expires_at = ?, \
             fence = fence + 1, attempt = attempt + 1, started_at = GREATEST(run_at, ?) \
             WHERE id IN ({})",
            list(ids.len())
        ))
        .bind(&p.owner)
        .bind(lease_until)
        .bind(now);
        for id in &ids {
            update = update.bind(id.clone());
        }
        update.execute(&mut *tx).await?;
        let mut select = query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE id IN ({})",
            list(ids.len())
        ));
        for id in &ids {
            select = select.bind(id.clone());
        }
        let rows = select.fetch_all(&mut *tx).await?;
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
        let mut select = query(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE id IN ({})",
            list(task_ids.len())
        ));
        for id in &task_ids {
            select = select.bind(id.clone());
        }
        let task_rows = select.fetch_all(&mut *tx).await?;
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
        // Lock the named runs; only those still running under the given fence change.
        let mut applied = std::collections::HashSet::new();
        for chunk in rows.chunks(chunk_rows(1)) {
            let mut q = query(&format!(
                "SELECT id, fence FROM runs WHERE status = 'running' AND id IN ({}) FOR UPDATE",
                list(chunk.len())
            ));
            for r in chunk {
                q = q.bind(r.id.clone());
            }
            for row in q.fetch_all(&mut *tx).await? {
                let id: String = row.try_get("id")?;
                let fence: i64 = row.try_get("fence")?;
                if chunk.iter().any(|r| r.id == id && r.fence == fence) {
                    applied.insert(id);
                }
            }
        }
        for r in rows.iter().filter(|r| applied.contains(&r.id)) {
            query(
                "UPDATE runs SET status = ?, run_at = COALESCE(?, run_at), finished_at = ?, \
                 lease_owner = NULL, lease_expires_at = NULL, result = ?, error = ?, \
                 output = COALESCE(?, output) WHERE id = ? AND fence = ?",
            )
            .bind(r.status.as_str())
            .bind(r.run_at)
            .bind(r.finished_at)
            .bind(r.result.clone())
            .bind(r.error.clone())
            .bind(r.output.clone())
            .bind(r.id.clone())
            .bind(r.fence)
            .execute(&mut *tx)
            .await?;
            query(
                "UPDATE attempts SET finished_at = ?, outcome = ?, error = ? \
                 WHERE run_id = ? AND fence = ?",
            )
            .bind(r.now)
            .bind(r.status.as_str())
            .bind(r.error.clone())
            .bind(r.id.clone())
            .bind(r.fence)
            .execute(&mut *tx)
            .await?;
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
            "UPDATE runs SET status = 'queued', `trigger` = 'recovery', run_at = ?, \
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
            "UPDATE runs SET run_at = ? WHERE task_id = ? AND status = 'queued' \
             AND scheduled_for <= ? AND run_at > ?",
        )
        .bind(ms(now))
        .bind(task.to_string())
        .bind(ms(now))
        .bind(ms(now))
        .execute(&self.pool)
        .await?;
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
            "SELECT id FROM runs WHERE task_id = ? AND status = 'running' AND id <> ? FOR UPDATE",
        )
        .bind(task.to_string())
        .bind(except.to_string())
        .fetch_all(&mut *tx)
        .await?;
        for id in &ids {
            query(
                "UPDATE runs SET status = 'cancelled', finished_at = ?, error = ?, \
                 lease_owner = NULL, lease_expires_at = NULL WHERE id = ?",
            )
            .bind(ms(now))
            .bind(reason.to_string())
            .bind(id.clone())
            .execute(&mut *tx)
            .await?;
            query(
                "UPDATE attempts SET finished_at = ?, outcome = 'cancelled', error = ? \
                 WHERE run_id = ? AND finished_at IS NULL",
            )
            .bind(ms(now))
            .bind(reason.to_string())
            .bind(id.clone())
            .execute(&mut *tx)
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
        let mut tx = self.pool.begin().await?;
        query("UPDATE nodes SET heartbeat_at = ? WHERE id = ?")
            .bind(ms(now))
            .bind(owner.to_string())
            .execute(&mut *tx)
            .await?;
        let mut held = std::collections::HashSet::new();
        for chunk in runs.chunks(chunk_rows(1)) {
            let mut q = query(&format!(
                "SELECT id, fence FROM runs WHERE lease_owner = ? AND status = 'running' \
                 AND id IN ({}) FOR UPDATE",
                list(chunk.len())
            ))
            .bind(owner.to_string());
            for (id, _) in chunk {
                q = q.bind(id.to_string());
            }
            let mut still = Vec::new();
            for row in q.fetch_all(&mut *tx).await? {
                let id: String = row.try_get("id")?;
                let fence: i64 = row.try_get("fence")?;
                if chunk
                    .iter()
                    .any(|(r, f)| r.to_string() == id && *f == fence)
                {
                    still.push(id);
                }
            }
            if still.is_empty() {
                continue;
            }
            let mut update = query(&format!(
                "UPDATE runs SET lease_expires_at = ? WHERE id IN ({})",
                list(still.len())
            ))
            .bind(ms(until));
            for id in &still {
                update = update.bind(id.clone());
            }
            update.execute(&mut *tx).await?;
            held.extend(still);
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
                "UPDATE runs SET status = 'queued', `trigger` = 'recovery', run_at = ?, error = ?, \
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
        tx.commit().await?;
        Ok(reaped)
    }

    async fn prune(&self, p: super::PruneParams) -> Result<u64, StoreError> {
        self.count();
        let res = query(
            "DELETE r FROM runs r JOIN ( \
               SELECT id FROM ( \
                 SELECT id, created_at, ROW_NUMBER() OVER ( \
                   PARTITION BY task_id ORDER BY scheduled_for DESC) AS newest \
                 FROM runs WHERE status NOT IN ('queued', 'running', 'retrying')) AS ranked \
               WHERE newest > ? OR created_at < ? LIMIT ?) AS d ON d.id = r.id",
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
            "DELETE FROM runs WHERE task_id = ? AND `trigger` = 'schedule' AND scheduled_for > ? \
             AND (status = 'queued' AND attempt = 0 OR status = 'running' AND started_at > ?)",
        )
        .bind(id.to_string())
        .bind(ms(now))
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
             VALUES (?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE host = VALUES(host), \
             version = VALUES(version), started_at = VALUES(started_at), \
             heartbeat_at = VALUES(heartbeat_at), skew_ms = VALUES(skew_ms)",
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
        tx.commit().await?;
        Ok(inserted == 1)
    }

    async fn list_tasks(&self, p: super::ListTasks) -> Result<Vec<Task>, StoreError> {
        self.count();
        let (label_key, label_value) = p.label.map_or((None, None), |(k, v)| (Some(k), Some(v)));
        let state = p.state.map(TaskState::as_str);
        let after = p.after.map(|a| a.to_string());
        let rows = query(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks \
             WHERE (? IS NULL OR state = ?) \
             AND (? IS NULL OR JSON_VALUE(spec, CONCAT('$.labels.\"', ?, '\"')) = ?) \
             AND (? IS NULL OR LEFT(name, CHAR_LENGTH(?)) = ?) \
             AND (? IS NULL OR id > ?) \
             ORDER BY id LIMIT ?"
        ))
        .bind(state)
        .bind(state)
        .bind(label_key.clone())
        .bind(label_key)
        .bind(label_value)
        .bind(p.name_prefix.clone())
        .bind(p.name_prefix.clone())
        .bind(p.name_prefix)
        .bind(after.clone())
        .bind(after)
        .bind(i64::from(p.limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(task_from_row).collect()
    }

    async fn list_runs(&self, p: super::ListRuns) -> Result<Vec<Run>, StoreError> {
        self.count();
        let status = p.status.map(RunStatus::as_str);
        let task = p.task.map(|t| t.to_string());
        let before = p.before.map(|b| b.to_string());
        let rows = query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE (? IS NULL OR status = ?) \
             AND (? IS NULL OR task_id = ?) AND (? IS NULL OR id < ?) ORDER BY id DESC LIMIT ?"
        ))
        .bind(status)
        .bind(status)
        .bind(task.clone())
        .bind(task)
        .bind(before.clone())
        .bind(before)
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

    async fn database_now(&self) -> Result<Option<Timestamp>, StoreError> {
        let ms: i64 = query_scalar("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")
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
