//! The engine: every node runs the same loops, one module each.
//!
//! - [`planner`]: sleeps until the earliest `next_fire_at` (or a wake-up),
//!   records due fires in the ledger and applies the misfire policy.
//! - `dispatcher`: claims ready runs up to its free worker slots, applies the
//!   overlap policy, executes each attempt under its timeout, and records the
//!   outcome (retries are new attempts of the same run, delayed by backoff).
//! - `lease_keeper`: renews the leases of runs executing here; a run whose
//!   lease is lost is cancelled locally.
//! - `reaper`: requeues runs whose lease expired (their node died) as a
//!   `recovery` attempt, or fails them when attempts are spent.
//! - `pruner`: keeps history bounded (per-task count and age).
//! - `completer`: records attempt outcomes in batches.
//!
//! No loop polls: each sleeps until its next known deadline or until woken
//! by a change made through this engine, so an idle node makes no database
//! queries. `max_sleep` bounds the sleeps where another process can change
//! the database too (shared backends); it is unset by default.

mod completer;
mod dispatcher;
mod lease_keeper;
pub mod planner;
mod pruner;
mod reaper;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::action::{ActionError, Actions, Handlers};
use crate::clock::Clock;
use crate::model::RunId;
use crate::store::Store;

/// How a node runs its loops.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// This node's name in leases and attempts.
    pub node: String,
    /// Runs executing at once on this node.
    pub workers: usize,
    /// How long a claim holds without renewal.
    pub lease: Duration,
    /// The longest any loop sleeps without looking at the store; `None`
    /// (the default) when only this engine changes the database.
    pub max_sleep: Option<Duration>,
    /// Due tasks planned per transaction.
    pub plan_batch: u32,
    /// Whether this node runs `exec` actions (off by default).
    pub exec_enabled: bool,
    /// Largest action result (http body, exec stdout and stderr) kept, in bytes.
    pub max_result_bytes: usize,
    /// How early the planner records upcoming fires.
    pub plan_ahead: Duration,
    /// How early the dispatcher claims a run; the attempt then waits for
    /// its `run_at`, so that it starts on time rather than a database round
    /// trip late.
    pub claim_ahead: Duration,
    /// Finished runs kept per task (the newest).
    pub keep_runs: u32,
    /// Finished runs older than this are deleted.
    pub keep_for: Duration,
    /// How often the pruner runs.
    pub prune_every: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            node: format!("node-{}", uuid::Uuid::now_v7().simple()),
            workers: 64,
            lease: Duration::from_secs(30),
            max_sleep: None,
            plan_batch: 500,
            exec_enabled: false,
            max_result_bytes: 64 * 1024,
            plan_ahead: Duration::from_secs(1),
            claim_ahead: Duration::from_millis(500),
            keep_runs: 1000,
            keep_for: Duration::from_secs(30 * 86_400),
            prune_every: Duration::from_secs(600),
        }
    }
}

/// A std duration as a signed one, saturating.
fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// An attempt executing (or about to start) on this node.
struct Executing {
    fence: i64,
    cancel: CancellationToken,
    task: crate::TaskId,
    /// When the action starts (claims are made ahead of time).
    starts_at: Timestamp,
}

/// What the loops share.
struct Ctx<S, C> {
    store: S,
    clock: C,
    /// This node's clock minus the database's, in milliseconds, as last
    /// measured (0 where they are one clock). Leases are written and judged
    /// in database time: [`Ctx::db_now`].
    skew_ms: std::sync::atomic::AtomicI64,
    config: EngineConfig,
    actions: Actions,
    /// Stops every loop; attempts get child tokens.
    shutdown: CancellationToken,
    /// Set when the node stops claiming (graceful stop).
    draining: CancellationToken,
    plan_wakeup: Notify,
    /// Wakes the reaper ([`Engine::wake`]).
    reap_wakeup: Notify,
    /// Wakes the pruner (outcomes were recorded, so history grew).
    prune_wakeup: Notify,
    dispatch_wakeup: Notify,
    executing: Mutex<HashMap<RunId, Executing>>,
    /// Notified (all waiters) whenever an attempt on this node ends.
    attempt_done: Notify,
    /// Stops the completer (after the last attempt has handed over).
    completer_stop: CancellationToken,
    /// Outcomes to record, batched by the completer.
    completions: tokio::sync::mpsc::UnboundedSender<completer::Pending>,
    tracker: TaskTracker,
}

impl<S: Store, C: Clock> Ctx<S, C> {
    /// `now + d`, saturating.
    fn after(&self, d: Duration) -> Timestamp {
        let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        self.clock.now().saturating_add(d).unwrap_or(Timestamp::MAX)
    }

    /// Now by the database's clock (this node's clock less the measured
    /// skew): the time leases are written and judged in, so that nodes with
    /// clocks apart still agree when a lease has run out.
    fn db_now(&self) -> Timestamp {
        let skew = self.skew_ms.load(std::sync::atomic::Ordering::Relaxed);
        self.clock
            .now()
            .saturating_sub(SignedDuration::from_millis(skew))
            .unwrap_or(Timestamp::MIN)
    }

    /// Measures this node's clock against the database's and records it with
    /// a heartbeat; warns when they are more than a second apart. Nothing to
    /// do (and no query) where there is one clock.
    async fn check_clock(&self) {
        let before = self.clock.now();
        let db = match self.store.database_now().await {
            Ok(Some(db)) => db,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "reading the database clock failed; will retry");
                return;
            }
        };
        let after = self.clock.now();
        // The database read its clock somewhere between `before` and `after`.
        let mid = before
            .checked_add(after.duration_since(before) / 2)
            .unwrap_or(after);
        let skew = mid.duration_since(db).as_millis();
        let skew = i64::try_from(skew).unwrap_or(i64::MAX);
        let old = self
            .skew_ms
            .swap(skew, std::sync::atomic::Ordering::Relaxed);
        if skew.abs() > 1000 && (old.abs() <= 1000 || old == 0) {
            tracing::warn!(
                skew_ms = skew,
                "this node's clock is more than 1 s off the database's; fix its time sync \
                 (leases are judged by the database's clock, but fire times by this node's)"
            );
        } else if skew.abs() <= 1000 && old.abs() > 1000 {
            tracing::info!(
                skew_ms = skew,
                "this node's clock is back within 1 s of the database's"
            );
        }
        if let Err(e) = self.store.heartbeat(&self.config.node, after, skew).await {
            tracing::warn!(error = %e, "recording the heartbeat failed; will retry");
        }
    }

    /// Sleeps until `at` (bounded by `max_sleep`), a wake-up, or shutdown.
    /// Returns false on shutdown.
    async fn sleep(&self, at: Option<Timestamp>, wakeup: &Notify) -> bool {
        let bound = self.config.max_sleep.map(|d| self.after(d));
        let at = match (at, bound) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let until = async {
            match at {
                Some(at) => self.clock.sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            _ = until => true,
            _ = wakeup.notified() => true,
        }
    }

    /// Waits until no attempt executes on this node, or until `deadline`.
    async fn wait_idle(&self, deadline: Option<Timestamp>) {
        loop {
            // Register for the next "attempt ended" before looking, so none is missed.
            let ended = self.attempt_done.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.executing.lock().map_or(0, |m| m.len()) == 0 {
                return;
            }
            match deadline {
                Some(at) => tokio::select! {
                    _ = self.clock.sleep_until(at) => return,
                    _ = ended => {}
                },
                None => ended.await,
            }
        }
    }

    /// Logs a store error and waits a moment before the loop retries.
    async fn backoff(&self, what: &str, err: &crate::store::StoreError) -> bool {
        tracing::warn!(error = %err, "{what} failed; retrying in 1s");
        let at = self.after(Duration::from_secs(1));
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            _ = self.clock.sleep_until(at) => true,
        }
    }
}

/// This machine's host name, if it has one.
pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// Wakes the planner and the dispatcher when another node changes tasks or
/// queues runs, where the store reports such changes (PostgreSQL
/// LISTEN/NOTIFY); elsewhere the loops' `max_sleep` is the bound.
async fn watch<S: Store, C: Clock>(ctx: Arc<Ctx<S, C>>) {
    let mut feed = match ctx.store.changes().await {
        Ok(Some(feed)) => feed,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for other nodes' changes; polling instead");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            change = feed.recv() => match change {
                Some(crate::store::Change::Tasks) => ctx.plan_wakeup.notify_one(),
                Some(crate::store::Change::Runs) => ctx.dispatch_wakeup.notify_one(),
                None => return,
            },
        }
    }
}

/// Records this node in the store at start.
async fn register<S: Store, C: Clock>(ctx: Arc<Ctx<S, C>>) {
    let now = ctx.clock.now();
    let node = crate::model::Node {
        id: ctx.config.node.clone(),
        host: host_name().unwrap_or_else(|| "unknown".into()),
        version: env!("CARGO_PKG_VERSION").into(),
        started_at: now,
        heartbeat_at: now,
        skew_ms: 0,
    };
    if let Err(e) = ctx.store.register_node(node).await {
        tracing::warn!(error = %e, "could not record this node");
    }
    ctx.check_clock().await;
}

/// A running engine: its loops run on the tokio runtime until
/// [`Engine::shutdown`].
pub struct Engine<S, C> {
    ctx: Arc<Ctx<S, C>>,
}

impl<S: Store, C: Clock> Engine<S, C> {
    /// Starts the planner, dispatcher, lease keeper and reaper. Fails only if
    /// the HTTP client cannot be built (no TLS roots, say).
    pub fn start(
        store: S,
        clock: C,
        config: EngineConfig,
        handlers: Handlers,
    ) -> Result<Self, ActionError> {
        let (completions, completed) = tokio::sync::mpsc::unbounded_channel();
        let ctx = Arc::new(Ctx {
            store,
            clock,
            skew_ms: std::sync::atomic::AtomicI64::new(0),
            actions: Actions::new(handlers, config.exec_enabled, config.max_result_bytes)?,
            config,
            shutdown: CancellationToken::new(),
            draining: CancellationToken::new(),
            plan_wakeup: Notify::new(),
            reap_wakeup: Notify::new(),
            prune_wakeup: Notify::new(),
            dispatch_wakeup: Notify::new(),
            executing: Mutex::new(HashMap::new()),
            attempt_done: Notify::new(),
            completer_stop: CancellationToken::new(),
            completions,
            tracker: TaskTracker::new(),
        });
        ctx.tracker.spawn(register(ctx.clone()));
        ctx.tracker.spawn(watch(ctx.clone()));
        ctx.tracker.spawn(planner::run(ctx.clone()));
        ctx.tracker.spawn(dispatcher::run(ctx.clone()));
        ctx.tracker.spawn(lease_keeper::run(ctx.clone()));
        ctx.tracker.spawn(reaper::run(ctx.clone()));
        ctx.tracker.spawn(pruner::run(ctx.clone()));
        ctx.tracker.spawn(completer::run(ctx.clone(), completed));
        Ok(Engine { ctx })
    }

    /// The store the engine works on.
    pub fn store(&self) -> &S {
        &self.ctx.store
    }

    /// Tells the planner and dispatcher to look again now (after a task was
    /// created or changed, or a run was triggered).
    pub fn wake(&self) {
        self.ctx.plan_wakeup.notify_one();
        self.ctx.dispatch_wakeup.notify_one();
        self.ctx.reap_wakeup.notify_one();
    }

    /// Cancels a run that has not finished. A run executing on this node is
    /// stopped at once; one executing elsewhere stops when its node next
    /// renews its lease. Returns whether the run was still cancellable.
    pub async fn cancel_run(
        &self,
        run: RunId,
        reason: &str,
    ) -> Result<bool, crate::store::StoreError> {
        let cancelled = self
            .ctx
            .store
            .cancel_run(run, self.ctx.clock.now(), reason)
            .await?;
        if cancelled
            && let Ok(executing) = self.ctx.executing.lock()
            && let Some(e) = executing.get(&run)
        {
            e.cancel.cancel();
        }
        Ok(cancelled)
    }

    /// Pauses a task: it stops firing, and the pause is recorded as an event.
    /// Returns false if the task was not active.
    pub async fn pause(&self, task: crate::TaskId) -> Result<bool, crate::store::StoreError> {
        let now = self.ctx.clock.now();
        let paused = self.ctx.store.pause_task(task, now).await?;
        // Attempts claimed ahead for fires in the pause must not start.
        if paused.is_some()
            && let Ok(executing) = self.ctx.executing.lock()
        {
            for e in executing
                .values()
                .filter(|e| e.task == task && e.starts_at > now)
            {
                e.cancel.cancel();
            }
        }
        self.wake();
        Ok(paused.is_some())
    }

    /// Resumes a paused task from now on: fires that fell in the pause are
    /// not run, but counted in the `resumed` event. Returns false if the task
    /// was not paused (or does not exist).
    pub async fn resume(&self, task: crate::TaskId) -> Result<bool, crate::store::StoreError> {
        let Some(t) = self.ctx.store.get_task(task).await? else {
            return Ok(false);
        };
        let now = self.ctx.clock.now();
        let Ok(schedule) = crate::CompiledSchedule::compile(&t.spec.schedule, &t.id.to_string())
        else {
            return Ok(false);
        };
        let paused_at = self
            .ctx
            .store
            .task_events(task)
            .await?
            .into_iter()
            .rev()
            .find(|e| e.kind == "paused")
            .map(|e| e.at);
        let mut skipped = 0u64;
        if let Some(from) = paused_at {
            let mut next = schedule.next_after(from);
            while let Some(f) = next.filter(|f| *f <= now && skipped < 1_000_000) {
                skipped += 1;
                next = schedule.next_after(f);
            }
        }
        let detail = serde_json::json!({
            "paused_at": paused_at.map(|p| p.to_string()),
            "fires_skipped": skipped,
        });
        let resumed = self
            .ctx
            .store
            .resume_task(task, now, schedule.next_after(now), detail)
            .await?;
        self.wake();
        Ok(resumed.is_some())
    }

    /// Runs a task now (a manual trigger), with an optional payload that
    /// overrides the action's. Returns the new run's id, or `None` if the
    /// task does not exist.
    pub async fn trigger(
        &self,
        task: crate::TaskId,
        payload: Option<serde_json::Value>,
    ) -> Result<Option<RunId>, crate::store::StoreError> {
        let Some(t) = self.ctx.store.get_task(task).await? else {
            return Ok(None);
        };
        // Distinct instants keep two triggers in the same millisecond apart.
        let mut at = self.ctx.clock.now();
        loop {
            let id = RunId::new();
            let run = crate::store::NewRun {
                id,
                scheduled_for: at,
                last_scheduled_for: None,
                fire_count: 1,
                status: crate::RunStatus::Queued,
                trigger: crate::Trigger::Manual,
                run_at: at,
                error: None,
                payload: payload.clone(),
            };
            if self.ctx.store.insert_run(&t, run, at).await? {
                self.ctx.dispatch_wakeup.notify_one();
                return Ok(Some(id));
            }
            at += SignedDuration::from_millis(1);
        }
    }

    /// How many attempts are executing on this node.
    pub fn executing(&self) -> usize {
        self.ctx.executing.lock().map_or(0, |m| m.len())
    }

    /// Stops claiming, lets executing attempts finish for up to `grace`
    /// (as measured by the engine's clock), cancels the rest, and stops every
    /// loop. A cancelled attempt's lease expires and another node (or the
    /// next start) recovers the run.
    pub async fn shutdown(self, grace: Duration) {
        let ctx = self.ctx;
        ctx.draining.cancel();
        ctx.wait_idle(Some(ctx.after(grace))).await;
        // Cancel what is left: each attempt releases its run for another node.
        ctx.shutdown.cancel();
        ctx.wait_idle(None).await;
        // Every outcome has been handed over; let the completer write them and end.
        ctx.completer_stop.cancel();
        ctx.tracker.close();
        ctx.tracker.wait().await;
    }
}
