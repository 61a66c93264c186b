//! Storage: one [`Store`] trait with one method per database operation, each
//! taking a params struct, and one backend per file (`sqlite.rs` today;
//! PostgreSQL and MySQL follow with the same migration versions). A single
//! conformance suite (`tests/store_conformance.rs`) runs against every backend.
//!
//! Instants cross this boundary as [`jiff::Timestamp`] and are stored as epoch
//! milliseconds.

mod any;
mod mysql;
mod postgres;
mod rows;
mod sqlite;

use std::future::Future;

use jiff::Timestamp;

use crate::model::{
    Node, Run, RunId, RunStatus, Task, TaskEvent, TaskId, TaskSpec, TaskState, Trigger,
};

pub use any::{AnyStore, UnsupportedUrl};
pub use mysql::MySqlStore;
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database answered with an error or could not be reached.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A task with this name exists already.
    #[error("a task named `{0}` already exists")]
    DuplicateName(String),
    /// No such task.
    #[error("task `{0}` not found")]
    TaskNotFound(String),
    /// The task changed since the version the caller read.
    #[error("task `{id}` is at version {current}, not {expected}")]
    VersionConflict {
        /// The task.
        id: TaskId,
        /// The version the caller expected.
        expected: i64,
        /// The version stored.
        current: i64,
    },
    /// The database URL names no backend this build has.
    #[error(transparent)]
    Unsupported(#[from] UnsupportedUrl),
    /// A stored value could not be read back (a bug or a foreign write).
    #[error("corrupt row in `{table}`: {detail}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What could not be read.
        detail: String,
    },
}

/// Params of [`Store::create_task`].
#[derive(Clone, Debug)]
pub struct NewTask {
    /// The id (callers pick it so `H` fields can hash it before storing).
    pub id: TaskId,
    /// The validated definition.
    pub spec: TaskSpec,
    /// The first nominal fire.
    pub next_fire_at: Option<Timestamp>,
    /// Creation time.
    pub now: Timestamp,
}

/// Params of [`Store::update_task`].
#[derive(Clone, Debug)]
pub struct UpdateTask {
    /// The task.
    pub id: TaskId,
    /// The version the caller read (optimistic locking).
    pub expected_version: i64,
    /// The new definition.
    pub spec: TaskSpec,
    /// The new state.
    pub state: TaskState,
    /// The new next fire.
    pub next_fire_at: Option<Timestamp>,
    /// Change time.
    pub now: Timestamp,
}

/// A run the planner wants recorded.
#[derive(Clone, Debug)]
pub struct NewRun {
    /// Its id.
    pub id: RunId,
    /// The nominal fire (the first of a missed stretch).
    pub scheduled_for: Timestamp,
    /// The last fire of a missed stretch.
    pub last_scheduled_for: Option<Timestamp>,
    /// Fires this row stands for.
    pub fire_count: i64,
    /// `Queued` to execute; `Missed` or `Skipped` to record only.
    pub status: RunStatus,
    /// Why it exists.
    pub trigger: Trigger,
    /// When it may start.
    pub run_at: Timestamp,
    /// Why it will not execute, for missed and skipped rows.
    pub error: Option<String>,
    /// Payload override (manual triggers).
    pub payload: Option<serde_json::Value>,
}

/// What the planner decided for one due task.
#[derive(Clone, Debug)]
pub struct TaskPlan {
    /// Runs to insert; fires already in the ledger are left alone.
    pub runs: Vec<NewRun>,
    /// The task's next nominal fire after this plan.
    pub next_fire_at: Option<Timestamp>,
    /// The task's state after this plan (`Completed` after a `once` fire).
    pub state: TaskState,
}

/// Params of [`Store::plan`].
#[derive(Clone, Copy, Debug)]
pub struct PlanParams {
    /// The current time (rows are stamped with it).
    pub now: Timestamp,
    /// Tasks with `next_fire_at <= horizon` are planned (`now` plus the
    /// planner's look-ahead).
    pub horizon: Timestamp,
    /// At most this many tasks in one transaction.
    pub limit: u32,
}

/// What [`Store::plan`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOutcome {
    /// Due tasks taken.
    pub tasks: usize,
    /// Ledger rows inserted (duplicates of existing fires are not counted).
    pub runs_inserted: usize,
}

/// Params of [`Store::claim_runs`].
#[derive(Clone, Debug)]
pub struct ClaimParams {
    /// The current time.
    pub now: Timestamp,
    /// Runs with `run_at <= ready_by` are claimed (`now` plus the
    /// dispatcher's claim-ahead); each starts at its `run_at`.
    pub ready_by: Timestamp,
    /// The claiming node.
    pub owner: String,
    /// The lease runs until `now + lease`.
    pub lease: std::time::Duration,
    /// At most this many (the free worker slots).
    pub limit: u32,
}

/// A run just claimed, with its task.
#[derive(Clone, Debug)]
pub struct ClaimedRun {
    /// The run, now `Running` under this node's lease with a new fence.
    pub run: Run,
    /// Its task.
    pub task: Task,
}

/// How an attempt ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Success, with the action's result and output.
    Succeeded {
        /// Result JSON.
        result: Option<serde_json::Value>,
        /// Captured output.
        output: Option<String>,
    },
    /// Failure after which no attempt follows.
    Failed {
        /// Why.
        error: String,
        /// Captured output.
        output: Option<String>,
    },
    /// The attempt ran out of time and no attempt follows.
    TimedOut {
        /// Details.
        error: String,
    },
    /// Cancelled by a user or the overlap policy.
    Cancelled {
        /// Why.
        reason: String,
    },
    /// Not executed: the overlap policy skipped this fire.
    Skipped {
        /// Why.
        reason: String,
    },
    /// The attempt failed; another starts at `run_at`.
    Retry {
        /// When the next attempt may start.
        run_at: Timestamp,
        /// Why this attempt failed.
        error: String,
    },
}

/// Params of [`Store::finish_attempt`].
#[derive(Clone, Debug)]
pub struct FinishAttempt {
    /// The run.
    pub id: RunId,
    /// The fence the caller's claim got; a stale fence changes nothing.
    pub fence: i64,
    /// The end time.
    pub now: Timestamp,
    /// How it ended.
    pub outcome: Outcome,
}

/// Params of [`Store::reap_expired`].
#[derive(Clone, Copy, Debug)]
pub struct ReapParams {
    /// Leases that expired before this are dead.
    pub now: Timestamp,
    /// At most this many runs.
    pub limit: u32,
}

/// Params of [`Store::prune`].
#[derive(Clone, Copy, Debug)]
pub struct PruneParams {
    /// Keep at most this many finished runs per task (the newest fires).
    pub keep_runs: u32,
    /// Delete finished runs created before this.
    pub older_than: Timestamp,
    /// At most this many runs per call.
    pub limit: u32,
}

/// Params of [`Store::list_tasks`].
#[derive(Clone, Debug, Default)]
pub struct ListTasks {
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks with this label key and value.
    pub label: Option<(String, String)>,
    /// Only tasks whose name starts with this.
    pub name_prefix: Option<String>,
    /// Cursor: tasks created after this one (ids sort by creation).
    pub after: Option<TaskId>,
    /// At most this many.
    pub limit: u32,
}

/// Params of [`Store::list_runs`].
#[derive(Clone, Debug, Default)]
pub struct ListRuns {
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// Only runs of this task.
    pub task: Option<TaskId>,
    /// Cursor: runs created before this one (newest first).
    pub before: Option<RunId>,
    /// At most this many.
    pub limit: u32,
}

/// One attempt of a run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Attempt {
    /// Its number, from 1.
    pub attempt: i64,
    /// The fence its claim got.
    pub fence: i64,
    /// The node that ran it.
    pub node: String,
    /// Start.
    pub started_at: Timestamp,
    /// End, if it ended.
    pub finished_at: Option<Timestamp>,
    /// The run status it ended with, or `lost` / `released`.
    pub outcome: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
}

/// What another process changed (see [`Store::changes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A task was created, changed or resumed: plan again.
    Tasks,
    /// A run became ready (queued, requeued, retried): claim again.
    Runs,
}

/// The storage seam. Every method is one database operation (one statement
/// or one transaction); backends must pass `tests/store_conformance.rs`.
pub trait Store: Send + Sync + 'static {
    /// Inserts a task (`active`, version 1).
    fn create_task(&self, p: NewTask) -> impl Future<Output = Result<Task, StoreError>> + Send;

    /// A task by id.
    fn get_task(&self, id: TaskId)
    -> impl Future<Output = Result<Option<Task>, StoreError>> + Send;

    /// A task by name: the one that is not cancelled, else the newest cancelled
    /// one (names are unique among tasks that are not cancelled).
    fn get_task_by_name(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Task>, StoreError>> + Send;

    /// Replaces a task's definition, state and next fire if its version is
    /// `expected_version`; bumps the version.
    fn update_task(&self, p: UpdateTask) -> impl Future<Output = Result<Task, StoreError>> + Send;

    /// In one transaction: takes up to `limit` due active tasks (earliest
    /// first), asks `planner` what to do with each, inserts the runs it wants
    /// (a fire already in the ledger is left as it is) and stores each
    /// task's new next fire and state.
    fn plan(
        &self,
        p: PlanParams,
        planner: &(dyn Fn(&Task) -> TaskPlan + Sync),
    ) -> impl Future<Output = Result<PlanOutcome, StoreError>> + Send;

    /// Atomically claims up to `limit` ready runs (`queued`/`retrying`,
    /// `run_at <= ready_by`, earliest first): sets them `running` under
    /// `owner`'s lease with `started_at = max(run_at, now)`, bumps `fence` and
    /// `attempt`, and records the attempt.
    fn claim_runs(
        &self,
        p: ClaimParams,
    ) -> impl Future<Output = Result<Vec<ClaimedRun>, StoreError>> + Send;

    /// Ends the current attempt of a run, only if `fence` is still the run's
    /// fence and it is running. Returns whether anything changed.
    fn finish_attempt(
        &self,
        p: FinishAttempt,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Gives a claimed run back (this node is stopping): `queued` again at
    /// `now` with trigger `recovery`, if `fence` is still current. The attempt
    /// is recorded as `released`.
    fn release_run(
        &self,
        id: RunId,
        fence: i64,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// [`Store::finish_attempt`] for many attempts in one transaction;
    /// answers, in order, whether each changed anything.
    fn finish_attempts(
        &self,
        batch: Vec<FinishAttempt>,
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send;

    /// Hands a claimed run back without using up an attempt (the overlap
    /// policy made it wait): `queued` again at `run_at`, if `fence` is current.
    fn defer_run(
        &self,
        id: RunId,
        fence: i64,
        run_at: Timestamp,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Cancels one run that has not finished (queued, retrying or running):
    /// `cancelled` with `reason`. Returns whether it changed anything; a
    /// running run's executor loses its lease and stops.
    fn cancel_run(
        &self,
        id: RunId,
        now: Timestamp,
        reason: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The earliest lease expiry of a running run (the reaper's wake-up).
    fn next_lease_expiry(
        &self,
    ) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// Makes the runs of `task` that wait for an overlapping run (their fire
    /// is past, their `run_at` ahead) ready now. Returns how many.
    fn wake_waiting(
        &self,
        task: TaskId,
        now: Timestamp,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Ends every running run of `task` except `except` as `cancelled` with
    /// `reason` (the `replace` overlap policy). Returns the runs it cancelled;
    /// their executors lose their leases and stop.
    fn cancel_running(
        &self,
        task: TaskId,
        except: RunId,
        now: Timestamp,
        reason: &str,
    ) -> impl Future<Output = Result<Vec<RunId>, StoreError>> + Send;

    /// Extends `owner`'s leases on these runs to `until` (and records the
    /// node as seen at `now`); returns the runs
    /// whose lease it no longer holds.
    fn extend_leases(
        &self,
        owner: &str,
        runs: &[(RunId, i64)],
        now: Timestamp,
        until: Timestamp,
    ) -> impl Future<Output = Result<Vec<RunId>, StoreError>> + Send;

    /// Runs whose lease expired (their node died) go back to `queued` with
    /// trigger `recovery`, or to `failed` when their attempts are spent.
    /// Returns the runs touched.
    fn reap_expired(
        &self,
        p: ReapParams,
    ) -> impl Future<Output = Result<Vec<RunId>, StoreError>> + Send;

    /// Deletes finished runs (with their attempts) beyond a task's newest
    /// `keep_runs` or created before `older_than`; never a queued, running or
    /// retrying run. Returns how many it deleted.
    fn prune(&self, p: PruneParams) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Pauses an active task: state `paused`, a `paused` event, and the runs
    /// planned (or claimed) ahead for fires after `now` that have not started
    /// are removed: they fall in the pause. Returns the task, or `None` if it
    /// is not active.
    fn pause_task(
        &self,
        id: TaskId,
        now: Timestamp,
    ) -> impl Future<Output = Result<Option<Task>, StoreError>> + Send;

    /// Resumes a paused task at `next_fire_at`, recording a `resumed` event
    /// with `detail` (e.g. the fires skipped). `None` if it is not paused.
    fn resume_task(
        &self,
        id: TaskId,
        now: Timestamp,
        next_fire_at: Option<Timestamp>,
        detail: serde_json::Value,
    ) -> impl Future<Output = Result<Option<Task>, StoreError>> + Send;

    /// A task's events, oldest first.
    fn task_events(
        &self,
        id: TaskId,
    ) -> impl Future<Output = Result<Vec<TaskEvent>, StoreError>> + Send;

    /// Records that `node` started, or refreshes its row.
    fn register_node(&self, node: Node) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The nodes, most recently seen first.
    fn nodes(&self) -> impl Future<Output = Result<Vec<Node>, StoreError>> + Send;

    /// Records one run outside the planner (a manual trigger). Returns false
    /// if the task already has a run for that instant.
    fn insert_run(
        &self,
        task: &Task,
        run: NewRun,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Tasks, oldest first, filtered; see [`ListTasks`].
    fn list_tasks(
        &self,
        p: ListTasks,
    ) -> impl Future<Output = Result<Vec<Task>, StoreError>> + Send;

    /// Runs, newest first, filtered; see [`ListRuns`].
    fn list_runs(&self, p: ListRuns) -> impl Future<Output = Result<Vec<Run>, StoreError>> + Send;

    /// A run's attempts, first to last.
    fn attempts(&self, run: RunId)
    -> impl Future<Output = Result<Vec<Attempt>, StoreError>> + Send;

    /// A run by id.
    fn get_run(&self, id: RunId) -> impl Future<Output = Result<Option<Run>, StoreError>> + Send;

    /// A task's runs, newest fire first.
    fn runs_of_task(
        &self,
        task: TaskId,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<Run>, StoreError>> + Send;

    /// The planner's wake-up: the earliest `next_fire_at` of an active task.
    fn next_fire_at(&self) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// The dispatcher's wake-up: the earliest `run_at` of a ready run.
    fn next_run_at(&self) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// A feed of what other processes change in a shared database, where the
    /// backend has one (PostgreSQL: LISTEN/NOTIFY); `None` otherwise, and
    /// then engines poll. A feed that loses its connection re-establishes it
    /// and reports both kinds of change, since some may have been missed.
    fn changes(
        &self,
    ) -> impl Future<Output = Result<Option<tokio::sync::mpsc::Receiver<Change>>, StoreError>> + Send
    {
        async { Ok(None) }
    }

    /// The database's clock, where it may differ from this node's (a shared
    /// database on another machine); `None` when there is one clock.
    fn database_now(&self) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send {
        async { Ok(None) }
    }

    /// Records this node's heartbeat and its measured clock skew.
    fn heartbeat(
        &self,
        node: &str,
        now: Timestamp,
        skew_ms: i64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// How many runs of a task are running (on any node), except `except`.
    fn running_count(
        &self,
        task: TaskId,
        except: RunId,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send;
}
