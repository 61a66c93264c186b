//! The store conformance suite: every backend must pass these, unchanged
//! (as River's `riverdrivertest`). Each test is generic over the [`Store`];
//! the `backend!` macro at the bottom instantiates the suite per backend —
//! SQLite on a real file today; PostgreSQL and MySQL join with their issue.

// The suite functions are called from `#[tokio::test]`s; a panic is their failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

mod support;

use agentcron::store::{
    ClaimParams, FinishAttempt, NewRun, NewTask, Outcome, PlanParams, ReapParams, Store,
    StoreError, TaskPlan, UpdateTask,
};
use agentcron::{RunId, RunStatus, Task, TaskId, TaskSpec, TaskState, Trigger};
use jiff::{Timestamp, ToSpan};

fn t0() -> Timestamp {
    "2026-11-30T09:00:00Z".parse().expect("ts")
}

fn spec(name: &str, max_attempts: u32) -> TaskSpec {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "schedule": {"cron": "*/5 * * * *"},
        "action": {"type": "handler", "name": "noop"},
        "retry": {"max_attempts": max_attempts},
    }))
    .expect("valid spec")
}

async fn new_task<S: Store>(s: &S, name: &str, max_attempts: u32, next: Timestamp) -> Task {
    s.create_task(NewTask {
        id: TaskId::new(),
        spec: spec(name, max_attempts),
        next_fire_at: Some(next),
        now: t0(),
    })
    .await
    .expect("created")
}

/// A plan that queues the due fire and moves to the next one 5 minutes on.
fn queue_due(task: &Task) -> TaskPlan {
    let due = task.next_fire_at.expect("due task has a fire");
    TaskPlan {
        runs: vec![NewRun {
            id: RunId::new(),
            scheduled_for: due,
            last_scheduled_for: None,
            fire_count: 1,
            status: RunStatus::Queued,
            trigger: Trigger::Schedule,
            run_at: due,
            error: None,
            payload: None,
        }],
        next_fire_at: Some(due + 5.minutes()),
        state: TaskState::Active,
    }
}

fn claim(now: Timestamp, owner: &str, limit: u32) -> ClaimParams {
    ClaimParams {
        now,
        ready_by: now,
        owner: owner.into(),
        lease: Duration::from_secs(30),
        limit,
    }
}

async fn tasks_create_get_and_reject_duplicate_names<S: Store>(s: S) {
    let task = new_task(&s, "report", 1, t0()).await;
    // What create returns is what a read returns, even for sub-millisecond instants.
    let precise = t0() + jiff::SignedDuration::from_nanos(123_456_789);
    let fine = s
        .create_task(NewTask {
            id: TaskId::new(),
            spec: spec("fine", 1),
            next_fire_at: Some(precise),
            now: precise,
        })
        .await
        .unwrap();
    assert_eq!(s.get_task(fine.id).await.unwrap(), Some(fine.clone()));
    assert_eq!(task.version, 1);
    assert_eq!(task.state, TaskState::Active);
    assert_eq!(s.get_task(task.id).await.unwrap(), Some(task.clone()));
    assert_eq!(
        s.get_task_by_name("report").await.unwrap(),
        Some(task.clone())
    );
    assert_eq!(s.get_task(TaskId::new()).await.unwrap(), None);
    let dup = s
        .create_task(NewTask {
            id: TaskId::new(),
            spec: spec("report", 1),
            next_fire_at: None,
            now: t0(),
        })
        .await;
    assert!(matches!(dup, Err(StoreError::DuplicateName(n)) if n == "report"));
}

/// A name is unique among tasks that are not cancelled: a deleted task's
/// name can be used again, and lookups by name find the live task.
async fn cancelled_names_can_be_used_again<S: Store>(s: S) {
    let old = new_task(&s, "report", 1, t0()).await;
    let cancel = |t: &Task, state| UpdateTask {
        id: t.id,
        expected_version: t.version,
        spec: t.spec.clone(),
        state,
        next_fire_at: None,
        now: t0(),
    };
    let old = s
        .update_task(cancel(&old, TaskState::Cancelled))
        .await
        .unwrap();
    assert_eq!(
        s.get_task_by_name("report").await.unwrap(),
        Some(old.clone())
    );
    let new = new_task(&s, "report", 2, t0()).await;
    assert_ne!(new.id, old.id);
    assert_eq!(
        s.get_task_by_name("report").await.unwrap(),
        Some(new.clone())
    );
    // Still one live task per name: neither a second create nor reviving the old one.
    let dup = s
        .create_task(NewTask {
            id: TaskId::new(),
            spec: spec("report", 1),
            next_fire_at: None,
            now: t0(),
        })
        .await;
    assert!(matches!(dup, Err(StoreError::DuplicateName(n)) if n == "report"));
    let revived = s.update_task(cancel(&old, TaskState::Active)).await;
    assert!(matches!(revived, Err(StoreError::DuplicateName(n)) if n == "report"));
    // The old task and its state are untouched by the failed revival.
    assert_eq!(s.get_task(old.id).await.unwrap(), Some(old));
}

async fn update_is_optimistic<S: Store>(s: S) {
    let task = new_task(&s, "report", 1, t0()).await;
    let mut changed = task.spec.clone();
    changed.description = "now with a description".into();
    let update = |expected_version| UpdateTask {
        id: task.id,
        expected_version,
        spec: changed.clone(),
        state: TaskState::Paused,
        next_fire_at: None,
        now: t0() + 1.second(),
    };
    let updated = s.update_task(update(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.state, TaskState::Paused);
    assert_eq!(updated.spec.description, "now with a description");
    assert_eq!(updated.updated_at, t0() + 1.second());
    // A writer that read version 1 loses.
    let stale = s.update_task(update(1)).await;
    assert!(
        matches!(
            stale,
            Err(StoreError::VersionConflict {
                expected: 1,
                current: 2,
                ..
            })
        ),
        "{stale:?}"
    );
    let missing = s
        .update_task(UpdateTask {
            id: TaskId::new(),
            ..update(1)
        })
        .await;
    assert!(matches!(missing, Err(StoreError::TaskNotFound(_))));
}

async fn plan_records_each_fire_once<S: Store>(s: S) {
    let task = new_task(&s, "every-5m", 1, t0()).await;
    let later = new_task(&s, "later", 1, t0() + 1.hour()).await;
    let out = s
        .plan(
            PlanParams {
                now: t0(),
                horizon: t0(),
                limit: 100,
            },
            &queue_due,
        )
        .await
        .unwrap();
    assert_eq!(
        (out.tasks, out.runs_inserted),
        (1, 1),
        "only the due task is planned"
    );
    let task = s.get_task(task.id).await.unwrap().unwrap();
    assert_eq!(task.next_fire_at, Some(t0() + 5.minutes()));
    assert_eq!(
        s.get_task(later.id).await.unwrap().unwrap().next_fire_at,
        Some(t0() + 1.hour())
    );
    // Nothing is due any more at the same instant.
    let again = s
        .plan(
            PlanParams {
                now: t0(),
                horizon: t0(),
                limit: 100,
            },
            &queue_due,
        )
        .await
        .unwrap();
    assert_eq!(again.tasks, 0);
    // A planner that re-plans an already recorded fire inserts nothing.
    let replay = |t: &Task| {
        let mut p = queue_due(t);
        p.runs[0].scheduled_for = t0();
        p
    };
    let out = s
        .plan(
            PlanParams {
                now: t0() + 5.minutes(),
                horizon: t0() + 5.minutes(),
                limit: 100,
            },
            &replay,
        )
        .await
        .unwrap();
    assert_eq!(
        (out.tasks, out.runs_inserted),
        (1, 0),
        "the fire at t0 is in the ledger already"
    );
    let runs = s.runs_of_task(task.id, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].scheduled_for, t0());
    assert_eq!(runs[0].status, RunStatus::Queued);
    assert_eq!(
        (runs[0].attempt, runs[0].max_attempts, runs[0].fence),
        (0, 1, 0)
    );
}

async fn plan_respects_limit_and_order<S: Store>(s: S) {
    for i in 0..5 {
        new_task(&s, &format!("t{i}"), 1, t0() - (5 - i).minutes()).await;
    }
    let out = s
        .plan(
            PlanParams {
                now: t0(),
                horizon: t0(),
                limit: 3,
            },
            &queue_due,
        )
        .await
        .unwrap();
    assert_eq!(out.tasks, 3);
    for (i, planned) in [(0, true), (1, true), (2, true), (3, false), (4, false)] {
        let t = s.get_task_by_name(&format!("t{i}")).await.unwrap().unwrap();
        let runs = s.runs_of_task(t.id, 10).await.unwrap();
        assert_eq!(
            !runs.is_empty(),
            planned,
            "earliest fires are planned first (t{i})"
        );
    }
}

async fn missed_rows_are_recorded_terminal<S: Store>(s: S) {
    let task = new_task(&s, "t", 1, t0()).await;
    let missed = |t: &Task| TaskPlan {
        runs: vec![NewRun {
            id: RunId::new(),
            scheduled_for: t0() - 1.hour(),
            last_scheduled_for: Some(t0() - 5.minutes()),
            fire_count: 12,
            status: RunStatus::Missed,
            trigger: Trigger::Schedule,
            run_at: t0(),
            error: Some("12 fires missed while the scheduler was down".into()),
            payload: None,
        }],
        next_fire_at: t.next_fire_at.map(|n| n + 5.minutes()),
        state: TaskState::Active,
    };
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &missed,
    )
    .await
    .unwrap();
    let runs = s.runs_of_task(task.id, 10).await.unwrap();
    assert_eq!(runs[0].status, RunStatus::Missed);
    assert_eq!(runs[0].fire_count, 12);
    assert_eq!(runs[0].last_scheduled_for, Some(t0() - 5.minutes()));
    assert_eq!(runs[0].finished_at, Some(t0()));
    assert!(
        s.claim_runs(claim(t0() + 1.hour(), "n1", 10))
            .await
            .unwrap()
            .is_empty(),
        "missed rows never run"
    );
}

async fn claims_bump_fence_and_never_overlap<S: Store>(s: S) {
    let task = new_task(&s, "t", 3, t0()).await;
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    assert!(
        s.claim_runs(claim(t0() - 1.second(), "n1", 10))
            .await
            .unwrap()
            .is_empty(),
        "not ready yet"
    );
    let first = s.claim_runs(claim(t0(), "n1", 10)).await.unwrap();
    assert_eq!(first.len(), 1);
    let run = &first[0].run;
    assert_eq!(first[0].task.id, task.id);
    assert_eq!(
        (run.status, run.attempt, run.fence),
        (RunStatus::Running, 1, 1)
    );
    assert_eq!(run.lease_owner.as_deref(), Some("n1"));
    assert_eq!(run.lease_expires_at, Some(t0() + 30.seconds()));
    assert!(
        s.claim_runs(claim(t0(), "n2", 10))
            .await
            .unwrap()
            .is_empty(),
        "a running run is not claimed twice"
    );
}

async fn finishing_needs_the_current_fence<S: Store>(s: S) {
    new_task(&s, "t", 3, t0()).await;
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    let run = s
        .claim_runs(claim(t0(), "n1", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    let retry = FinishAttempt {
        id: run.id,
        fence: run.fence,
        now: t0() + 1.second(),
        outcome: Outcome::Retry {
            run_at: t0() + 3.seconds(),
            error: "HTTP 503".into(),
        },
    };
    assert!(s.finish_attempt(retry.clone()).await.unwrap());
    let r = s.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.run_at, r.error.as_deref()),
        (RunStatus::Retrying, t0() + 3.seconds(), Some("HTTP 503"))
    );
    assert_eq!(r.scheduled_for, t0(), "a retry never moves the fire");
    assert!(
        !s.finish_attempt(retry).await.unwrap(),
        "the same fence cannot finish twice"
    );
    // The second attempt gets fence 2; a write with fence 1 changes nothing.
    let second = s
        .claim_runs(claim(t0() + 3.seconds(), "n2", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    assert_eq!((second.attempt, second.fence, second.id), (2, 2, run.id));
    let stale = FinishAttempt {
        id: run.id,
        fence: 1,
        now: t0() + 4.seconds(),
        outcome: Outcome::Failed {
            error: "stale writer".into(),
            output: None,
        },
    };
    assert!(!s.finish_attempt(stale).await.unwrap());
    let done = FinishAttempt {
        id: run.id,
        fence: 2,
        now: t0() + 5.seconds(),
        outcome: Outcome::Succeeded {
            result: Some(serde_json::json!({"answer": 42})),
            output: Some("ok".into()),
        },
    };
    assert!(s.finish_attempt(done).await.unwrap());
    let r = s.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(r.status, RunStatus::Succeeded);
    assert_eq!(r.result, Some(serde_json::json!({"answer": 42})));
    assert_eq!(
        (r.output.as_deref(), r.finished_at, r.lease_owner),
        (Some("ok"), Some(t0() + 5.seconds()), None)
    );
}

async fn leases_extend_only_for_their_owner<S: Store>(s: S) {
    new_task(&s, "t", 1, t0()).await;
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    let run = s
        .claim_runs(claim(t0(), "n1", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    let until = t0() + 1.minute();
    assert!(
        s.extend_leases("n1", &[(run.id, run.fence)], t0(), until)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.get_run(run.id).await.unwrap().unwrap().lease_expires_at,
        Some(until)
    );
    let lost = s
        .extend_leases("n2", &[(run.id, run.fence)], t0(), until + 1.minute())
        .await
        .unwrap();
    assert_eq!(
        lost,
        vec![run.id],
        "another node's lease is not ours to extend"
    );
    let lost = s
        .extend_leases("n1", &[(run.id, run.fence + 1)], t0(), until)
        .await
        .unwrap();
    assert_eq!(
        lost,
        vec![run.id],
        "a newer fence means the run was reclaimed"
    );
}

async fn reaper_requeues_dead_leases_then_fails_spent_runs<S: Store>(s: S) {
    new_task(&s, "t", 2, t0()).await;
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    let run = s
        .claim_runs(claim(t0(), "dead-node", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    assert!(
        s.reap_expired(ReapParams {
            now: t0() + 30.seconds(),
            limit: 10
        })
        .await
        .unwrap()
        .is_empty(),
        "lease still valid"
    );
    let reaped = s
        .reap_expired(ReapParams {
            now: t0() + 31.seconds(),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(reaped, vec![run.id]);
    let r = s.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.trigger, r.lease_owner.clone()),
        (RunStatus::Queued, Trigger::Recovery, None)
    );
    // Recovery: the same run (same idempotency key), a higher fence.
    let again = s
        .claim_runs(claim(t0() + 31.seconds(), "n2", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    assert_eq!((again.id, again.attempt, again.fence), (run.id, 2, 2));
    // Its node dies too; attempts are spent now, so the run fails.
    let reaped = s
        .reap_expired(ReapParams {
            now: t0() + 2.minutes(),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(reaped, vec![run.id]);
    let r = s.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(r.status, RunStatus::Failed);
    assert!(
        r.error
            .as_deref()
            .is_some_and(|e| e.contains("lease expired"))
    );
}

async fn wakeups_see_active_tasks_and_ready_runs<S: Store>(s: S) {
    assert_eq!(s.next_fire_at().await.unwrap(), None);
    assert_eq!(s.next_run_at().await.unwrap(), None);
    let task = new_task(&s, "t", 3, t0() + 1.hour()).await;
    assert_eq!(s.next_fire_at().await.unwrap(), Some(t0() + 1.hour()));
    let early = |t: &Task| {
        let mut p = queue_due(t);
        p.runs[0].run_at = t0() + 10.seconds();
        p.next_fire_at = Some(t0() + 2.hours());
        p
    };
    s.plan(
        PlanParams {
            now: t0() + 1.hour(),
            horizon: t0() + 1.hour(),
            limit: 10,
        },
        &early,
    )
    .await
    .unwrap();
    assert_eq!(s.next_fire_at().await.unwrap(), Some(t0() + 2.hours()));
    assert_eq!(s.next_run_at().await.unwrap(), Some(t0() + 10.seconds()));
    // A paused task no longer counts; a claimed run is no longer ready.
    let t = s.get_task(task.id).await.unwrap().unwrap();
    s.update_task(UpdateTask {
        id: t.id,
        expected_version: t.version,
        spec: t.spec.clone(),
        state: TaskState::Paused,
        next_fire_at: t.next_fire_at,
        now: t0(),
    })
    .await
    .unwrap();
    let claimed = s
        .claim_runs(claim(t0() + 10.seconds(), "n1", 10))
        .await
        .unwrap();
    assert_eq!(s.next_fire_at().await.unwrap(), None);
    assert_eq!(s.next_run_at().await.unwrap(), None);
    // Running runs of a task, other than the one asking.
    let run = &claimed[0].run;
    assert_eq!(s.running_count(task.id, run.id).await.unwrap(), 0);
    assert_eq!(s.running_count(task.id, RunId::new()).await.unwrap(), 1);
}

async fn released_runs_are_ready_again<S: Store>(s: S) {
    new_task(&s, "t", 1, t0()).await;
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    let run = s
        .claim_runs(claim(t0(), "stopping", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    assert!(
        !s.release_run(run.id, run.fence + 1, t0()).await.unwrap(),
        "stale fence"
    );
    assert!(
        s.release_run(run.id, run.fence, t0() + 1.second())
            .await
            .unwrap()
    );
    let r = s.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.trigger, r.run_at, r.lease_owner),
        (
            RunStatus::Queued,
            Trigger::Recovery,
            t0() + 1.second(),
            None
        )
    );
    let again = s
        .claim_runs(claim(t0() + 1.second(), "other", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    assert_eq!((again.id, again.fence), (run.id, run.fence + 1));
    // A skipped outcome is terminal and says why.
    let skip = FinishAttempt {
        id: run.id,
        fence: again.fence,
        now: t0() + 2.seconds(),
        outcome: Outcome::Skipped {
            reason: "previous run still running".into(),
        },
    };
    assert!(s.finish_attempt(skip).await.unwrap());
    let r = s.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.error.as_deref()),
        (RunStatus::Skipped, Some("previous run still running"))
    );
}

async fn batches_of_outcomes_apply_per_run<S: Store>(s: S) {
    for i in 0..3 {
        new_task(&s, &format!("t{i}"), 2, t0()).await;
    }
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    let runs: Vec<_> = s
        .claim_runs(claim(t0(), "n1", 10))
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.run)
        .collect();
    assert_eq!(runs.len(), 3);
    let at = |i: usize, fence: i64, outcome| FinishAttempt {
        id: runs[i].id,
        fence,
        now: t0() + 1.second(),
        outcome,
    };
    let applied = s
        .finish_attempts(vec![
            at(
                0,
                runs[0].fence,
                Outcome::Succeeded {
                    result: None,
                    output: None,
                },
            ),
            at(
                1,
                runs[1].fence + 7,
                Outcome::Failed {
                    error: "stale".into(),
                    output: None,
                },
            ),
            at(
                2,
                runs[2].fence,
                Outcome::Retry {
                    run_at: t0() + 9.seconds(),
                    error: "later".into(),
                },
            ),
        ])
        .await
        .unwrap();
    assert_eq!(applied, vec![true, false, true]);
    let status = |i: usize| {
        let s = &s;
        let id = runs[i].id;
        async move { s.get_run(id).await.unwrap().unwrap() }
    };
    assert_eq!(status(0).await.status, RunStatus::Succeeded);
    assert_eq!(
        status(1).await.status,
        RunStatus::Running,
        "a stale fence in a batch changes nothing"
    );
    let r2 = status(2).await;
    assert_eq!(
        (r2.status, r2.run_at),
        (RunStatus::Retrying, t0() + 9.seconds())
    );
    assert!(s.finish_attempts(Vec::new()).await.unwrap().is_empty());
}

async fn pruning_keeps_the_newest_and_the_young_and_never_live_runs<S: Store>(s: S) {
    use agentcron::store::PruneParams;
    let task = new_task(&s, "t", 1, t0()).await;
    // Ten finished fires, one a minute, recorded at their fire time.
    for i in 0..10 {
        let at = t0() + i.minutes();
        let done = move |t: &Task| {
            let mut p = queue_due(t);
            p.runs[0].status = RunStatus::Skipped;
            p.next_fire_at = Some(at + 1.minute());
            p
        };
        s.plan(
            PlanParams {
                now: at,
                horizon: at,
                limit: 10,
            },
            &done,
        )
        .await
        .unwrap();
    }
    // And one queued fire, which pruning must leave alone.
    let live = t0() + 10.minutes();
    s.plan(
        PlanParams {
            now: live,
            horizon: live,
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    assert_eq!(s.runs_of_task(task.id, 100).await.unwrap().len(), 11);
    let n = s
        .prune(PruneParams {
            keep_runs: 4,
            older_than: t0() - 1.hour(),
            limit: 1000,
        })
        .await
        .unwrap();
    assert_eq!(n, 6, "finished runs beyond the newest 4 go");
    let left: Vec<_> = s
        .runs_of_task(task.id, 100)
        .await
        .unwrap()
        .iter()
        .map(|r| r.scheduled_for)
        .collect();
    assert_eq!(
        left,
        [
            live,
            t0() + 9.minutes(),
            t0() + 8.minutes(),
            t0() + 7.minutes(),
            t0() + 6.minutes()
        ]
    );
    let n = s
        .prune(PruneParams {
            keep_runs: 100,
            older_than: t0() + 8.minutes() + 1.second(),
            limit: 1000,
        })
        .await
        .unwrap();
    assert_eq!(n, 3, "finished runs recorded before the cut go too");
    let left = s.runs_of_task(task.id, 100).await.unwrap();
    assert_eq!(left.len(), 2);
    assert_eq!(
        left[0].status,
        RunStatus::Queued,
        "a live run is never pruned"
    );
}

async fn overlap_operations_defer_wake_and_cancel<S: Store>(s: S) {
    let task = new_task(&s, "t", 3, t0()).await;
    // Two fires, both claimed.
    for at in [t0(), t0() + 1.minute()] {
        let plan = move |t: &Task| {
            let mut p = queue_due(t);
            p.runs[0].scheduled_for = at;
            p.runs[0].run_at = at;
            p.next_fire_at = Some(at + 1.minute());
            p
        };
        s.plan(
            PlanParams {
                now: at,
                horizon: at,
                limit: 10,
            },
            &plan,
        )
        .await
        .unwrap();
    }
    let claimed: Vec<_> = s
        .claim_runs(claim(t0() + 1.minute(), "n1", 10))
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.run)
        .collect();
    let (first, second) = (&claimed[0], &claimed[1]);
    // Defer the second: queued again, attempt not used up, not ready yet.
    assert!(
        !s.defer_run(second.id, second.fence + 1, t0() + 2.hours())
            .await
            .unwrap(),
        "stale fence"
    );
    assert!(
        s.defer_run(second.id, second.fence, t0() + 2.hours())
            .await
            .unwrap()
    );
    let r = s.get_run(second.id).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.attempt, r.run_at),
        (RunStatus::Queued, 0, t0() + 2.hours())
    );
    assert!(
        s.claim_runs(claim(t0() + 1.minute(), "n1", 10))
            .await
            .unwrap()
            .is_empty()
    );
    // Waking makes it ready now; a planned future fire would not be touched.
    assert_eq!(
        s.wake_waiting(task.id, t0() + 90.seconds()).await.unwrap(),
        1
    );
    assert_eq!(
        s.get_run(second.id).await.unwrap().unwrap().run_at,
        t0() + 90.seconds()
    );
    let again = s
        .claim_runs(claim(t0() + 90.seconds(), "n1", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    assert_eq!(
        (again.id, again.attempt),
        (second.id, 1),
        "the deferred claim left no attempt behind"
    );
    // Replace: the first is cancelled, the one asking is not.
    let cancelled = s
        .cancel_running(task.id, again.id, t0() + 91.seconds(), "replaced")
        .await
        .unwrap();
    assert_eq!(cancelled, vec![first.id]);
    let r = s.get_run(first.id).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.error.as_deref(), r.lease_owner),
        (RunStatus::Cancelled, Some("replaced"), None)
    );
    assert_eq!(
        s.get_run(again.id).await.unwrap().unwrap().status,
        RunStatus::Running
    );
    let late = FinishAttempt {
        id: first.id,
        fence: first.fence,
        now: t0() + 92.seconds(),
        outcome: Outcome::Succeeded {
            result: None,
            output: None,
        },
    };
    assert!(
        !s.finish_attempt(late).await.unwrap(),
        "a cancelled run's late outcome changes nothing"
    );
}

async fn cancel_and_lease_expiry<S: Store>(s: S) {
    new_task(&s, "t", 3, t0()).await;
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    assert_eq!(s.next_lease_expiry().await.unwrap(), None);
    let run = s
        .claim_runs(claim(t0(), "n1", 10))
        .await
        .unwrap()
        .remove(0)
        .run;
    assert_eq!(
        s.next_lease_expiry().await.unwrap(),
        Some(t0() + 30.seconds())
    );
    assert!(
        s.cancel_run(run.id, t0() + 1.second(), "by a user")
            .await
            .unwrap()
    );
    let r = s.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(
        (r.status, r.error.as_deref(), r.finished_at),
        (
            RunStatus::Cancelled,
            Some("by a user"),
            Some(t0() + 1.second())
        )
    );
    assert_eq!(s.next_lease_expiry().await.unwrap(), None);
    assert!(
        !s.cancel_run(run.id, t0() + 2.seconds(), "twice")
            .await
            .unwrap(),
        "finished runs stay as they are"
    );
    assert!(!s.cancel_run(RunId::new(), t0(), "nobody").await.unwrap());
}

async fn pause_resume_events_and_nodes<S: Store>(s: S) {
    let task = new_task(&s, "t", 1, t0()).await;
    // A fire planned ahead (09:05) and the one due now (09:00).
    let ahead = |t: &Task| {
        let mut p = queue_due(t);
        p.runs[0].scheduled_for = t0() + 5.minutes();
        p.runs[0].run_at = t0() + 5.minutes();
        p.next_fire_at = Some(t0() + 10.minutes());
        p
    };
    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0() + 5.minutes(),
            limit: 10,
        },
        &ahead,
    )
    .await
    .unwrap();
    let paused = s
        .pause_task(task.id, t0() + 1.minute())
        .await
        .unwrap()
        .expect("was active");
    assert_eq!((paused.state, paused.version), (TaskState::Paused, 2));
    assert!(
        s.runs_of_task(task.id, 10).await.unwrap().is_empty(),
        "the fire inside the pause is gone"
    );
    assert!(
        s.pause_task(task.id, t0() + 2.minutes())
            .await
            .unwrap()
            .is_none(),
        "not active"
    );
    assert_eq!(
        s.next_fire_at().await.unwrap(),
        None,
        "a paused task is not planned"
    );
    let resumed = s
        .resume_task(
            task.id,
            t0() + 20.minutes(),
            Some(t0() + 25.minutes()),
            serde_json::json!({"fires_skipped": 3}),
        )
        .await
        .unwrap()
        .expect("was paused");
    assert_eq!(
        (resumed.state, resumed.next_fire_at),
        (TaskState::Active, Some(t0() + 25.minutes()))
    );
    assert!(
        s.resume_task(task.id, t0(), None, serde_json::json!({}))
            .await
            .unwrap()
            .is_none(),
        "not paused"
    );
    let events = s.task_events(task.id).await.unwrap();
    let kinds: Vec<_> = events.iter().map(|e| (e.kind.as_str(), e.at)).collect();
    assert_eq!(
        kinds,
        [
            ("paused", t0() + 1.minute()),
            ("resumed", t0() + 20.minutes())
        ]
    );
    assert_eq!(
        events[1].detail,
        Some(serde_json::json!({"fires_skipped": 3}))
    );
    // Nodes: registered, refreshed by claims.
    let node = agentcron::Node {
        id: "n1".into(),
        host: "h".into(),
        version: "0.1.0".into(),
        started_at: t0(),
        heartbeat_at: t0(),
        skew_ms: 0,
    };
    s.register_node(node.clone()).await.unwrap();
    s.register_node(node.clone()).await.unwrap();
    assert_eq!(s.nodes().await.unwrap(), vec![node]);
    s.plan(
        PlanParams {
            now: t0() + 25.minutes(),
            horizon: t0() + 25.minutes(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    s.claim_runs(claim(t0() + 25.minutes(), "n1", 10))
        .await
        .unwrap();
    assert_eq!(
        s.nodes().await.unwrap()[0].heartbeat_at,
        t0() + 25.minutes()
    );
}

async fn listing_tasks_runs_and_attempts<S: Store>(s: S) {
    use agentcron::store::{ListRuns, ListTasks};
    let mut ids = Vec::new();
    for (name, team) in [
        ("report-a", "sales"),
        ("report-b", "ops"),
        ("cleanup", "sales"),
    ] {
        let mut spec = spec(name, 2);
        spec.labels.insert("team".into(), team.into());
        let t = s
            .create_task(NewTask {
                id: TaskId::new(),
                spec,
                next_fire_at: Some(t0()),
                now: t0(),
            })
            .await
            .unwrap();
        ids.push(t.id);
    }
    let names = |tasks: Vec<Task>| tasks.into_iter().map(|t| t.spec.name).collect::<Vec<_>>();
    let all = ListTasks {
        limit: 10,
        ..ListTasks::default()
    };
    assert_eq!(
        names(s.list_tasks(all.clone()).await.unwrap()),
        ["report-a", "report-b", "cleanup"]
    );
    let sales = ListTasks {
        label: Some(("team".into(), "sales".into())),
        ..all.clone()
    };
    assert_eq!(
        names(s.list_tasks(sales).await.unwrap()),
        ["report-a", "cleanup"]
    );
    let prefix = ListTasks {
        name_prefix: Some("report-".into()),
        ..all.clone()
    };
    assert_eq!(
        names(s.list_tasks(prefix).await.unwrap()),
        ["report-a", "report-b"]
    );
    let page = ListTasks {
        limit: 2,
        ..all.clone()
    };
    let first = s.list_tasks(page.clone()).await.unwrap();
    let rest = s
        .list_tasks(ListTasks {
            after: Some(first[1].id),
            ..page
        })
        .await
        .unwrap();
    assert_eq!(names(rest), ["cleanup"], "cursor pagination");
    let paused = ListTasks {
        state: Some(TaskState::Paused),
        ..all
    };
    assert!(s.list_tasks(paused).await.unwrap().is_empty());

    s.plan(
        PlanParams {
            now: t0(),
            horizon: t0(),
            limit: 10,
        },
        &queue_due,
    )
    .await
    .unwrap();
    let runs = s
        .list_runs(ListRuns {
            limit: 10,
            ..ListRuns::default()
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), 3);
    assert!(runs.windows(2).all(|w| w[0].id > w[1].id), "newest first");
    let mine = s
        .list_runs(ListRuns {
            task: Some(ids[1]),
            limit: 10,
            ..ListRuns::default()
        })
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    let older = s
        .list_runs(ListRuns {
            before: Some(runs[0].id),
            limit: 10,
            ..ListRuns::default()
        })
        .await
        .unwrap();
    assert_eq!(older.len(), 2);
    let claimed = s
        .claim_runs(claim(t0(), "n1", 1))
        .await
        .unwrap()
        .remove(0)
        .run;
    let running = s
        .list_runs(ListRuns {
            status: Some(RunStatus::Running),
            limit: 10,
            ..ListRuns::default()
        })
        .await
        .unwrap();
    assert_eq!(
        running.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![claimed.id]
    );
    let fail = FinishAttempt {
        id: claimed.id,
        fence: 1,
        now: t0() + 1.second(),
        outcome: Outcome::Retry {
            run_at: t0() + 2.seconds(),
            error: "boom".into(),
        },
    };
    s.finish_attempt(fail).await.unwrap();
    s.claim_runs(claim(t0() + 2.seconds(), "n2", 10))
        .await
        .unwrap();
    let attempts = s.attempts(claimed.id).await.unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        (
            attempts[0].attempt,
            attempts[0].node.as_str(),
            attempts[0].outcome.as_deref(),
            attempts[0].error.as_deref()
        ),
        (1, "n1", Some("retrying"), Some("boom"))
    );
    assert_eq!(
        (
            attempts[1].attempt,
            attempts[1].fence,
            attempts[1].node.as_str(),
            attempts[1].finished_at
        ),
        (2, 2, "n2", None)
    );
}

/// Instantiates every conformance test for one backend; `$open` is an async
/// expression yielding a fresh, empty store.
macro_rules! backend {
    ($module:ident, $open:expr) => {
        mod $module {
            backend!(@tests $open;
                tasks_create_get_and_reject_duplicate_names,
                cancelled_names_can_be_used_again,
                update_is_optimistic,
                plan_records_each_fire_once,
                plan_respects_limit_and_order,
                missed_rows_are_recorded_terminal,
                claims_bump_fence_and_never_overlap,
                finishing_needs_the_current_fence,
                leases_extend_only_for_their_owner,
                reaper_requeues_dead_leases_then_fails_spent_runs,
                wakeups_see_active_tasks_and_ready_runs,
                released_runs_are_ready_again,
                batches_of_outcomes_apply_per_run,
                pruning_keeps_the_newest_and_the_young_and_never_live_runs,
                overlap_operations_defer_wake_and_cancel,
                cancel_and_lease_expiry,
                pause_resume_events_and_nodes,
                listing_tasks_runs_and_attempts,
            );
        }
    };
    (@tests $open:expr; $($test:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $test() {
                let Some((store, guard)) = ($open) else {
                    return;
                };
                super::$test(store).await;
                crate::support::Cleanup::cleanup(guard).await;
            }
        )*
    };
}

backend!(sqlite, {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("agentcron.db").display());
    let store = agentcron::store::SqliteStore::open(&url)
        .await
        .expect("open sqlite");
    Some((store, dir))
});

backend!(postgres, crate::support::pg_store().await);

backend!(mysql, crate::support::mysql_store().await);
