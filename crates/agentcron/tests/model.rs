//! Task definitions: the JSON users send, validation that names the field,
//! and compiled schedules.

use agentcron::{ActionSpec, CompiledSchedule, OverlapPolicy, ScheduleSpec, TaskSpec};
use jiff::Timestamp;

fn spec(json: serde_json::Value) -> TaskSpec {
    serde_json::from_value(json).expect("valid task JSON")
}

fn base() -> serde_json::Value {
    serde_json::json!({
        "name": "daily-report",
        "schedule": {"cron": "0 9 * * 1-5", "timezone": "Asia/Shanghai"},
        "action": {"type": "http", "method": "POST", "url": "http://127.0.0.1:9000/agent",
                   "headers": {"X-Team": "sales"}, "body": {"question": "yesterday's sales"}},
        "retry": {"max_attempts": 3, "backoff": {"initial": "2s", "max": "5m"}},
        "timeout": "30s", "overlap": "forbid",
        "misfire": {"policy": "once", "grace": "10m"},
        "labels": {"team": "sales"}
    })
}

fn with(path: &[&str], value: serde_json::Value) -> serde_json::Value {
    let mut doc = base();
    let mut cur = &mut doc;
    for key in &path[..path.len() - 1] {
        cur = cur.get_mut(*key).expect("path exists");
    }
    cur[path[path.len() - 1]] = value;
    doc
}

#[test]
fn the_documented_example_parses_and_round_trips() {
    let s = spec(base());
    assert_eq!(s.retry.max_attempts, 3);
    assert_eq!(s.retry.backoff.initial.to_string(), "2s");
    assert_eq!(
        s.retry.backoff.multiplier, 2.0,
        "unspecified backoff fields keep defaults"
    );
    assert_eq!(s.overlap, OverlapPolicy::Forbid);
    assert!(
        matches!(&s.schedule, ScheduleSpec::Cron { timezone, .. } if timezone == "Asia/Shanghai")
    );
    assert!(
        matches!(&s.action, ActionSpec::Http { url, .. } if url == "http://127.0.0.1:9000/agent")
    );
    s.validate("id").expect("valid");
    let again: TaskSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(again, s);
}

#[test]
fn every_schedule_and_action_form() {
    for schedule in [
        serde_json::json!({"every": "25m"}),
        serde_json::json!({"once": "2026-12-01T09:00:00+08:00"}),
        serde_json::json!({"manual": true}),
        serde_json::json!({"cron": "*/5 * * * *"}),
        serde_json::json!({"cron": "30 2 * * *", "timezone": "America/New_York", "dst": {"gap": "skip", "fold": "twice"}}),
    ] {
        let s = spec(with(&["schedule"], schedule.clone()));
        s.validate("id")
            .unwrap_or_else(|e| panic!("{schedule}: {e}"));
        let again: TaskSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(again, s);
    }
    for action in [
        serde_json::json!({"type": "exec", "command": ["python3", "agent.py"]}),
        serde_json::json!({"type": "handler", "name": "generate_daily_report"}),
    ] {
        spec(with(&["action"], action))
            .validate("id")
            .expect("valid");
    }
}

#[test]
fn malformed_json_is_rejected_with_the_reason() {
    for (doc, needle) in [
        (
            with(
                &["schedule"],
                serde_json::json!({"cron": "* * * * *", "every": "5m"}),
            ),
            "exactly one of `cron`, `every`, `once` or `manual`",
        ),
        (
            with(
                &["schedule"],
                serde_json::json!({"every": "5m", "timezone": "UTC"}),
            ),
            "`timezone` and `dst` belong to a `cron` schedule",
        ),
        (
            with(&["schedule"], serde_json::json!({"manual": false})),
            "`manual` must be true",
        ),
        (
            with(&["timeout"], serde_json::json!("30 seconds")),
            "invalid duration `30 seconds`",
        ),
        (
            with(&["overlap"], serde_json::json!("sometimes")),
            "unknown variant `sometimes`",
        ),
        (
            with(&["action", "type"], serde_json::json!("carrier-pigeon")),
            "unknown variant `carrier-pigeon`",
        ),
        (
            with(&["colour"], serde_json::json!("blue")),
            "unknown field `colour`",
        ),
    ] {
        let err = serde_json::from_value::<TaskSpec>(doc)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn validation_names_the_field() {
    for (doc, expected) in [
        (
            with(&["name"], serde_json::json!("daily report!")),
            "name: must be 1-128 characters of letters, digits, `-`, `_` and `.`",
        ),
        (
            with(&["schedule"], serde_json::json!({"cron": "0 25 * * *"})),
            "schedule.cron: hour field: 25 is out of range 0-23 (column 3)",
        ),
        (
            with(
                &["schedule"],
                serde_json::json!({"cron": "0 9 * * *", "timezone": "Mars/Base"}),
            ),
            "schedule.timezone: unknown time zone `Mars/Base`",
        ),
        (
            with(&["schedule"], serde_json::json!({"every": "500ms"})),
            "schedule.every: must be at least 1s",
        ),
        (
            with(
                &["action", "url"],
                serde_json::json!("ftp://example.invalid/x"),
            ),
            "action.url: `ftp://example.invalid/x` is not an http:// or https:// URL with a host",
        ),
        (
            with(&["action", "method"], serde_json::json!("FETCH")),
            "action.method: `FETCH` is not one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS",
        ),
        (
            with(
                &["action"],
                serde_json::json!({"type": "exec", "command": []}),
            ),
            "action.command: needs at least the program",
        ),
        (
            with(&["retry", "max_attempts"], serde_json::json!(0)),
            "retry.max_attempts: must be 1-100 (1 means no retry)",
        ),
        (
            with(&["retry", "backoff", "initial"], serde_json::json!("10m")),
            "retry.backoff.initial: must not exceed retry.backoff.max",
        ),
        (
            with(&["timeout"], serde_json::json!("0s")),
            "timeout: must be positive (omit it for no limit)",
        ),
        (
            with(&["timeout"], serde_json::json!("729580671d17h")),
            "timeout: at most 30d",
        ),
        (
            with(&["retry", "backoff"], serde_json::json!({"max": "31d"})),
            "retry.backoff.max: at most 30d",
        ),
        (
            with(&["misfire", "grace"], serde_json::json!("366d")),
            "misfire.grace: at most 365d",
        ),
    ] {
        let err = spec(doc).validate("id").unwrap_err().to_string();
        assert!(err.starts_with(expected), "{err}\n  expected: {expected}");
    }
}

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

#[test]
fn compiled_schedules_answer_next_fire() {
    let cron = CompiledSchedule::compile(&spec(base()).schedule, "id").unwrap();
    // Friday 2026-11-27 10:00 in Shanghai: next is Monday 09:00 +08:00.
    assert_eq!(
        cron.next_after(ts("2026-11-27T02:00:00Z")),
        Some(ts("2026-11-30T01:00:00Z"))
    );
    let every = CompiledSchedule::compile(
        &ScheduleSpec::Every {
            interval: "25m".parse().unwrap(),
            anchor: None,
        },
        "id",
    )
    .unwrap();
    assert_eq!(
        every.next_after(ts("2026-01-01T00:00:00Z")),
        Some(ts("2026-01-01T00:15:00Z"))
    );
    let once = CompiledSchedule::compile(
        &ScheduleSpec::Once {
            at: ts("2026-12-01T01:00:00Z"),
        },
        "id",
    )
    .unwrap();
    assert_eq!(
        once.next_after(ts("2026-11-30T00:00:00Z")),
        Some(ts("2026-12-01T01:00:00Z"))
    );
    assert_eq!(once.next_after(ts("2026-12-01T01:00:00Z")), None);
    let manual = CompiledSchedule::compile(&ScheduleSpec::Manual, "id").unwrap();
    assert_eq!(manual.next_after(ts("2026-11-30T00:00:00Z")), None);
}

#[test]
fn hash_key_spreads_h_schedules() {
    let s = |key: &str| {
        CompiledSchedule::compile(
            &ScheduleSpec::Cron {
                expr: "H 9 * * *".into(),
                timezone: "UTC".into(),
                dst: Default::default(),
            },
            key,
        )
        .unwrap()
        .next_after(ts("2026-01-01T00:00:00Z"))
        .unwrap()
    };
    assert_eq!(s("a"), s("a"));
    let distinct: std::collections::BTreeSet<_> =
        (0..50).map(|i| s(&format!("task-{i}"))).collect();
    assert!(distinct.len() > 20);
}
