//! [`AnyStore`]: the backend a database URL names, behind one type, so the
//! daemon and the API need not be generic over the store.

use jiff::Timestamp;

use super::{
    Attempt, ClaimParams, ClaimedRun, FinishAttempt, ListRuns, ListTasks, MySqlStore, NewRun,
    NewTask, PgStore, PlanOutcome, PlanParams, PruneParams, ReapParams, SqliteStore, Store,
    StoreError, TaskPlan, UpdateTask,
};
use crate::model::{Node, Run, RunId, Task, TaskEvent, TaskId};

/// SQLite or PostgreSQL, chosen by the URL's scheme.
#[derive(Clone, Debug)]
pub enum AnyStore {
    /// `sqlite://path.db`: one node.
    Sqlite(SqliteStore),
    /// `postgres://…`: any number of nodes.
    Postgres(PgStore),
    /// `mysql://…` (MySQL or MariaDB): any number of nodes.
    Mysql(MySqlStore),
}

/// Why a URL names no backend.
#[derive(Debug, thiserror::Error)]
#[error(
    "unsupported database URL `{0}`: use sqlite://path.db, postgres://user@host/db or mysql://user@host/db"
)]
pub struct UnsupportedUrl(pub String);

impl AnyStore {
    /// Opens the database `url` names (creating a SQLite file if missing)
    /// and applies migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(AnyStore::Sqlite(SqliteStore::open(url).await?))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(AnyStore::Postgres(PgStore::open(url).await?))
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            let url = url.replacen("mariadb://", "mysql://", 1);
            Ok(AnyStore::Mysql(MySqlStore::open(&url).await?))
        } else {
            Err(StoreError::Unsupported(UnsupportedUrl(url.to_string())))
        }
    }

    /// How long an engine may sleep without looking at the store: `None` for
    /// SQLite (only this process writes), 5 s on PostgreSQL (other nodes'
    /// changes arrive by LISTEN/NOTIFY; this is the fallback), 1 s on MySQL
    /// (polling is the only way to hear of them).
    pub fn max_sleep(&self) -> Option<std::time::Duration> {
        match self {
            AnyStore::Sqlite(_) => None,
            AnyStore::Postgres(_) => Some(std::time::Duration::from_secs(5)),
            AnyStore::Mysql(_) => Some(std::time::Duration::from_secs(1)),
        }
    }

    /// How many runs are in each status (for metrics and benchmarks).
    pub async fn run_status_counts(
        &self,
    ) -> Result<Vec<(crate::model::RunStatus, i64)>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.run_status_counts().await,
            AnyStore::Postgres(s) => s.run_status_counts().await,
            AnyStore::Mysql(s) => s.run_status_counts().await,
        }
    }

    /// How many store operations this store has served.
    pub fn operations(&self) -> u64 {
        match self {
            AnyStore::Sqlite(s) => s.operations(),
            AnyStore::Postgres(s) => s.operations(),
            AnyStore::Mysql(s) => s.operations(),
        }
    }
}

/// MySQL's deadlock (1213) or lock wait timeout (1205).
fn is_lock_conflict(e: &StoreError) -> bool {
    match e {
        StoreError::Database(sqlx::Error::Database(db)) => db
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|m| matches!(m.number(), 1213 | 1205)),
        _ => false,
    }
}

/// Each method sends the call to the backend in use.
macro_rules! delegate {
    ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)*) => {
        impl Store for AnyStore {
            $(
                async fn $name(&self $(, $arg: $ty)*) -> Result<$out, StoreError> {
                    match self {
                        AnyStore::Sqlite(s) => s.$name($($arg),*).await,
                        AnyStore::Postgres(s) => s.$name($($arg),*).await,
                        // InnoDB picks deadlock victims (and times out lock
                        // waits) under contention between nodes; the victim's
                        // transaction was rolled back whole, so run it again.
                        AnyStore::Mysql(s) => {
                            let mut tries = 0u64;
                            loop {
                                match s.$name($(Clone::clone(&$arg)),*).await {
                                    Err(e) if tries < 5 && is_lock_conflict(&e) => {
                                        tries += 1;
                                        tokio::time::sleep(std::time::Duration::from_millis(
                                            20 * tries,
                                        ))
                                        .await;
                                    }
                                    other => break other,
                                }
                            }
                        }
                    }
                }
            )*
        }
    };
}

delegate! {
    fn create_task(&self, p: NewTask) -> Task;
    fn get_task(&self, id: TaskId) -> Option<Task>;
    fn get_task_by_name(&self, name: &str) -> Option<Task>;
    fn update_task(&self, p: UpdateTask) -> Task;
    fn plan(&self, p: PlanParams, planner: &(dyn Fn(&Task) -> TaskPlan + Sync)) -> PlanOutcome;
    fn claim_runs(&self, p: ClaimParams) -> Vec<ClaimedRun>;
    fn finish_attempt(&self, p: FinishAttempt) -> bool;
    fn release_run(&self, id: RunId, fence: i64, now: Timestamp) -> bool;
    fn finish_attempts(&self, batch: Vec<FinishAttempt>) -> Vec<bool>;
    fn defer_run(&self, id: RunId, fence: i64, run_at: Timestamp) -> bool;
    fn cancel_run(&self, id: RunId, now: Timestamp, reason: &str) -> bool;
    fn next_lease_expiry(&self) -> Option<Timestamp>;
    fn wake_waiting(&self, task: TaskId, now: Timestamp) -> u64;
    fn cancel_running(&self, task: TaskId, except: RunId, now: Timestamp, reason: &str) -> Vec<RunId>;
    fn extend_leases(&self, owner: &str, runs: &[(RunId, i64)], now: Timestamp, until: Timestamp) -> Vec<RunId>;
    fn reap_expired(&self, p: ReapParams) -> Vec<RunId>;
    fn prune(&self, p: PruneParams) -> u64;
    fn pause_task(&self, id: TaskId, now: Timestamp) -> Option<Task>;
    fn resume_task(&self, id: TaskId, now: Timestamp, next_fire_at: Option<Timestamp>, detail: serde_json::Value) -> Option<Task>;
    fn task_events(&self, id: TaskId) -> Vec<TaskEvent>;
    fn register_node(&self, node: Node) -> ();
    fn nodes(&self) -> Vec<Node>;
    fn insert_run(&self, task: &Task, run: NewRun, now: Timestamp) -> bool;
    fn list_tasks(&self, p: ListTasks) -> Vec<Task>;
    fn list_runs(&self, p: ListRuns) -> Vec<Run>;
    fn attempts(&self, run: RunId) -> Vec<Attempt>;
    fn get_run(&self, id: RunId) -> Option<Run>;
    fn runs_of_task(&self, task: TaskId, limit: u32) -> Vec<Run>;
    fn next_fire_at(&self) -> Option<Timestamp>;
    fn next_run_at(&self) -> Option<Timestamp>;
    fn running_count(&self, task: TaskId, except: RunId) -> i64;
    fn database_now(&self) -> Option<Timestamp>;
    fn changes(&self) -> Option<tokio::sync::mpsc::Receiver<super::Change>>;
    fn heartbeat(&self, node: &str, now: Timestamp, skew_ms: i64) -> ();
}
