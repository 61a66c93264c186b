//! The `http` action against a real HTTP server on 127.0.0.1: headers,
//! templated bodies, results, capped bodies, and which statuses retry.

#![allow(clippy::unwrap_used)]

mod support;

use agentcron::{Handlers, RunStatus};
use agentcron_testkit::http::{Reply, TestServer, ok, status};
use support::*;

fn http_task(url: &str, extra: serde_json::Value) -> serde_json::Value {
    merged(
        serde_json::json!({
            "name": "agent-call",
            "schedule": {"cron": "* * * * *"},
            "action": {"type": "http", "method": "POST", "url": format!("{url}/agent"),
                       "headers": {"X-Team": "sales"},
                       "body": {"question": "sales before {{ run.scheduled_for }}", "task": "{{ task.name }}", "n": 3}},
        }),
        extra,
    )
}

#[tokio::test]
async fn sends_identity_headers_and_a_rendered_body_and_keeps_the_result() {
    let mut server = TestServer::start(vec![ok(r#"{"answer": "up 3%"}"#)]).await;
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let task = h
        .create(http_task(&server.url, serde_json::json!({})))
        .await;
    h.set("2026-11-30T09:00:00Z");
    let req = server.next().await;
    let runs = h
        .until(&task, "the run succeeds", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Succeeded)
        })
        .await;
    let run = &runs[0];
    assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/agent"));
    assert_eq!(req.headers["idempotency-key"], run.id.to_string());
    assert_eq!(req.headers["x-agentcron-run"], run.id.to_string());
    assert_eq!(req.headers["x-agentcron-attempt"], "1");
    assert_eq!(req.headers["x-agentcron-fence"], "1");
    assert_eq!(req.headers["x-team"], "sales");
    assert_eq!(req.headers["content-type"], "application/json");
    assert_eq!(
        req.headers["traceparent"],
        format!("00-{}-0000000000000001-01", run.id.0.simple())
    );
    let body: serde_json::Value = serde_json::from_str(&req.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"question": "sales before 2026-11-30T09:00:00Z", "task": "agent-call", "n": 3})
    );
    assert_eq!(run.result, Some(serde_json::json!({"answer": "up 3%"})));
    h.engine
        .unwrap()
        .shutdown(std::time::Duration::from_secs(1))
        .await;
}

#[tokio::test]
async fn server_errors_retry_honouring_retry_after_and_client_errors_do_not() {
    let mut server =
        TestServer::start(vec![status(503, &[("Retry-After", "20")]), ok("fine")]).await;
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let task = h
        .create(http_task(&server.url, serde_json::json!({"retry": {"max_attempts": 3, "backoff": {"initial": "1s", "jitter": 0}}})))
        .await;
    h.set("2026-11-30T09:00:00Z");
    server.next().await;
    let runs = h
        .until(&task, "503 makes it retry", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Retrying)
        })
        .await;
    assert_eq!(
        runs[0].run_at,
        ts("2026-11-30T09:00:20Z"),
        "Retry-After beats the 1s backoff"
    );
    assert!(
        runs[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with("HTTP 503 Service Unavailable from")
    );
    h.set("2026-11-30T09:00:20Z");
    let second = server.next().await;
    assert_eq!(
        (
            second.headers["x-agentcron-attempt"].as_str(),
            second.headers["x-agentcron-fence"].as_str()
        ),
        ("2", "2")
    );
    assert_eq!(
        second.headers["idempotency-key"],
        runs[0].id.to_string(),
        "same key on every attempt"
    );
    let runs = h
        .until(&task, "the retry succeeds", |r| {
            r[0].status == RunStatus::Succeeded
        })
        .await;
    assert_eq!(
        runs[0].result,
        Some(serde_json::json!("fine")),
        "a non-JSON body is kept as a string"
    );
    h.engine
        .unwrap()
        .shutdown(std::time::Duration::from_secs(1))
        .await;

    let mut server = TestServer::start(vec![status(404, &[])]).await;
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let task = h
        .create(http_task(
            &server.url,
            serde_json::json!({"retry": {"max_attempts": 3}}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    server.next().await;
    let runs = h
        .until(&task, "404 fails at once", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Failed)
        })
        .await;
    assert_eq!(runs[0].attempt, 1);
    assert!(
        runs[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with("HTTP 404 Not Found from")
    );
    h.engine
        .unwrap()
        .shutdown(std::time::Duration::from_secs(1))
        .await;

    // ...unless the task says 4xx answers are worth another try.
    let mut server = TestServer::start(vec![status(404, &[]), ok("found it")]).await;
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let retry = serde_json::json!({"retry": {"max_attempts": 3, "retry_4xx": true, "backoff": {"initial": "1s", "jitter": 0}}});
    let task = h.create(http_task(&server.url, retry)).await;
    h.set("2026-11-30T09:00:00Z");
    server.next().await;
    h.until(&task, "404 retries when asked", |r| {
        r.first().is_some_and(|r| r.status == RunStatus::Retrying)
    })
    .await;
    h.set("2026-11-30T09:00:01Z");
    server.next().await;
    h.until(&task, "the retry succeeds", |r| {
        r[0].status == RunStatus::Succeeded
    })
    .await;
    h.engine
        .unwrap()
        .shutdown(std::time::Duration::from_secs(1))
        .await;
}

#[tokio::test]
async fn large_responses_are_capped_and_refused_connections_retry() {
    let big = "x".repeat(200 * 1024);
    let mut server = TestServer::start(vec![Reply::Respond {
        status: 200,
        headers: vec![],
        body: big,
    }])
    .await;
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let task = h
        .create(http_task(&server.url, serde_json::json!({})))
        .await;
    h.set("2026-11-30T09:00:00Z");
    server.next().await;
    let runs = h
        .until(&task, "the run succeeds", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Succeeded)
        })
        .await;
    let kept = runs[0]
        .result
        .as_ref()
        .and_then(|r| r.as_str())
        .unwrap()
        .len();
    let configured = {
        let mut server = TestServer::start(vec![Reply::Respond {
            status: 200,
            headers: vec![],
            body: "y".repeat(5000),
        }])
        .await;
        let config = agentcron::EngineConfig {
            max_result_bytes: 1000,
            ..config()
        };
        let h = Harness::start_with(ts("2026-11-30T08:59:50Z"), Handlers::new(), config).await;
        let task = h
            .create(http_task(&server.url, serde_json::json!({})))
            .await;
        h.set("2026-11-30T09:00:00Z");
        server.next().await;
        let runs = h
            .until(&task, "the run succeeds", |r| {
                r.first().is_some_and(|r| r.status == RunStatus::Succeeded)
            })
            .await;
        h.engine
            .unwrap()
            .shutdown(std::time::Duration::from_secs(1))
            .await;
        runs[0]
            .result
            .as_ref()
            .and_then(|r| r.as_str())
            .map(str::len)
    };
    assert_eq!(configured, Some(1000), "the cap is configurable");
    assert_eq!(kept, 64 * 1024, "the result is capped at 64 KiB");
    h.engine
        .unwrap()
        .shutdown(std::time::Duration::from_secs(1))
        .await;

    // Nobody listens on this port any more.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let task = h
        .create(http_task(
            &closed,
            serde_json::json!({"retry": {"max_attempts": 2}}),
        ))
        .await;
    h.set("2026-11-30T09:00:00Z");
    let runs = h
        .until(&task, "a refused connection retries", |r| {
            r.first().is_some_and(|r| r.status == RunStatus::Retrying)
        })
        .await;
    assert!(
        runs[0].error.as_deref().unwrap().contains("request to"),
        "{:?}",
        runs[0].error
    );
    h.engine
        .unwrap()
        .shutdown(std::time::Duration::from_secs(1))
        .await;
}

#[tokio::test]
async fn a_template_with_an_unknown_variable_fails_without_retry() {
    let server = TestServer::start(vec![ok("{}")]).await;
    let h = Harness::start(ts("2026-11-30T08:59:50Z"), Handlers::new()).await;
    let mut spec = http_task(
        &server.url,
        serde_json::json!({"retry": {"max_attempts": 3}}),
    );
    spec["action"]["body"] = serde_json::json!({"q": "{{ run.nonexistent }}"});
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
            .starts_with("template `{{ run.nonexistent }}` failed"),
        "{:?}",
        runs[0].error
    );
    h.engine
        .unwrap()
        .shutdown(std::time::Duration::from_secs(1))
        .await;
}
