//! The engine end to end: a real SQLite file, real handlers, and a manual
//! clock moved by the test. A test waits for effects by receiving what the
//! handler sends, or by polling the store with a deadline.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentcron::store::{ClaimParams, PlanParams, Store, TaskPlan};
use agentcron::{
    ActionError, Engine, EngineConfig, Handlers, ManualClock, RunId, RunStatus, Task, Trigger,
};
use jiff::ToSpan;
use support::*;

#[tokio::test]
async fn a_task_fires_on_time_and_its_run_is_recorded() {
    let (handlers, mut rx) = reporting(|_| Ok(()));
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute("report", serde_json::json!({})))
        .await;
    assert_eq!(task.next_fire_at, Some(ts("2026-11-30T09:00:00Z")));
    // Nothing happens before the fire time.
    h.set("2026-11-30T08:59:59Z");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv())
            .await
            .is_err(),
        "fired early"
    );
    h.set("2026-11-30T09:00:00Z");
    let seen = recv(&mut rx).await;
    assert_eq!(
        (seen.scheduled_for, seen.attempt, seen.fence),
        (ts("2026-11-30T09:00:00Z"), 1, 1)
    );
    let runs = h
        .until(&task, "the run succeeds", |r| {
            r.len() == 1 && r[0].status == RunStatus::Succeeded
        })
        .await;
    assert_eq!(runs[0].id, seen.run);
    assert_eq!(runs[0].result, Some(serde_json::json!({"attempt": 1})));
    assert_eq!(runs[0].started_at, Some(ts("2026-11-30T09:00:00Z")));
    // The next minute fires too.
    h.set("2026-11-30T09:01:00Z");
    assert_eq!(
        recv(&mut rx).await.scheduled_for,
        ts("2026-11-30T09:01:00Z")
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn retries_are_attempts_of_the_same_run_and_keep_the_cadence() {
    let (handlers, mut rx) = reporting(|attempt| {
        if attempt == 1 {
            Err(ActionError::retryable("HTTP 503"))
        } else {
            Ok(())
        }
    });
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute("report", serde_json::json!({"retry": {"max_attempts": 3, "backoff": {"initial": "10s", "jitter": 0}}})))
        .await;
    h.set("2026-11-30T09:00:00Z");
    let first = recv(&mut rx).await;
    let runs = h
        .until(&task, "the first attempt is retrying", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Retrying)
        })
        .await;
    assert_eq!(
        runs[0].run_at,
        ts("2026-11-30T09:00:10Z"),
        "initial backoff, no jitter"
    );
    assert_eq!(runs[0].error.as_deref(), Some("HTTP 503"));
    let t = h.store.get_task(task.id).await.unwrap().unwrap();
    assert_eq!(
        t.next_fire_at,
        Some(ts("2026-11-30T09:01:00Z")),
        "the retry does not move the schedule"
    );
    h.set("2026-11-30T09:00:10Z");
    let second = recv(&mut rx).await;
    assert_eq!(
        (second.run, second.attempt, second.fence),
        (first.run, 2, 2)
    );
    assert_eq!(second.scheduled_for, ts("2026-11-30T09:00:00Z"));
    h.until(&task, "the retry succeeds", |r| {
        r[0].status == RunStatus::Succeeded
    })
    .await;
    h.set("2026-11-30T09:01:00Z");
    let next = recv(&mut rx).await;
    assert_eq!(
        (next.scheduled_for, next.attempt),
        (ts("2026-11-30T09:01:00Z"), 1)
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn permanent_errors_and_spent_attempts_fail_the_run() {
    let (handlers, mut rx) = reporting(|_| Err(ActionError::permanent("400 Bad Request")));
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute(
            "report",
            serde_json::json!({"retry": {"max_attempts": 5}}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    recv(&mut rx).await;
    let runs = h
        .until(&task, "the run fails without retry", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Failed)
        })
        .await;
    assert_eq!(
        (runs[0].attempt, runs[0].error.as_deref()),
        (1, Some("400 Bad Request"))
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_unknown_handler_fails_with_a_clear_error() {
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let task = h
        .create(every_minute(
            "nobody-registered-this",
            serde_json::json!({}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    let runs = h
        .until(&task, "the run fails", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Failed)
        })
        .await;
    assert!(
        runs[0]
            .error
            .as_deref()
            .unwrap()
            .contains("no handler named `nobody-registered-this` is registered")
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_panicking_handler_fails_its_run_and_the_engine_goes_on() {
    let mut handlers = Handlers::new();
    handlers.register("boom", |_ctx| async move {
        if true {
            panic!("boom at nine");
        }
        Ok(None)
    });
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h.create(every_minute("boom", serde_json::json!({}))).await;
    h.set("2026-11-30T09:00:00Z");
    let runs = h
        .until(&task, "the run fails", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Failed)
        })
        .await;
    assert_eq!(
        runs[0].error.as_deref(),
        Some("internal error: the attempt panicked: boom at nine")
    );
    // The slot is free: the next fire runs (and fails) too, and shutdown
    // does not wait for the panicked attempt.
    h.set("2026-11-30T09:01:00Z");
    h.until(&task, "the second run fails", |r| {
        r.len() == 2 && r[1].status == RunStatus::Failed
    })
    .await;
    tokio::time::timeout(
        Duration::from_secs(5),
        h.engine.unwrap().shutdown(Duration::from_secs(1)),
    )
    .await
    .expect("shutdown ends");
}

#[tokio::test]
async fn a_hung_attempt_times_out() {
    let (handlers, mut rx, _release) = holding();
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute("hold", serde_json::json!({"timeout": "5s"})))
        .await;
    h.set("2026-11-30T09:00:00Z");
    recv(&mut rx).await;
    h.set("2026-11-30T09:00:04Z");
    assert_eq!(h.runs(&task).await[0].status, RunStatus::Running);
    h.set("2026-11-30T09:00:05Z");
    let runs = h
        .until(&task, "the run times out", |r| {
            r[0].status == RunStatus::TimedOut
        })
        .await;
    assert_eq!(runs[0].error.as_deref(), Some("timed out after 5s"));
    assert_eq!(runs[0].finished_at, Some(ts("2026-11-30T09:00:05Z")));
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn overlap_forbid_skips_a_fire_while_the_previous_run_is_going() {
    let (handlers, mut rx, release) = holding();
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute(
            "hold",
            serde_json::json!({"overlap": "forbid"}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    recv(&mut rx).await;
    h.set("2026-11-30T09:01:00Z");
    let runs = h
        .until(&task, "the second fire is skipped", |r| {
            r.len() == 2 && r[1].status == RunStatus::Skipped
        })
        .await;
    assert_eq!(runs[1].scheduled_for, ts("2026-11-30T09:01:00Z"));
    assert!(
        runs[1]
            .error
            .as_deref()
            .unwrap()
            .contains("previous run of this task is still running")
    );
    release.notify_one();
    h.until(&task, "the first run succeeds", |r| {
        r[0].status == RunStatus::Succeeded
    })
    .await;
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_run_whose_node_died_is_recovered_with_the_same_id_and_a_higher_fence() {
    let (store, dir) = open_store().await;
    let start = ts("2026-11-30T09:00:00Z");
    let task = create_task(
        &store,
        every_minute("report", serde_json::json!({"retry": {"max_attempts": 3}})),
        start - 10.seconds(),
    )
    .await;
    // A node plans the fire, claims it and dies without a word.
    let queue = |t: &Task| TaskPlan {
        runs: vec![agentcron::store::NewRun {
            id: RunId::new(),
            scheduled_for: t.next_fire_at.unwrap(),
            last_scheduled_for: None,
            fire_count: 1,
            status: RunStatus::Queued,
            trigger: Trigger::Schedule,
            run_at: t.next_fire_at.unwrap(),
            error: None,
            payload: None,
        }],
        next_fire_at: Some(t.next_fire_at.unwrap() + 1.minute()),
        state: agentcron::TaskState::Active,
    };
    store
        .plan(
            PlanParams {
                now: start,
                horizon: start,
                limit: 10,
            },
            &queue,
        )
        .await
        .unwrap();
    let dead = store
        .claim_runs(ClaimParams {
            now: start,
            ready_by: start,
            owner: "dead-node".into(),
            lease: Duration::from_secs(30),
            limit: 10,
        })
        .await
        .unwrap()
        .remove(0)
        .run;
    // A fresh engine starts: nothing to do until the dead lease expires.
    let (handlers, mut rx) = reporting(|_| Ok(()));
    let clock = Arc::new(ManualClock::new(start + 1.second()));
    let lease = EngineConfig {
        lease: Duration::from_secs(30),
        ..config()
    };
    let engine = Engine::start(store.clone(), clock.clone(), lease, handlers).unwrap();
    let h = Harness {
        engine: Some(engine),
        store,
        clock,
        _dir: dir,
    };
    h.set("2026-11-30T09:00:30Z");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv())
            .await
            .is_err(),
        "lease still valid"
    );
    h.set("2026-11-30T09:00:45Z");
    let seen = recv(&mut rx).await;
    assert_eq!(
        (seen.run, seen.attempt, seen.fence),
        (dead.id, 2, 2),
        "same idempotency key, higher fence"
    );
    let runs = h
        .until(&task, "the recovered run succeeds", |r| {
            r[0].status == RunStatus::Succeeded
        })
        .await;
    assert_eq!(runs[0].trigger, Trigger::Recovery);
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn shutdown_waits_for_the_grace_then_releases_the_run() {
    let (handlers, mut rx, _release) = holding();
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h.create(every_minute("hold", serde_json::json!({}))).await;
    h.set("2026-11-30T09:00:00Z");
    let seen = recv(&mut rx).await;
    let Harness {
        engine,
        clock,
        store,
        _dir,
        ..
    } = h;
    let stopping = tokio::spawn(engine.unwrap().shutdown(Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !stopping.is_finished(),
        "shutdown waits for the running attempt"
    );
    clock.set(ts("2026-11-30T09:00:10Z"));
    tokio::time::timeout(Duration::from_secs(5), stopping)
        .await
        .expect("shutdown ends after the grace")
        .unwrap();
    let run = store.get_run(seen.run).await.unwrap().unwrap();
    assert_eq!(
        (run.status, run.trigger, run.lease_owner),
        (RunStatus::Queued, Trigger::Recovery, None)
    );
    assert_eq!(store.runs_of_task(task.id, 10).await.unwrap().len(), 1);
}

/// Fires at 09:00, then the node is down until 12:30 (10:00, 11:00 and 12:00
/// are missed); a fresh engine on the same database applies the policy.
async fn downtime(misfire: serde_json::Value) -> Vec<(RunStatus, Trigger, jiff::Timestamp, i64)> {
    let (handlers, mut rx) = reporting(|_| Ok(()));
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let mut spec = every_minute("report", serde_json::json!({"misfire": misfire}));
    spec["schedule"] = serde_json::json!({"cron": "0 * * * *"});
    let task = h.create(spec).await;
    h.set("2026-11-30T09:00:00Z");
    recv(&mut rx).await;
    h.until(&task, "the 09:00 run succeeds", |r| {
        r.first().is_some_and(|r| r.status == RunStatus::Succeeded)
    })
    .await;
    let Harness {
        engine,
        store,
        _dir,
        ..
    } = h;
    engine.unwrap().shutdown(Duration::from_secs(1)).await;
    // Back up at 12:30.
    let (handlers, mut rx) = reporting(|_| Ok(()));
    let clock = Arc::new(ManualClock::new(ts("2026-11-30T12:30:00Z")));
    let engine = Engine::start(store.clone(), clock.clone(), config(), handlers).unwrap();
    let h = Harness {
        engine: Some(engine),
        store,
        clock,
        _dir,
    };
    let policy = misfire["policy"].as_str().unwrap_or("once").to_string();
    let expected_runs = match policy.as_str() {
        "skip" => 2,
        "once" => 3,
        _ => 4,
    };
    let runs = h
        .until(&task, "the misfires are recorded and catch-ups done", |r| {
            r.len() == expected_runs && r.iter().all(|r| r.status.is_terminal())
        })
        .await;
    // Catch-up runs executed; nothing else did.
    let caught = runs
        .iter()
        .filter(|r| r.trigger == Trigger::Catchup)
        .count();
    for _ in 0..caught {
        recv(&mut rx).await;
    }
    let t = h.store.get_task(task.id).await.unwrap().unwrap();
    assert_eq!(
        t.next_fire_at,
        Some(ts("2026-11-30T13:00:00Z")),
        "the schedule continues after now"
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
    runs.iter()
        .map(|r| (r.status, r.trigger, r.scheduled_for, r.fire_count))
        .collect()
}

#[tokio::test]
async fn downtime_with_misfire_skip_records_the_missed_fires_as_one_row() {
    assert_eq!(
        downtime(serde_json::json!({"policy": "skip", "grace": "1m"})).await,
        [
            (
                RunStatus::Succeeded,
                Trigger::Schedule,
                ts("2026-11-30T09:00:00Z"),
                1
            ),
            (
                RunStatus::Missed,
                Trigger::Schedule,
                ts("2026-11-30T10:00:00Z"),
                3
            ),
        ]
    );
}

#[tokio::test]
async fn downtime_with_misfire_once_runs_the_latest_missed_fire() {
    assert_eq!(
        downtime(serde_json::json!({"policy": "once", "grace": "1m"})).await,
        [
            (
                RunStatus::Succeeded,
                Trigger::Schedule,
                ts("2026-11-30T09:00:00Z"),
                1
            ),
            (
                RunStatus::Missed,
                Trigger::Schedule,
                ts("2026-11-30T10:00:00Z"),
                2
            ),
            (
                RunStatus::Succeeded,
                Trigger::Catchup,
                ts("2026-11-30T12:00:00Z"),
                1
            ),
        ]
    );
}

#[tokio::test]
async fn downtime_with_misfire_all_catches_up_to_the_limit() {
    assert_eq!(
        downtime(serde_json::json!({"policy": "all", "grace": "1m", "max_catchup": 2})).await,
        [
            (
                RunStatus::Succeeded,
                Trigger::Schedule,
                ts("2026-11-30T09:00:00Z"),
                1
            ),
            (
                RunStatus::Missed,
                Trigger::Schedule,
                ts("2026-11-30T10:00:00Z"),
                1
            ),
            (
                RunStatus::Succeeded,
                Trigger::Catchup,
                ts("2026-11-30T11:00:00Z"),
                1
            ),
            (
                RunStatus::Succeeded,
                Trigger::Catchup,
                ts("2026-11-30T12:00:00Z"),
                1
            ),
        ]
    );
}

#[tokio::test]
async fn overlap_queue_starts_the_next_fire_when_the_previous_ends() {
    let (handlers, mut rx, release) = holding();
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute(
            "hold",
            serde_json::json!({"overlap": "queue"}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    let first = recv(&mut rx).await;
    h.set("2026-11-30T09:01:00Z");
    // The 09:01 fire is recorded and waits; it does not start, and is not skipped.
    let runs = h
        .until(&task, "the second fire waits", |r| {
            r.len() == 2 && r[1].status == RunStatus::Queued
        })
        .await;
    assert_eq!(runs[1].attempt, 0, "waiting uses up no attempt");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv())
            .await
            .is_err(),
        "started while the first ran"
    );
    release.notify_one();
    let second = recv(&mut rx).await;
    assert_ne!(second.run, first.run);
    assert_eq!(
        (second.scheduled_for, second.attempt),
        (ts("2026-11-30T09:01:00Z"), 1)
    );
    release.notify_one();
    h.until(&task, "both succeed", |r| {
        r.len() == 2 && r.iter().all(|r| r.status == RunStatus::Succeeded)
    })
    .await;
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn overlap_replace_cancels_the_running_one_and_starts_the_new_fire() {
    let (handlers, mut rx, release) = holding();
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute(
            "hold",
            serde_json::json!({"overlap": "replace"}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    recv(&mut rx).await;
    h.set("2026-11-30T09:01:00Z");
    let second = recv(&mut rx).await;
    assert_eq!(second.scheduled_for, ts("2026-11-30T09:01:00Z"));
    let runs = h
        .until(&task, "the first is cancelled", |r| {
            r.len() == 2 && r[0].status == RunStatus::Cancelled
        })
        .await;
    assert!(
        runs[0]
            .error
            .as_deref()
            .unwrap()
            .contains("replaced by the fire of 2026-11-30T09:01:00Z")
    );
    assert_eq!(runs[1].status, RunStatus::Running);
    release.notify_one();
    h.until(&task, "the new fire succeeds", |r| {
        r[1].status == RunStatus::Succeeded
    })
    .await;
    assert_eq!(
        h.runs(&task).await[0].status,
        RunStatus::Cancelled,
        "the cancelled run stays cancelled"
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn cancelling_a_running_run_stops_it_and_records_why() {
    let (handlers, mut rx, _release) = holding();
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute(
            "hold",
            serde_json::json!({"retry": {"max_attempts": 3}}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    let seen = recv(&mut rx).await;
    assert!(
        h.engine
            .as_ref()
            .unwrap()
            .cancel_run(seen.run, "cancelled by a user")
            .await
            .unwrap()
    );
    let runs = h
        .until(&task, "the run is cancelled", |r| {
            r[0].status == RunStatus::Cancelled
        })
        .await;
    assert_eq!(runs[0].error.as_deref(), Some("cancelled by a user"));
    // The attempt has stopped: the node has no attempt executing, and nothing retries it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while h.engine.as_ref().unwrap().executing() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the attempt kept running"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(h.runs(&task).await[0].status, RunStatus::Cancelled);
    assert!(
        !h.engine
            .as_ref()
            .unwrap()
            .cancel_run(seen.run, "again")
            .await
            .unwrap(),
        "a finished run is not cancellable"
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_idle_engine_makes_no_database_queries() {
    let (handlers, _rx) = reporting(|_| Ok(()));
    let h = Harness::start(ts("2026-11-30T08:00:00Z"), handlers).await;
    let mut spec = every_minute("report", serde_json::json!({}));
    spec["schedule"] = serde_json::json!({"cron": "0 9 * * *"});
    h.create(spec).await;
    // Let the loops settle after start.
    let mut last = h.store.operations();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = h.store.operations();
        if now == last {
            break;
        }
        last = now;
    }
    // Nearly an hour passes with nothing due: no loop looks at the database.
    for minute in 1..=58 {
        h.clock
            .set(ts("2026-11-30T08:00:00Z") + jiff::SignedDuration::from_mins(minute));
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.store.operations(), last, "queries while nothing was due");
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_pause_is_recorded_as_events_and_its_fires_do_not_run() {
    let (handlers, mut rx) = reporting(|_| Ok(()));
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute("report", serde_json::json!({})))
        .await;
    h.set("2026-11-30T09:00:00Z");
    recv(&mut rx).await;
    // Just before 09:01 the planner has recorded that fire ahead of time.
    h.set("2026-11-30T09:00:59.5Z");
    h.until(&task, "09:01 is planned ahead", |r| r.len() == 2)
        .await;
    let engine = h.engine.as_ref().unwrap();
    assert!(engine.pause(task.id).await.unwrap());
    assert!(!engine.pause(task.id).await.unwrap(), "already paused");
    assert_eq!(
        h.runs(&task).await.len(),
        1,
        "the fire planned inside the pause is removed"
    );
    for t in [
        "2026-11-30T09:01:00Z",
        "2026-11-30T09:03:00Z",
        "2026-11-30T09:05:30Z",
    ] {
        h.set(t);
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv())
            .await
            .is_err(),
        "a paused task fired"
    );
    assert!(engine.resume(task.id).await.unwrap());
    let events = h.store.task_events(task.id).await.unwrap();
    let kinds: Vec<_> = events.iter().map(|e| (e.kind.as_str(), e.at)).collect();
    assert_eq!(
        kinds,
        [
            ("paused", ts("2026-11-30T09:00:59.5Z")),
            ("resumed", ts("2026-11-30T09:05:30Z"))
        ]
    );
    assert_eq!(
        events[1].detail.as_ref().unwrap()["fires_skipped"],
        5,
        "09:01 through 09:05"
    );
    h.set("2026-11-30T09:06:00Z");
    assert_eq!(
        recv(&mut rx).await.scheduled_for,
        ts("2026-11-30T09:06:00Z"),
        "resumed from now on"
    );
    assert_eq!(h.runs(&task).await.len(), 2, "no rows for the paused fires");
    let nodes = h.store.nodes().await.unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!((nodes[0].id.as_str(), nodes[0].skew_ms), ("test-node", 0));
    assert_eq!(nodes[0].started_at, ts("2026-11-30T08:59:50Z"));
    assert!(
        nodes[0].heartbeat_at >= ts("2026-11-30T09:00:00Z"),
        "claims refresh the heartbeat"
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn overlap_allow_runs_fires_side_by_side() {
    let (handlers, mut rx, release) = holding();
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), handlers).await;
    let task = h
        .create(every_minute(
            "hold",
            serde_json::json!({"overlap": "allow"}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    recv(&mut rx).await;
    h.set("2026-11-30T09:01:00Z");
    assert_eq!(
        recv(&mut rx).await.scheduled_for,
        ts("2026-11-30T09:01:00Z"),
        "started while the first runs"
    );
    let runs = h.runs(&task).await;
    assert!(
        runs.iter().all(|r| r.status == RunStatus::Running),
        "{runs:?}"
    );
    release.notify_waiters();
    h.until(&task, "both succeed", |r| {
        r.len() == 2 && r.iter().all(|r| r.status == RunStatus::Succeeded)
    })
    .await;
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}
