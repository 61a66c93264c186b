//! The planner's decision, on its own: which fires run, which are recorded
//! as missed, and where the schedule continues.

use agentcron::engine::planner::plan_task;
use agentcron::{CompiledSchedule, RunStatus, Task, TaskId, TaskSpec, TaskState, Trigger};
use jiff::{Timestamp, ToSpan};

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn task(
    schedule: serde_json::Value,
    misfire: serde_json::Value,
    next: &str,
) -> (Task, CompiledSchedule) {
    let spec: TaskSpec = serde_json::from_value(serde_json::json!({
        "name": "t",
        "schedule": schedule,
        "action": {"type": "handler", "name": "noop"},
        "misfire": misfire,
    }))
    .expect("valid");
    let compiled = spec.validate("t").expect("valid");
    let task = Task {
        id: TaskId::new(),
        spec,
        state: TaskState::Active,
        next_fire_at: Some(ts(next)),
        version: 1,
        created_at: ts("2026-01-01T00:00:00Z"),
        updated_at: ts("2026-01-01T00:00:00Z"),
    };
    (task, compiled)
}

#[test]
fn an_on_time_fire_is_queued_and_the_schedule_moves_on() {
    let (t, s) = task(
        serde_json::json!({"cron": "*/5 * * * *"}),
        serde_json::json!({}),
        "2026-11-30T09:00:00Z",
    );
    let plan = plan_task(
        &t,
        &s,
        ts("2026-11-30T09:00:00.2Z"),
        ts("2026-11-30T09:00:00.2Z"),
    );
    assert_eq!(plan.runs.len(), 1);
    let r = &plan.runs[0];
    assert_eq!(
        (r.status, r.trigger, r.scheduled_for),
        (
            RunStatus::Queued,
            Trigger::Schedule,
            ts("2026-11-30T09:00:00Z")
        )
    );
    assert_eq!(
        r.run_at,
        ts("2026-11-30T09:00:00.2Z"),
        "runs now, not in the past"
    );
    assert_eq!(plan.next_fire_at, Some(ts("2026-11-30T09:05:00Z")));
    assert_eq!(plan.state, TaskState::Active);
}

#[test]
fn fires_within_grace_all_run_even_after_a_short_gap() {
    let (t, s) = task(
        serde_json::json!({"cron": "* * * * *"}),
        serde_json::json!({"grace": "10m"}),
        "2026-11-30T09:00:00Z",
    );
    let plan = plan_task(
        &t,
        &s,
        ts("2026-11-30T09:03:30Z"),
        ts("2026-11-30T09:03:30Z"),
    );
    let fires: Vec<_> = plan
        .runs
        .iter()
        .map(|r| (r.status, r.scheduled_for))
        .collect();
    assert_eq!(
        fires,
        [
            (RunStatus::Queued, ts("2026-11-30T09:00:00Z")),
            (RunStatus::Queued, ts("2026-11-30T09:01:00Z")),
            (RunStatus::Queued, ts("2026-11-30T09:02:00Z")),
            (RunStatus::Queued, ts("2026-11-30T09:03:00Z")),
        ]
    );
    assert_eq!(plan.next_fire_at, Some(ts("2026-11-30T09:04:00Z")));
}

#[test]
fn downtime_with_policy_skip_records_one_missed_stretch() {
    let (t, s) = task(
        serde_json::json!({"cron": "0 * * * *"}),
        serde_json::json!({"policy": "skip", "grace": "1m"}),
        "2026-11-30T01:00:00Z",
    );
    let plan = plan_task(
        &t,
        &s,
        ts("2026-11-30T09:30:00Z"),
        ts("2026-11-30T09:30:00Z"),
    );
    assert_eq!(plan.runs.len(), 1);
    let m = &plan.runs[0];
    assert_eq!(m.status, RunStatus::Missed);
    assert_eq!(
        (m.scheduled_for, m.last_scheduled_for, m.fire_count),
        (
            ts("2026-11-30T01:00:00Z"),
            Some(ts("2026-11-30T09:00:00Z")),
            9
        )
    );
    assert_eq!(
        m.error.as_deref(),
        Some("missed: 9 fires were later than the misfire grace of 1m (policy `skip`)")
    );
    assert_eq!(plan.next_fire_at, Some(ts("2026-11-30T10:00:00Z")));
}

#[test]
fn downtime_with_policy_once_catches_up_the_latest_fire() {
    let (t, s) = task(
        serde_json::json!({"cron": "0 * * * *"}),
        serde_json::json!({"policy": "once", "grace": "1m"}),
        "2026-11-30T01:00:00Z",
    );
    let plan = plan_task(
        &t,
        &s,
        ts("2026-11-30T09:30:00Z"),
        ts("2026-11-30T09:30:00Z"),
    );
    let rows: Vec<_> = plan
        .runs
        .iter()
        .map(|r| (r.status, r.trigger, r.scheduled_for, r.fire_count))
        .collect();
    assert_eq!(
        rows,
        [
            (
                RunStatus::Missed,
                Trigger::Schedule,
                ts("2026-11-30T01:00:00Z"),
                8
            ),
            (
                RunStatus::Queued,
                Trigger::Catchup,
                ts("2026-11-30T09:00:00Z"),
                1
            ),
        ]
    );
}

#[test]
fn policy_once_runs_no_catch_up_when_a_fire_is_on_time() {
    let (t, s) = task(
        serde_json::json!({"cron": "*/30 * * * *"}),
        serde_json::json!({"policy": "once", "grace": "1m"}),
        "2026-11-30T08:00:00Z",
    );
    let plan = plan_task(
        &t,
        &s,
        ts("2026-11-30T09:00:30Z"),
        ts("2026-11-30T09:00:30Z"),
    );
    let rows: Vec<_> = plan
        .runs
        .iter()
        .map(|r| (r.status, r.trigger, r.scheduled_for))
        .collect();
    assert_eq!(
        rows,
        [
            (
                RunStatus::Missed,
                Trigger::Schedule,
                ts("2026-11-30T08:00:00Z")
            ),
            (
                RunStatus::Queued,
                Trigger::Schedule,
                ts("2026-11-30T09:00:00Z")
            ),
        ]
    );
}

#[test]
fn downtime_with_policy_all_catches_up_to_max_catchup() {
    let (t, s) = task(
        serde_json::json!({"cron": "0 * * * *"}),
        serde_json::json!({"policy": "all", "grace": "1m", "max_catchup": 3}),
        "2026-11-30T01:00:00Z",
    );
    let plan = plan_task(
        &t,
        &s,
        ts("2026-11-30T09:30:00Z"),
        ts("2026-11-30T09:30:00Z"),
    );
    let rows: Vec<_> = plan
        .runs
        .iter()
        .map(|r| (r.status, r.trigger, r.scheduled_for, r.fire_count))
        .collect();
    assert_eq!(
        rows,
        [
            (
                RunStatus::Missed,
                Trigger::Schedule,
                ts("2026-11-30T01:00:00Z"),
                6
            ),
            (
                RunStatus::Queued,
                Trigger::Catchup,
                ts("2026-11-30T07:00:00Z"),
                1
            ),
            (
                RunStatus::Queued,
                Trigger::Catchup,
                ts("2026-11-30T08:00:00Z"),
                1
            ),
            (
                RunStatus::Queued,
                Trigger::Catchup,
                ts("2026-11-30T09:00:00Z"),
                1
            ),
        ]
    );
}

#[test]
fn a_week_down_under_an_every_second_task_is_one_row() {
    let (t, s) = task(
        serde_json::json!({"every": "1s"}),
        serde_json::json!({"policy": "skip", "grace": "5s"}),
        "2026-11-23T00:00:00Z",
    );
    let now = ts("2026-11-30T00:00:00Z");
    let plan = plan_task(&t, &s, now, now);
    let missed = &plan.runs[0];
    assert_eq!(missed.status, RunStatus::Missed);
    assert_eq!(
        missed.fire_count,
        7 * 86_400 - 5,
        "every fire older than the grace"
    );
    assert_eq!(missed.last_scheduled_for, Some(now - 6.seconds()));
    // The five fires within grace, and the one at `now`, still run.
    assert_eq!(plan.runs.len(), 1 + 6);
    assert!(plan.runs[1..].iter().all(|r| r.status == RunStatus::Queued));
    assert_eq!(plan.next_fire_at, Some(now + 1.second()));
}

#[test]
fn a_once_task_completes_after_its_fire() {
    let (t, s) = task(
        serde_json::json!({"once": "2026-12-01T09:00:00+08:00"}),
        serde_json::json!({}),
        "2026-12-01T01:00:00Z",
    );
    let plan = plan_task(
        &t,
        &s,
        ts("2026-12-01T01:00:00Z"),
        ts("2026-12-01T01:00:00Z"),
    );
    assert_eq!(plan.runs.len(), 1);
    assert_eq!(
        (plan.next_fire_at, plan.state),
        (None, TaskState::Completed)
    );
}

#[test]
fn fires_within_the_look_ahead_are_queued_for_their_own_time() {
    let (t, s) = task(
        serde_json::json!({"cron": "* * * * * *"}),
        serde_json::json!({}),
        "2026-11-30T09:00:00Z",
    );
    let now = ts("2026-11-30T08:59:59.2Z");
    let plan = plan_task(&t, &s, now, now + jiff::SignedDuration::from_secs(1));
    let rows: Vec<_> = plan
        .runs
        .iter()
        .map(|r| (r.status, r.scheduled_for, r.run_at))
        .collect();
    assert_eq!(
        rows,
        [(
            RunStatus::Queued,
            ts("2026-11-30T09:00:00Z"),
            ts("2026-11-30T09:00:00Z")
        )],
        "run_at is the fire time, not now"
    );
    assert_eq!(plan.next_fire_at, Some(ts("2026-11-30T09:00:01Z")));
}
