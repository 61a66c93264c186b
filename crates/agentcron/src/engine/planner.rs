//! The planner: turns due tasks into ledger rows and moves each task's
//! `next_fire_at` along its schedule, applying the misfire policy.
//!
//! [`plan_task`] is the pure decision (tested on its own); `run` is the
//! loop: sleep until the earliest `next_fire_at` or a wake-up, then plan in
//! one store transaction.

use jiff::{SignedDuration, Timestamp};

use crate::model::{MisfireKind, RunId, RunStatus, Task, TaskState, Trigger};
use crate::schedule::CompiledSchedule;
use crate::store::{NewRun, TaskPlan};

/// At most this many fires are enumerated for one task in one plan; a task
/// further behind than that continues from there in the next plan.
const MAX_FIRES_PER_PLAN: usize = 1_000_000;

/// What to do with a due task at `now`: which fires up to `horizon` run
/// (each at its own time), which are recorded as missed (later than
/// `misfire.grace` behind `now`), and the next fire after `horizon`.
pub fn plan_task(
    task: &Task,
    schedule: &CompiledSchedule,
    now: Timestamp,
    horizon: Timestamp,
) -> TaskPlan {
    let Some(first) = task.next_fire_at else {
        return TaskPlan {
            runs: Vec::new(),
            next_fire_at: None,
            state: task.state,
        };
    };
    // Every nominal fire from `first` up to `horizon`.
    let horizon = horizon.max(now);
    let mut fires = Vec::new();
    let mut next = Some(first);
    while let Some(f) = next {
        if f > horizon || fires.len() >= MAX_FIRES_PER_PLAN {
            break;
        }
        fires.push(f);
        next = schedule.next_after(f);
    }
    let grace = SignedDuration::from_millis(
        i64::try_from(task.spec.misfire.grace.as_millis()).unwrap_or(i64::MAX),
    );
    // Fires before this are late.
    let late_until = now.saturating_sub(grace).unwrap_or(Timestamp::MIN);
    let split = fires.partition_point(|f| *f < late_until);
    let (late, on_time) = fires.split_at(split);

    let queued = |at: Timestamp, trigger| NewRun {
        id: RunId::new(),
        scheduled_for: at,
        last_scheduled_for: None,
        fire_count: 1,
        status: RunStatus::Queued,
        trigger,
        run_at: now.max(at),
        error: None,
        payload: None,
    };
    let mut runs: Vec<NewRun> = Vec::new();
    // Late fires: which of them still run (newest first), by policy.
    let catch_up = match task.spec.misfire.policy {
        MisfireKind::Skip => 0,
        MisfireKind::Once if on_time.is_empty() => 1,
        MisfireKind::Once => 0,
        MisfireKind::All => task.spec.misfire.max_catchup as usize,
    }
    .min(late.len());
    let (missed, caught) = late.split_at(late.len() - catch_up);
    if let (Some(&from), Some(&to)) = (missed.first(), missed.last()) {
        runs.push(NewRun {
            id: RunId::new(),
            scheduled_for: from,
            last_scheduled_for: (missed.len() > 1).then_some(to),
            fire_count: missed.len() as i64,
            status: RunStatus::Missed,
            trigger: Trigger::Schedule,
            run_at: now,
            error: Some(format!(
                "missed: {} fire{} later than the misfire grace of {} (policy `{}`)",
                missed.len(),
                if missed.len() == 1 { " was" } else { "s were" },
                task.spec.misfire.grace,
                match task.spec.misfire.policy {
                    MisfireKind::Skip => "skip",
                    MisfireKind::Once => "once",
                    MisfireKind::All => "all",
                },
            )),
            payload: None,
        });
    }
    runs.extend(caught.iter().map(|&f| queued(f, Trigger::Catchup)));
    runs.extend(on_time.iter().map(|&f| queued(f, Trigger::Schedule)));

    // After `horizon`, or where enumeration stopped for a task very far behind.
    let next_fire_at = next;
    let state = if next_fire_at.is_none() {
        TaskState::Completed
    } else {
        task.state
    };
    TaskPlan {
        runs,
        next_fire_at,
        state,
    }
}

/// The planner loop.
pub(super) async fn run<S: crate::store::Store, C: crate::clock::Clock>(
    ctx: std::sync::Arc<super::Ctx<S, C>>,
) {
    use std::collections::HashMap;
    use std::sync::Mutex;

    // Compiled schedules by task id and version: parse each definition once.
    let cache: Mutex<HashMap<(crate::TaskId, i64), CompiledSchedule>> = Mutex::new(HashMap::new());
    loop {
        let next = match ctx.store.next_fire_at().await {
            Ok(n) => n,
            Err(e) => {
                if !ctx.backoff("reading the next fire time", &e).await {
                    return;
                }
                continue;
            }
        };
        // Plan `plan_ahead` early, so that at the fire time only the start is left.
        let ahead = super::signed(ctx.config.plan_ahead);
        if next.is_none_or(|n| n - ahead > ctx.clock.now()) {
            if !ctx.sleep(next.map(|n| n - ahead), &ctx.plan_wakeup).await {
                return;
            }
            continue;
        }
        let now = ctx.clock.now();
        let horizon = now + ahead;
        let decide = |task: &Task| {
            let key = (task.id, task.version);
            let mut cache = match cache.lock() {
                Ok(c) => c,
                Err(poisoned) => poisoned.into_inner(),
            };
            let parked = || TaskPlan {
                runs: Vec::new(),
                next_fire_at: task.next_fire_at,
                state: TaskState::Paused,
            };
            let schedule = match cache.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    match CompiledSchedule::compile(&task.spec.schedule, &task.id.to_string()) {
                        Ok(s) => v.insert(s),
                        Err(e) => {
                            // Stored definitions were validated; a failure here means the
                            // zone database changed under us. Park the task, do not loop.
                            tracing::error!(task = %task.id, error = %e, "cannot compile the task's schedule; pausing it");
                            return parked();
                        }
                    }
                }
            };
            plan_task(task, schedule, now, horizon)
        };
        match ctx
            .store
            .plan(
                crate::store::PlanParams {
                    now,
                    horizon,
                    limit: ctx.config.plan_batch,
                },
                &decide,
            )
            .await
        {
            Ok(out) if out.runs_inserted > 0 => ctx.dispatch_wakeup.notify_one(),
            Ok(_) => {}
            Err(e) => {
                if !ctx.backoff("planning", &e).await {
                    return;
                }
            }
        }
    }
}
