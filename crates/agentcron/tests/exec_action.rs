//! The `exec` action with real child processes: stdin, environment, results,
//! failures, the process group killed on timeout, and the off switch.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use agentcron::{EngineConfig, Handlers, RunStatus};
use support::*;

fn exec_config() -> EngineConfig {
    EngineConfig {
        exec_enabled: true,
        ..config()
    }
}

fn exec_task(script: &str, extra: serde_json::Value) -> serde_json::Value {
    merged(
        serde_json::json!({
            "name": "script",
            "schedule": {"cron": "* * * * *"},
            "action": {"type": "exec", "command": ["sh", "-c", script], "env": {"GREETING": "hello"}},
        }),
        extra,
    )
}

#[tokio::test]
async fn a_program_gets_context_on_stdin_and_env_and_its_stdout_is_the_result() {
    let h = Harness::start_with(ts("2026-11-30T08:59:50Z"), Handlers::new(), exec_config()).await;
    let script = r#"input=$(cat); printf '{"greeting":"%s","attempt":"%s","stdin_has_run":%s}\n' "$GREETING" "$AGENTCRON_ATTEMPT" "$(echo "$input" | grep -q "$AGENTCRON_RUN_ID" && echo true || echo false)"; echo warn >&2"#;
    let task = h.create(exec_task(script, serde_json::json!({}))).await;
    h.set("2026-11-30T09:00:00Z");
    let runs = h
        .until(&task, "the program succeeds", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Succeeded)
        })
        .await;
    assert_eq!(
        runs[0].result,
        Some(serde_json::json!({"greeting": "hello", "attempt": "1", "stdin_has_run": true}))
    );
    let output = runs[0].output.as_deref().unwrap();
    assert!(output.contains("--- stderr ---\nwarn"), "{output}");
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_non_zero_exit_fails_with_the_stderr_tail_and_is_retried() {
    let h = Harness::start_with(ts("2026-11-30T08:59:50Z"), Handlers::new(), exec_config()).await;
    let task = h
        .create(exec_task(
            "echo 'database locked' >&2; exit 3",
            serde_json::json!({"retry": {"max_attempts": 2}}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    let runs = h
        .until(&task, "the first attempt is retrying", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Retrying)
        })
        .await;
    assert_eq!(
        runs[0].error.as_deref(),
        Some("`sh` exited with status 3: database locked")
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_missing_program_fails_without_retry() {
    let h = Harness::start_with(ts("2026-11-30T08:59:50Z"), Handlers::new(), exec_config()).await;
    let mut spec = exec_task("", serde_json::json!({"retry": {"max_attempts": 3}}));
    spec["action"]["command"] = serde_json::json!(["/nonexistent/agent-binary"]);
    let task = h.create(spec).await;
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
            .starts_with("cannot start `/nonexistent/agent-binary`"),
        "{:?}",
        runs[0].error
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

fn alive(pid: i32) -> bool {
    // A zombie still has a /proc entry; its state letter is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let h = Harness::start_with(ts("2026-11-30T08:59:50Z"), Handlers::new(), exec_config()).await;
    let script = format!("sleep 1000 & echo $! > {}; wait", pidfile.display());
    let task = h
        .create(exec_task(&script, serde_json::json!({"timeout": "5s"})))
        .await;
    h.set("2026-11-30T09:00:00Z");
    // Wait for the grandchild to exist.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let pid: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the script never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(alive(pid));
    h.set("2026-11-30T09:00:05Z");
    let runs = h
        .until(&task, "the run times out", |r| {
            r[0].status == RunStatus::TimedOut
        })
        .await;
    assert_eq!(runs[0].error.as_deref(), Some("timed out after 5s"));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "grandchild {pid} survived the timeout"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn exec_is_off_unless_enabled_and_the_error_says_how_to_enable_it() {
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let task = h
        .create(exec_task(
            "echo hi",
            serde_json::json!({"retry": {"max_attempts": 3}}),
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
            .contains("AGENTCRON_EXEC_ENABLED=true"),
        "{:?}",
        runs[0].error
    );
    h.engine.unwrap().shutdown(Duration::from_secs(1)).await;
}
