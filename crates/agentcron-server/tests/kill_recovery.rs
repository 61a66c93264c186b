//! Crash recovery with real processes: `agentcron serve` is killed with
//! SIGKILL while its HTTP call hangs; a fresh process recovers the run — the
//! same run, the same idempotency key, a higher fence — and the run is in the
//! ledger exactly once.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentcron_testkit::http::{Reply, TestServer, ok};

/// Starts `agentcron serve`; its log goes to `serve.log` beside the config.
fn serve(config: &std::path::Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(config.with_file_name("serve.log"))
        .expect("log file");
    Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["serve", "--config"])
        .arg(config)
        .env_remove("AGENTCRON_DATABASE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("agentcron starts")
}

#[tokio::test]
async fn a_killed_node_s_run_is_recovered_once_with_the_same_key() {
    let mut server = TestServer::start(vec![Reply::Hang, ok(r#"{"done": true}"#)]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("agentcron.db");
    let fire = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1);
    let config = dir.path().join("agentcron.toml");
    std::fs::write(
        &config,
        format!(
            r#"
            database = "sqlite://{db}"
            lease = "2s"
            shutdown_grace = "1s"

            [[task]]
            name = "agent-call"
            schedule = {{ once = "{fire}" }}
            action = {{ type = "http", url = "{url}/agent", body = {{ q = "hello" }} }}
            retry = {{ max_attempts = 3 }}
            "#,
            db = db.display(),
            url = server.url,
        ),
    )
    .expect("config written");

    let mut first = serve(&config);
    let hung = server.next().await;
    assert_eq!(
        (
            hung.headers["x-agentcron-attempt"].as_str(),
            hung.headers["x-agentcron-fence"].as_str()
        ),
        ("1", "1")
    );
    first.kill().expect("SIGKILL");
    first.wait().expect("reaped");

    let mut second = serve(&config);
    let retried = server.next().await;
    assert_eq!(
        retried.headers["idempotency-key"], hung.headers["idempotency-key"],
        "same run, same key"
    );
    assert_eq!(
        (
            retried.headers["x-agentcron-attempt"].as_str(),
            retried.headers["x-agentcron-fence"].as_str()
        ),
        ("2", "2")
    );
    assert_eq!(retried.body, r#"{"q":"hello"}"#);

    // Let the outcome be recorded, then stop the node gracefully.
    let store = agentcron::store::SqliteStore::open(&format!("sqlite://{}", db.display()))
        .await
        .expect("db opens");
    let run_id: agentcron::RunId = hung.headers["idempotency-key"].parse().expect("a run id");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let run = loop {
        use agentcron::store::Store as _;
        let run = store
            .get_run(run_id)
            .await
            .expect("query")
            .expect("the run exists");
        if run.status == agentcron::RunStatus::Succeeded {
            break run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run never succeeded: {run:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (run.trigger, run.attempt, run.fence),
        (agentcron::Trigger::Recovery, 2, 2)
    );
    assert_eq!(run.result, Some(serde_json::json!({"done": true})));
    let task = {
        use agentcron::store::Store as _;
        store
            .get_task_by_name("agent-call")
            .await
            .expect("query")
            .expect("task")
    };
    let runs = {
        use agentcron::store::Store as _;
        store.runs_of_task(task.id, 10).await.expect("query")
    };
    assert_eq!(runs.len(), 1, "the fire is in the ledger exactly once");
    assert_eq!(task.state, agentcron::TaskState::Completed);

    let pid = second.id().to_string();
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    let status = second.wait().expect("exits");
    assert!(status.success(), "graceful stop exits 0, got {status}");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), server.requests.recv())
            .await
            .is_err(),
        "no third call"
    );
}
