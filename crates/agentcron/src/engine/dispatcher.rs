//! The dispatcher: claims ready runs up to the free worker slots, applies the
//! overlap policy, executes each attempt under its timeout, and records the
//! outcome. A failed attempt with attempts left becomes `retrying` with
//! `run_at` delayed by backoff; the task's schedule is never moved.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{Ctx, Executing};
use crate::action::{ActionError, Attempt};
use crate::clock::Clock;
use crate::model::{Backoff, OverlapPolicy, RunId, Trigger};
use crate::store::{ClaimParams, ClaimedRun, FinishAttempt, Outcome, Store};

pub(super) async fn run<S: Store, C: Clock>(ctx: Arc<Ctx<S, C>>) {
    loop {
        if ctx.draining.is_cancelled() {
            // Stopping: claim nothing more; just wait for shutdown.
            ctx.shutdown.cancelled().await;
            return;
        }
        let free = ctx
            .config
            .workers
            .saturating_sub(ctx.executing.lock().map_or(0, |m| m.len()));
        let mut next = None;
        if free > 0 {
            let now = ctx.clock.now();
            let params = ClaimParams {
                // The lease starts in database time.
                now: ctx.db_now(),
                ready_by: now + super::signed(ctx.config.claim_ahead),
                owner: ctx.config.node.clone(),
                lease: ctx.config.lease,
                limit: u32::try_from(free).unwrap_or(u32::MAX),
            };
            match ctx.store.claim_runs(params).await {
                Ok(claimed) => {
                    let full = claimed.len() == free;
                    for c in claimed {
                        start_attempt(&ctx, c);
                    }
                    if full {
                        continue; // more may be ready; slots free up as attempts end
                    }
                }
                Err(e) => {
                    if !ctx.backoff("claiming runs", &e).await {
                        return;
                    }
                    continue;
                }
            }
            next = match ctx.store.next_run_at().await {
                Ok(n) => n,
                Err(e) => {
                    if !ctx.backoff("reading the next run time", &e).await {
                        return;
                    }
                    continue;
                }
            };
        }
        let ahead = super::signed(ctx.config.claim_ahead);
        if !ctx
            .sleep(next.map(|n| n - ahead), &ctx.dispatch_wakeup)
            .await
        {
            return;
        }
    }
}

fn start_attempt<S: Store, C: Clock>(ctx: &Arc<Ctx<S, C>>, claimed: ClaimedRun) {
    let cancel = ctx.shutdown.child_token();
    let (id, fence) = (claimed.run.id, claimed.run.fence);
    if let Ok(mut executing) = ctx.executing.lock() {
        let stale = executing.insert(
            id,
            Executing {
                fence,
                cancel: cancel.clone(),
                task: claimed.task.id,
                starts_at: claimed.run.started_at.unwrap_or(claimed.run.run_at),
            },
        );
        // This node reclaimed a run it was still executing under an older
        // fence (it stalled past its lease): that attempt is void now.
        if let Some(stale) = stale {
            stale.cancel.cancel();
        }
    }
    let ctx2 = ctx.clone();
    let (task, overlap) = (claimed.task.id, claimed.task.spec.overlap);
    ctx.tracker.spawn(async move {
        // The attempt runs as a task of its own, so that a panic in it (a
        // bug, or a library user's handler) is caught here: the run is
        // recorded as failed and its slot freed, instead of the engine
        // waiting for it forever.
        let inner = {
            let ctx3 = ctx2.clone();
            tokio::spawn(async move { attempt(&ctx3, claimed, cancel).await })
        };
        if let Err(e) = inner.await {
            let why = if e.is_panic() {
                let payload = e.into_panic();
                payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into())
            } else {
                "the attempt's task was cancelled".into()
            };
            tracing::error!(run = %id, error = %why, "the attempt panicked; recording the run as failed");
            record(
                &ctx2,
                FinishAttempt {
                    id,
                    fence,
                    now: ctx2.clock.now(),
                    outcome: Outcome::Failed {
                        error: format!("internal error: the attempt panicked: {why}"),
                        output: None,
                    },
                },
            )
            .await;
        }
        // Runs of this task waiting for it may start now.
        if matches!(overlap, OverlapPolicy::Queue | OverlapPolicy::Forbid) {
            match ctx2.store.wake_waiting(task, ctx2.clock.now()).await {
                Ok(0) => {}
                Ok(_) => ctx2.dispatch_wakeup.notify_one(),
                Err(e) => {
                    tracing::warn!(error = %e, "waking waiting runs failed; they retry in 1s")
                }
            }
        }
        if let Ok(mut executing) = ctx2.executing.lock()
            && executing.get(&id).is_some_and(|e| e.fence == fence)
        {
            executing.remove(&id);
        }
        ctx2.attempt_done.notify_waiters();
        ctx2.dispatch_wakeup.notify_one();
    });
}

/// One attempt, start to recorded outcome.
async fn attempt<S: Store, C: Clock>(
    ctx: &Ctx<S, C>,
    claimed: ClaimedRun,
    cancel: tokio_util::sync::CancellationToken,
) {
    let ClaimedRun { run, task } = claimed;
    // Claimed ahead of time: start at `run_at`, not before.
    let start = run.started_at.unwrap_or(run.run_at);
    if start > ctx.clock.now() {
        tokio::select! {
            _ = cancel.cancelled() => {
                if let Err(e) = ctx.store.release_run(run.id, run.fence, ctx.clock.now()).await {
                    tracing::warn!(error = %e, run = %run.id, "could not release the run; its lease will expire");
                }
                return;
            }
            _ = ctx.clock.sleep_until(start) => {}
        }
    }
    let finish = |outcome| FinishAttempt {
        id: run.id,
        fence: run.fence,
        now: ctx.clock.now(),
        outcome,
    };
    // Overlap: another run of this task is executing somewhere.
    if task.spec.overlap != OverlapPolicy::Allow {
        match overlap(ctx, &task, &run).await {
            Ok(Proceed::Yes) => {}
            Ok(Proceed::No) => return,
            Err(e) => {
                tracing::warn!(error = %e, run = %run.id, "overlap check failed; running anyway")
            }
        }
    }
    let info = Attempt {
        run_id: run.id,
        task_id: task.id,
        task_name: task.spec.name.clone(),
        labels: task.spec.labels.clone(),
        scheduled_for: run.scheduled_for,
        trigger: run.trigger,
        attempt: run.attempt,
        fence: run.fence,
        payload: run.payload.clone(),
    };
    let work = ctx
        .actions
        .perform(&task.spec.action, &task.spec.retry, &info, cancel.clone());
    let deadline = task
        .spec
        .timeout
        // Past the end of time means no deadline.
        .and_then(|t| {
            let from = run.started_at.unwrap_or_else(|| ctx.clock.now());
            from.checked_add(millis(t.as_millis())).ok()
        });
    let result = tokio::select! {
        // Interruptions first: a handler that returns because it was
        // cancelled must not be recorded as a failure of its own.
        biased;
        _ = cancel.cancelled() => Err(Interrupted::Cancelled),
        _ = sleep_opt(ctx, deadline) => Err(Interrupted::TimedOut),
        r = work => match r {
            Err(_) if cancel.is_cancelled() => Err(Interrupted::Cancelled),
            r => Ok(r),
        },
    };
    let outcome = match result {
        Ok(Ok(done)) => Outcome::Succeeded {
            result: done.result,
            output: done.output,
        },
        Ok(Err(err)) => failure(
            ctx,
            &run.id,
            run.attempt,
            run.max_attempts,
            &task.spec.retry.backoff,
            err,
        ),
        Err(Interrupted::TimedOut) => {
            let error = format!("timed out after {}", task.spec.timeout.unwrap_or_default());
            if run.attempt < run.max_attempts {
                let run_at = later(
                    ctx.clock.now(),
                    backoff_delay(&task.spec.retry.backoff, run.id, run.attempt, None),
                );
                Outcome::Retry { run_at, error }
            } else {
                Outcome::TimedOut { error }
            }
        }
        Err(Interrupted::Cancelled) => {
            // Shutdown or a lost lease: give the run back if it is still ours.
            if let Err(e) = ctx
                .store
                .release_run(run.id, run.fence, ctx.clock.now())
                .await
            {
                tracing::warn!(error = %e, run = %run.id, "could not release the run; its lease will expire");
            }
            return;
        }
    };
    record(ctx, finish(outcome)).await;
}

enum Proceed {
    Yes,
    No,
}

/// How long a run made to wait by the overlap policy waits before it looks again.
const OVERLAP_RECHECK: Duration = Duration::from_secs(1);

/// Applies the task's overlap policy to a claimed run while another run of
/// the same task is executing (on any node):
/// - `forbid`: a scheduled fire is recorded as skipped; catch-up runs
///   (which a plan creates together) wait their turn instead;
/// - `queue`: the run waits and starts when the previous one has ended;
/// - `replace`: the running ones are cancelled and this one starts.
async fn overlap<S: Store, C: Clock>(
    ctx: &Ctx<S, C>,
    task: &crate::model::Task,
    run: &crate::model::Run,
) -> Result<Proceed, crate::store::StoreError> {
    if ctx.store.running_count(task.id, run.id).await? == 0 {
        return Ok(Proceed::Yes);
    }
    let now = ctx.clock.now();
    match task.spec.overlap {
        OverlapPolicy::Allow => Ok(Proceed::Yes),
        OverlapPolicy::Forbid if run.trigger != Trigger::Catchup => {
            let reason =
                "skipped: the previous run of this task is still running (overlap: forbid)";
            record(
                ctx,
                FinishAttempt {
                    id: run.id,
                    fence: run.fence,
                    now,
                    outcome: Outcome::Skipped {
                        reason: reason.into(),
                    },
                },
            )
            .await;
            Ok(Proceed::No)
        }
        OverlapPolicy::Forbid | OverlapPolicy::Queue => {
            let again = now + super::signed(OVERLAP_RECHECK);
            ctx.store.defer_run(run.id, run.fence, again).await?;
            ctx.dispatch_wakeup.notify_one();
            Ok(Proceed::No)
        }
        OverlapPolicy::Replace => {
            let reason = format!(
                "cancelled: replaced by the fire of {} (overlap: replace)",
                run.scheduled_for
            );
            let cancelled = ctx
                .store
                .cancel_running(task.id, run.id, now, &reason)
                .await?;
            if let Ok(executing) = ctx.executing.lock() {
                for id in cancelled {
                    if let Some(e) = executing.get(&id) {
                        e.cancel.cancel();
                    }
                }
            }
            Ok(Proceed::Yes)
        }
    }
}

enum Interrupted {
    Cancelled,
    TimedOut,
}

async fn sleep_opt<S: Store, C: Clock>(ctx: &Ctx<S, C>, at: Option<Timestamp>) {
    match at {
        Some(at) => ctx.clock.sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `at + d`, saturating at the end of time (durations come from users and
/// from `Retry-After` headers).
fn later(at: Timestamp, d: SignedDuration) -> Timestamp {
    at.saturating_add(d).unwrap_or(Timestamp::MAX)
}

fn millis(ms: u64) -> SignedDuration {
    SignedDuration::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// The outcome of a failed attempt: retry after backoff while attempts remain.
fn failure<S: Store, C: Clock>(
    ctx: &Ctx<S, C>,
    run: &RunId,
    attempt: i64,
    max_attempts: i64,
    backoff: &Backoff,
    err: ActionError,
) -> Outcome {
    match err {
        ActionError::Retryable {
            message,
            retry_after,
        } if attempt < max_attempts => Outcome::Retry {
            run_at: later(
                ctx.clock.now(),
                backoff_delay(backoff, *run, attempt, retry_after),
            ),
            error: message,
        },
        other => Outcome::Failed {
            error: other.to_string(),
            output: None,
        },
    }
}

/// The delay after failed attempt `attempt` (from 1): `initial × multiplier^(attempt-1)`,
/// capped at `max`, spread by ±`jitter` (derived from the run id, so the same
/// run always waits the same), and never shorter than the callee asked.
pub(crate) fn backoff_delay(
    b: &Backoff,
    run: RunId,
    attempt: i64,
    retry_after: Option<Duration>,
) -> SignedDuration {
    let exp = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
    let base = (b.initial.as_millis() as f64) * b.multiplier.powi(exp);
    let capped = base.min(b.max.as_millis() as f64);
    // A stable value in [-1, 1) from the run id and attempt.
    let h = run.0.as_u128() as u64 ^ (attempt as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let unit = (h >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    let jittered = (capped * (1.0 + b.jitter * unit)).max(0.0);
    let asked = retry_after.map_or(0.0, |d| d.as_millis() as f64);
    millis(jittered.max(asked) as u64)
}

/// Hands the outcome to the completer and waits until it is recorded (or
/// discarded as stale), so that a worker slot frees only after the ledger
/// says so.
async fn record<S: Store, C: Clock>(ctx: &Ctx<S, C>, finish: FinishAttempt) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    if ctx.completions.send((finish, tx)).is_ok() {
        let _ = rx.await;
    }
}
