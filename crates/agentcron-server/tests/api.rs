//! The HTTP API of a real `agentcron serve` process on 127.0.0.1:0.

mod support;

use std::process::Command;

use support::{Answer, cli, client, serve, until};

fn example_task() -> serde_json::Value {
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

#[tokio::test]
async fn health_create_read_and_problems() {
    let server = serve();
    let http = client();
    let url = |path: &str| format!("{}{path}", server.base);

    // The engine records its node as it starts; poll until it has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let nodes = loop {
        let v: serde_json::Value = http.get(url("/api/v1/nodes")).json_value().await;
        if v["nodes"].as_array().is_some_and(|n| !n.is_empty()) {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no node recorded: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let node = &nodes["nodes"][0];
    assert_eq!(
        (node["version"].as_str(), node["skew_ms"].as_i64()),
        (Some(env!("CARGO_PKG_VERSION")), Some(0))
    );
    assert!(node["id"].as_str().is_some_and(|id| !id.is_empty()));
    let health = http.get(url("/healthz")).send().await.expect("healthz");
    assert_eq!(
        (health.status().as_u16(), health.text().await.expect("body")),
        (200, "ok".to_string())
    );
    let ready: serde_json::Value = http.get(url("/readyz")).json_value().await;
    assert_eq!(ready, serde_json::json!({"status": "ready"}));

    // Create: 201, Location, the stored task with everything sent.
    let created = http
        .post(url("/api/v1/tasks"))
        .json(&example_task())
        .send()
        .await
        .expect("post");
    assert_eq!(created.status().as_u16(), 201);
    let location = created.headers()["location"]
        .to_str()
        .expect("ascii")
        .to_string();
    let task: serde_json::Value = created.json().await.expect("json");
    assert_eq!(
        location,
        format!("/api/v1/tasks/{}", task["id"].as_str().expect("id"))
    );
    assert_eq!(
        (task["version"].as_i64(), task["state"].as_str()),
        (Some(1), Some("active"))
    );
    assert_eq!(task["name"], "daily-report");
    assert_eq!(task["labels"], serde_json::json!({"team": "sales"}));
    assert_eq!(task["retry"]["max_attempts"], 3);
    let next: jiff::Timestamp = task["next_fire_at"]
        .as_str()
        .expect("next fire")
        .parse()
        .expect("RFC 3339");
    let local = next.to_zoned_datetime(jiff::tz::TimeZone::get("Asia/Shanghai").expect("zone"));
    assert_eq!((local.hour(), local.minute()), (9, 0), "09:00 in Shanghai");

    // Read by id and by name.
    for key in [task["id"].as_str().expect("id"), "daily-report"] {
        let got: serde_json::Value = http
            .get(url(&format!("/api/v1/tasks/{key}")))
            .json_value()
            .await;
        assert_eq!(got, task);
    }

    // Problems name the field, as application/problem+json.
    let mut bad = example_task();
    bad["name"] = "other".into();
    bad["schedule"] = serde_json::json!({"cron": "0 25 * * *"});
    let problem = http
        .post(url("/api/v1/tasks"))
        .json(&bad)
        .send()
        .await
        .expect("post");
    assert_eq!(problem.status().as_u16(), 422);
    assert_eq!(
        problem.headers()["content-type"],
        "application/problem+json"
    );
    let body: serde_json::Value = problem.json().await.expect("json");
    assert_eq!(body["field"], "schedule.cron");
    assert_eq!(
        body["detail"],
        "hour field: 25 is out of range 0-23 (column 3)"
    );

    let dup = http
        .post(url("/api/v1/tasks"))
        .json(&example_task())
        .send()
        .await
        .expect("post");
    assert_eq!(dup.status().as_u16(), 409);
    assert_eq!(
        dup.json::<serde_json::Value>().await.expect("json")["field"],
        "name"
    );

    let garbage = http
        .post(url("/api/v1/tasks"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("post");
    assert_eq!(garbage.status().as_u16(), 400);

    let unknown_key = serde_json::json!({"name": "x", "schedule": {"manual": true}, "action": {"type": "handler", "name": "h"}, "colour": "blue"});
    let unknown = http
        .post(url("/api/v1/tasks"))
        .json(&unknown_key)
        .send()
        .await
        .expect("post");
    assert_eq!(unknown.status().as_u16(), 422);
    assert!(
        unknown.json::<serde_json::Value>().await.expect("json")["detail"]
            .as_str()
            .expect("detail")
            .contains("unknown field `colour`")
    );

    let missing = http
        .get(url("/api/v1/tasks/nope"))
        .send()
        .await
        .expect("get");
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(
        missing.json::<serde_json::Value>().await.expect("json")["detail"],
        "no task with id or name `nope`"
    );
}

#[test]
fn a_non_loopback_address_is_refused_without_tokens() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to listen on 0.0.0.0:0: it is not a loopback address and no API tokens are configured"), "{err}");
}

#[tokio::test]
async fn runs_pause_resume_and_cancel() {
    use agentcron_testkit::http::{Reply, TestServer, ok};
    let mut answering = TestServer::start(vec![ok(r#"{"answer": 42}"#)]).await;
    let mut hanging = TestServer::start(vec![Reply::Hang]).await;
    let server = serve();
    let http = client();
    let url = |path: &str| format!("{}{path}", server.base);
    let soon = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1)).to_string();
    for (name, target) in [("answered", &answering.url), ("hung", &hanging.url)] {
        let spec = serde_json::json!({"name": name, "schedule": {"once": soon}, "action": {"type": "http", "url": format!("{target}/x")}});
        assert_eq!(
            http.post(url("/api/v1/tasks"))
                .json(&spec)
                .status_code()
                .await,
            201
        );
    }

    // A run that succeeds, listed under its task and readable by id.
    answering.next().await;
    let runs = until(
        &http,
        &url("/api/v1/tasks/answered/runs"),
        "the run succeeds",
        |v| v[0]["status"] == "succeeded",
    )
    .await;
    assert_eq!(runs.as_array().map(Vec::len), Some(1));
    assert_eq!(runs[0]["result"], serde_json::json!({"answer": 42}));
    let id = runs[0]["id"].as_str().expect("id").to_string();
    let mut run: serde_json::Value = http
        .get(url(&format!("/api/v1/runs/{id}")))
        .json_value()
        .await;
    let attempts = run
        .as_object_mut()
        .and_then(|o| o.remove("attempts"))
        .expect("attempts");
    assert_eq!(attempts.as_array().map(Vec::len), Some(1));
    assert_eq!(run, runs[0]);
    let done = http
        .post(url(&format!("/api/v1/runs/{id}/cancel")))
        .send()
        .await
        .expect("post");
    assert_eq!(
        done.status().as_u16(),
        409,
        "a finished run cannot be cancelled"
    );

    // A running run, cancelled through the API.
    hanging.next().await;
    let runs = until(
        &http,
        &url("/api/v1/tasks/hung/runs"),
        "the run is running",
        |v| v[0]["status"] == "running",
    )
    .await;
    let id = runs[0]["id"].as_str().expect("id").to_string();
    let cancelled: serde_json::Value = http
        .post(url(&format!("/api/v1/runs/{id}/cancel")))
        .json_value()
        .await;
    assert_eq!(
        (cancelled["status"].as_str(), cancelled["error"].as_str()),
        (Some("cancelled"), Some("cancelled through the API"))
    );
    let bad = http
        .get(url("/api/v1/runs/not-a-run"))
        .send()
        .await
        .expect("get");
    assert_eq!(
        (
            bad.status().as_u16(),
            bad.json::<serde_json::Value>().await.expect("json")["field"].as_str()
        ),
        (400, Some("id"))
    );

    // Pause and resume, by name; doing either twice is a conflict.
    let spec = serde_json::json!({"name": "hourly", "schedule": {"every": "1h"}, "action": {"type": "handler", "name": "h"}});
    http.post(url("/api/v1/tasks"))
        .json(&spec)
        .send()
        .await
        .expect("post");
    let paused: serde_json::Value = http
        .post(url("/api/v1/tasks/hourly/pause"))
        .json_value()
        .await;
    assert_eq!(
        (paused["state"].as_str(), paused["version"].as_i64()),
        (Some("paused"), Some(2))
    );
    assert_eq!(
        http.post(url("/api/v1/tasks/hourly/pause"))
            .status_code()
            .await,
        409
    );
    let resumed: serde_json::Value = http
        .post(url("/api/v1/tasks/hourly/resume"))
        .json_value()
        .await;
    assert_eq!(resumed["state"], "active");
    assert_eq!(
        http.post(url("/api/v1/tasks/hourly/resume"))
            .status_code()
            .await,
        409
    );
    assert_eq!(
        http.post(url("/api/v1/tasks/nope/pause"))
            .status_code()
            .await,
        404
    );
}

#[tokio::test]
async fn upcoming_patch_trigger_delete_and_preview() {
    use agentcron_testkit::http::{TestServer, ok};
    let mut agent = TestServer::start(vec![ok("{}")]).await;
    let server = serve();
    let http = client();
    let url = |path: &str| format!("{}{path}", server.base);
    let spec = serde_json::json!({"name": "h", "schedule": {"every": "1h"},
        "action": {"type": "http", "url": format!("{}/agent", agent.url), "body": {"q": "default"}}});
    http.post(url("/api/v1/tasks"))
        .json(&spec)
        .send()
        .await
        .expect("post");

    let up: serde_json::Value = http
        .get(url("/api/v1/tasks/h/upcoming?count=3"))
        .json_value()
        .await;
    let next: Vec<jiff::Timestamp> = up["next"]
        .as_array()
        .expect("next")
        .iter()
        .map(|t| t.as_str().expect("str").parse().expect("ts"))
        .collect();
    assert_eq!(next.len(), 3);
    assert!(
        next.windows(2)
            .all(|w| w[1].duration_since(w[0]) == jiff::SignedDuration::from_hours(1))
    );

    // PATCH: If-Match required, stale versions refused, merge patch applied, errors name the field.
    let patch = serde_json::json!({"description": "half-hourly now", "schedule": {"every": "30m"}});
    assert_eq!(
        http.patch(url("/api/v1/tasks/h"))
            .json(&patch)
            .status_code()
            .await,
        428
    );
    let patched: serde_json::Value = http
        .patch(url("/api/v1/tasks/h"))
        .header("if-match", "1")
        .json(&patch)
        .json_value()
        .await;
    assert_eq!(
        (patched["version"].as_i64(), patched["description"].as_str()),
        (Some(2), Some("half-hourly now"))
    );
    assert_eq!(patched["schedule"], serde_json::json!({"every": "30m"}));
    let stale = http
        .patch(url("/api/v1/tasks/h"))
        .header("if-match", "1")
        .json(&patch)
        .send()
        .await
        .expect("patch");
    assert_eq!(stale.status().as_u16(), 412);
    assert_eq!(
        stale.json::<serde_json::Value>().await.expect("json")["field"],
        "If-Match"
    );
    let bad = http
        .patch(url("/api/v1/tasks/h"))
        .header("if-match", "2")
        .json(&serde_json::json!({"retry": {"max_attempts": 0}}))
        .send()
        .await
        .expect("patch");
    assert_eq!(
        (
            bad.status().as_u16(),
            bad.json::<serde_json::Value>().await.expect("json")["field"].as_str()
        ),
        (422, Some("retry.max_attempts"))
    );

    // Trigger: runs now, with the payload override as the body.
    let run: serde_json::Value = http
        .post(url("/api/v1/tasks/h/trigger"))
        .json(&serde_json::json!({"payload": {"q": "right now"}}))
        .json_value()
        .await;
    assert_eq!(
        (run["trigger"].as_str(), run["status"].as_str()),
        (Some("manual"), Some("queued"))
    );
    let req = agent.next().await;
    assert_eq!(req.body, r#"{"q":"right now"}"#);
    assert_eq!(
        req.headers["idempotency-key"],
        run["id"].as_str().expect("id")
    );
    let odd = http
        .post(url("/api/v1/tasks/h/trigger"))
        .json(&serde_json::json!({"payloda": 1}))
        .send()
        .await
        .expect("post");
    assert_eq!(odd.status().as_u16(), 422);

    // DELETE: the task is kept, cancelled, and stops firing.
    assert_eq!(http.delete(url("/api/v1/tasks/h")).status_code().await, 204);
    let gone: serde_json::Value = http.get(url("/api/v1/tasks/h")).json_value().await;
    assert_eq!(
        (gone["state"].as_str(), gone["next_fire_at"].is_null()),
        (Some("cancelled"), true)
    );

    // Cron preview.
    let preview: serde_json::Value = http
        .post(url("/api/v1/cron/preview"))
        .json(&serde_json::json!({"expression": "0 9 * * 1-5", "timezone": "Asia/Shanghai", "count": 2}))
        .json_value()
        .await;
    assert_eq!(
        (preview["valid"].as_bool(), preview["description"].as_str()),
        (Some(true), Some("At 09:00, Monday through Friday"))
    );
    assert_eq!(preview["next"].as_array().map(Vec::len), Some(2));
    assert!(
        preview["next"][0]
            .as_str()
            .expect("str")
            .ends_with("T09:00:00+08:00")
    );
    let wrong: serde_json::Value = http
        .post(url("/api/v1/cron/preview"))
        .json(&serde_json::json!({"expression": "0 25 * * *"}))
        .json_value()
        .await;
    assert_eq!(
        (wrong["field"].as_str(), wrong["column"].as_u64()),
        (Some("expression"), Some(3))
    );
    assert_eq!(
        wrong["detail"],
        "hour field: 25 is out of range 0-23 (column 3)"
    );
}

#[tokio::test]
async fn listing_tasks_and_runs_with_attempts_and_limits() {
    use agentcron_testkit::http::{TestServer, ok};
    let mut agent = TestServer::start(vec![ok("{}")]).await;
    let server = serve();
    let http = client();
    let url = |path: &str| format!("{}{path}", server.base);
    for (name, team) in [
        ("report-a", "sales"),
        ("report-b", "ops"),
        ("cleanup", "sales"),
    ] {
        let spec = serde_json::json!({"name": name, "labels": {"team": team}, "schedule": {"manual": true},
            "action": {"type": "http", "url": format!("{}/x", agent.url)}});
        assert_eq!(
            http.post(url("/api/v1/tasks"))
                .json(&spec)
                .status_code()
                .await,
            201
        );
    }
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_string())
            .collect()
    };
    let get = |path: String| {
        let http = http.clone();
        async move {
            http.get(path)
                .send()
                .await
                .expect("get")
                .json::<serde_json::Value>()
                .await
                .expect("json")
        }
    };
    assert_eq!(
        names(&get(url("/api/v1/tasks")).await),
        ["report-a", "report-b", "cleanup"]
    );
    assert_eq!(
        names(&get(url("/api/v1/tasks?label=team=sales")).await),
        ["report-a", "cleanup"]
    );
    assert_eq!(
        names(&get(url("/api/v1/tasks?name_prefix=report-&state=active")).await),
        ["report-a", "report-b"]
    );
    let page = get(url("/api/v1/tasks?limit=2")).await;
    assert_eq!(names(&page), ["report-a", "report-b"]);
    let next = page["next"].as_str().expect("a cursor").to_string();
    let rest = get(url(&format!("/api/v1/tasks?limit=2&after={next}"))).await;
    assert_eq!(
        (names(&rest), rest["next"].is_null()),
        (vec!["cleanup".to_string()], true)
    );
    for (query, field) in [
        ("state=sleepy", "state"),
        ("label=nolabel", "label"),
        ("after=x", "after"),
    ] {
        let r = http
            .get(url(&format!("/api/v1/tasks?{query}")))
            .send()
            .await
            .expect("get");
        assert_eq!(
            (
                r.status().as_u16(),
                r.json::<serde_json::Value>().await.expect("json")["field"].as_str()
            ),
            (400, Some(field)),
            "{query}"
        );
    }
    assert_eq!(
        http.get(url("/api/v1/tasks?colour=blue"))
            .status_code()
            .await,
        400
    );

    // A triggered run shows up in /runs, filtered, with its attempts.
    let run: serde_json::Value = http
        .post(url("/api/v1/tasks/cleanup/trigger"))
        .json_value()
        .await;
    agent.next().await;
    let id = run["id"].as_str().expect("id").to_string();
    let done = until(
        &http,
        &url(&format!("/api/v1/runs/{id}")),
        "the run succeeds",
        |v| v["status"] == "succeeded",
    )
    .await;
    let attempts = done["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        (
            attempts[0]["attempt"].as_i64(),
            attempts[0]["outcome"].as_str()
        ),
        (Some(1), Some("succeeded"))
    );
    let listed = get(url("/api/v1/runs?status=succeeded&task=cleanup")).await;
    assert_eq!(listed["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["runs"][0]["id"], done["id"]);
    assert_eq!(
        get(url("/api/v1/runs?task=report-a")).await["runs"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    let r = http
        .get(url("/api/v1/runs?status=sleepy"))
        .send()
        .await
        .expect("get");
    assert_eq!(r.status().as_u16(), 400);

    // Bodies over the limit answer 413, and nothing here answers 500.
    // (The server answers as soon as it sees the length, possibly before the client has
    // sent it all, so this speaks raw HTTP and ignores write errors.)
    let (status, content_type, _) = support::post_oversized(&server.base, "/api/v1/tasks").await;
    assert_eq!(
        (status, content_type.as_deref()),
        (413, Some("application/problem+json"))
    );
    let r = http
        .post(url("/api/v1/tasks"))
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 415);
}

#[tokio::test]
async fn the_cli_client_lists_shows_and_reports_problems() {
    let server = serve();
    let http = client();
    for name in ["alpha", "beta"] {
        let spec = serde_json::json!({"name": name, "labels": {"team": name}, "schedule": {"every": "1h"}, "action": {"type": "handler", "name": "h"}});
        http.post(format!("{}/api/v1/tasks", server.base))
            .json(&spec)
            .send()
            .await
            .expect("post");
    }
    let text = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).into_owned();

    let list = cli(&server, &["task", "list"]);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let lines: Vec<String> = text(&list).lines().map(str::to_string).collect();
    assert!(
        lines[0].starts_with("NAME   STATE   NEXT FIRE"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("alpha  active  ") && lines[2].starts_with("beta   active  "),
        "{lines:?}"
    );

    let json: serde_json::Value = serde_json::from_str(&text(&cli(
        &server,
        &["task", "list", "--label", "team=beta", "--json"],
    )))
    .expect("JSON");
    assert_eq!(
        json.as_array()
            .map(|a| a.iter().map(|t| t["name"].clone()).collect::<Vec<_>>()),
        Some(vec![serde_json::json!("beta")])
    );

    let shown: serde_json::Value =
        serde_json::from_str(&text(&cli(&server, &["task", "show", "alpha"]))).expect("JSON");
    assert_eq!(
        (shown["name"].as_str(), shown["version"].as_i64()),
        (Some("alpha"), Some(1))
    );

    let missing = cli(&server, &["task", "show", "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr),
        "agentcron: 404 Not Found: no task with id or name `nope`\n"
    );
    let bad = cli(&server, &["task", "list", "--state", "sleepy"]);
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "agentcron: 400 Bad Request: state `sleepy` is not one of active, paused, cancelled, completed (field state)\n"
    );

    http.post(format!("{}/api/v1/tasks/alpha/trigger", server.base))
        .send()
        .await
        .expect("trigger");
    let runs = cli(&server, &["runs", "list", "--task", "alpha"]);
    let lines: Vec<String> = text(&runs).lines().map(str::to_string).collect();
    assert!(lines[0].starts_with("SCHEDULED FOR"), "{lines:?}");
    assert_eq!(lines.len(), 2, "one run: {lines:?}");
    assert!(lines[1].contains("manual"), "{lines:?}");

    let nodes = text(&cli(&server, &["nodes"]));
    assert!(
        nodes.starts_with("NODE") && nodes.lines().count() == 2,
        "{nodes}"
    );

    // Nobody listening: one line naming the server.
    let closed = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["nodes", "--server", "http://127.0.0.1:9"])
        .output()
        .expect("runs");
    assert_eq!(closed.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&closed.stderr)
            .starts_with("agentcron: cannot reach the agentcron server at http://127.0.0.1:9")
    );
}

#[test]
fn serve_accepts_the_client_s_environment() {
    // With AGENTCRON_SERVER/TOKEN set, serve gets past the environment check
    // (and stops at the next one, the non-loopback refusal).
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env("AGENTCRON_SERVER", "http://127.0.0.1:8080")
        .env("AGENTCRON_TOKEN", "x")
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refusing to listen on 0.0.0.0:0"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn the_cli_client_changes_tasks_and_runs() {
    use agentcron_testkit::http::{Reply, TestServer};
    let mut hanging = TestServer::start(vec![Reply::Hang]).await;
    let server = serve();
    let http = client();
    let spec = serde_json::json!({"name": "job", "schedule": {"every": "1h"},
        "action": {"type": "http", "url": format!("{}/x", hanging.url)}});
    http.post(format!("{}/api/v1/tasks", server.base))
        .json(&spec)
        .send()
        .await
        .expect("post");
    let out = |args: &[&str]| {
        let o = cli(&server, args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert_eq!(out(&["task", "pause", "job"]), "paused job\n");
    let again = cli(&server, &["task", "pause", "job"]);
    assert_eq!(
        String::from_utf8_lossy(&again.stderr),
        "agentcron: 409 Conflict: task `job` is paused, not active\n"
    );
    assert!(out(&["task", "resume", "job"]).starts_with("resumed job; next fire "));

    // Run now, see it running, cancel it, see it cancelled.
    let started = out(&["task", "run", "job"]);
    let id = started
        .trim()
        .strip_prefix("started run ")
        .expect("the run id")
        .to_string();
    hanging.next().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let run: serde_json::Value =
            serde_json::from_str(&out(&["runs", "show", &id])).expect("JSON");
        if run["status"] == "running" {
            assert_eq!(run["attempts"].as_array().map(Vec::len), Some(1));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{run}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        out(&["runs", "cancel", &id]),
        format!("cancelled run {id}\n")
    );
    let run: serde_json::Value = serde_json::from_str(&out(&["runs", "show", &id])).expect("JSON");
    assert_eq!(run["status"], "cancelled");
    let twice = cli(&server, &["runs", "cancel", &id]);
    assert_eq!(twice.status.code(), Some(1));

    let json: serde_json::Value =
        serde_json::from_str(&out(&["task", "rm", "job", "--json"])).expect("JSON");
    assert_eq!(json, serde_json::json!({"deleted": "job"}));
    let shown: serde_json::Value =
        serde_json::from_str(&out(&["task", "show", "job"])).expect("JSON");
    assert_eq!(shown["state"], "cancelled");
}
