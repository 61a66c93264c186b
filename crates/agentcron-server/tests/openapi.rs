//! The served OpenAPI document against the real server: every documented
//! operation is called, every answer's status and content type must be
//! documented for it, and every body must match the documented schema.

mod support;

use std::collections::BTreeSet;

use serde_json::{Value, json};
use support::{Answer, answer_schema, client, conforms, serve};

/// Calls the API and holds each answer to the document.
struct Checked {
    http: reqwest::Client,
    base: String,
    doc: Value,
    seen: BTreeSet<(String, String)>,
}

impl Checked {
    /// `method template` filled in as `path`; returns the status and body.
    async fn call(
        &mut self,
        method: &str,
        template: &str,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let method_value = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = self
            .http
            .request(method_value, format!("{}{path}", self.base));
        if let Some(b) = body {
            request = request.json(&b);
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_string());
        let text = response.text().await.expect("body");
        let schema = answer_schema(
            &self.doc,
            method,
            template,
            status,
            content_type.as_deref().unwrap_or(""),
        )
        .unwrap_or_else(|e| panic!("{e} (answer: {text})"));
        let value = match content_type.as_deref() {
            Some("application/json" | "application/problem+json") => {
                serde_json::from_str(&text).expect("JSON body")
            }
            _ => Value::String(text),
        };
        if !schema.is_null() {
            conforms(&self.doc, schema, &value, "$").unwrap_or_else(|e| {
                panic!("{method} {path} -> {status} does not match the document: {e}")
            });
        }
        self.seen
            .insert((method.to_lowercase(), template.to_string()));
        (status, value)
    }
}

#[tokio::test]
async fn every_operation_answers_as_documented() {
    use agentcron_testkit::http::{Reply, TestServer};
    let mut hanging = TestServer::start(vec![Reply::Hang]).await;
    let server = serve();
    let http = client();
    let doc: Value = http
        .get(server.url("/api/v1/openapi.json"))
        .json_value()
        .await;
    assert_eq!(doc["openapi"], "3.1.0");
    let mut api = Checked {
        http,
        base: server.base.clone(),
        doc,
        seen: BTreeSet::new(),
    };

    // Swagger UI is served, and points at the document.
    let ui = api
        .http
        .get(server.url("/api/docs"))
        .send()
        .await
        .expect("ui");
    assert_eq!(ui.status().as_u16(), 200);
    assert!(
        ui.text()
            .await
            .expect("html")
            .contains("/api/v1/openapi.json")
    );

    api.call("GET", "/healthz", "/healthz", None, &[]).await;
    api.call("GET", "/readyz", "/readyz", None, &[]).await;
    api.call(
        "GET",
        "/api/v1/openapi.json",
        "/api/v1/openapi.json",
        None,
        &[],
    )
    .await;

    // Create, with each way to get it wrong.
    let tasks = "/api/v1/tasks";
    let spec = json!({
        "name": "daily-report",
        "schedule": {"cron": "0 9 * * 1-5", "timezone": "Asia/Shanghai"},
        "action": {"type": "http", "url": format!("{}/agent", hanging.url), "body": {"q": 1}},
        "retry": {"max_attempts": 3, "backoff": {"initial": "2s", "max": "5m"}},
        "timeout": "30s", "misfire": {"policy": "once", "grace": "10m"},
        "labels": {"team": "sales"}
    });
    let (status, task) = api
        .call("POST", tasks, tasks, Some(spec.clone()), &[])
        .await;
    assert_eq!(status, 201);
    let (status, _) = api
        .call("POST", tasks, tasks, Some(spec.clone()), &[])
        .await;
    assert_eq!(status, 409);
    let mut bad = spec.clone();
    bad["schedule"] = json!({"cron": "0 25 * * *"});
    let (status, problem) = api.call("POST", tasks, tasks, Some(bad), &[]).await;
    assert_eq!(
        (status, problem["field"].as_str()),
        (422, Some("schedule.cron"))
    );
    // Too large: over raw HTTP (see `post_oversized`), held to the document too.
    let (status, content_type, body) = support::post_oversized(&server.base, tasks).await;
    assert_eq!(status, 413);
    let schema = answer_schema(
        &api.doc,
        "POST",
        tasks,
        413,
        content_type.as_deref().unwrap_or(""),
    )
    .expect("413 is documented");
    let body: Value = serde_json::from_str(&body).expect("a JSON problem");
    conforms(&api.doc, schema, &body, "$").expect("the 413 problem matches the document");
    let (status, _) = api
        .call(
            "POST",
            tasks,
            tasks,
            None,
            &[("content-type", "text/plain")],
        )
        .await;
    assert_eq!(status, 415);
    let (status, _) = api
        .call(
            "POST",
            tasks,
            tasks,
            None,
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(status, 400);

    let (status, page) = api
        .call("GET", tasks, "/api/v1/tasks?limit=1", None, &[])
        .await;
    assert_eq!(
        (status, page["tasks"][0]["id"].clone()),
        (200, task["id"].clone())
    );
    let (status, _) = api
        .call("GET", tasks, "/api/v1/tasks?state=bogus", None, &[])
        .await;
    assert_eq!(status, 400);

    let one = "/api/v1/tasks/{key}";
    let (status, _) = api
        .call("GET", one, "/api/v1/tasks/daily-report", None, &[])
        .await;
    assert_eq!(status, 200);
    let (status, _) = api.call("GET", one, "/api/v1/tasks/nope", None, &[]).await;
    assert_eq!(status, 404);
    let patch = Some(json!({"description": "at nine", "timeout": null}));
    let path = "/api/v1/tasks/daily-report";
    let (status, _) = api.call("PATCH", one, path, patch.clone(), &[]).await;
    assert_eq!(status, 428);
    let (status, _) = api
        .call("PATCH", one, path, patch.clone(), &[("if-match", "one")])
        .await;
    assert_eq!(status, 400);
    let (status, patched) = api
        .call("PATCH", one, path, patch.clone(), &[("if-match", "1")])
        .await;
    assert_eq!((status, patched["version"].as_i64()), (200, Some(2)));
    assert!(patched.get("timeout").is_none());
    let (status, _) = api
        .call("PATCH", one, path, patch.clone(), &[("if-match", "1")])
        .await;
    assert_eq!(status, 412);
    let (status, problem) = api
        .call(
            "PATCH",
            one,
            path,
            Some(json!({"overlap": "sometimes"})),
            &[("if-match", "2")],
        )
        .await;
    assert_eq!(status, 422, "{problem}");

    let pause = "/api/v1/tasks/{key}/pause";
    let resume = "/api/v1/tasks/{key}/resume";
    for (template, expect) in [(pause, 200), (pause, 409), (resume, 200), (resume, 409)] {
        let path = template.replace("{key}", "daily-report");
        let (status, _) = api.call("POST", template, &path, None, &[]).await;
        assert_eq!(status, expect, "{path}");
    }

    let upcoming = "/api/v1/tasks/{key}/upcoming";
    let (status, next) = api
        .call(
            "GET",
            upcoming,
            "/api/v1/tasks/daily-report/upcoming?count=3",
            None,
            &[],
        )
        .await;
    assert_eq!(
        (status, next["next"].as_array().map(Vec::len)),
        (200, Some(3))
    );
    let (status, _) = api
        .call(
            "GET",
            upcoming,
            "/api/v1/tasks/daily-report/upcoming?count=x",
            None,
            &[],
        )
        .await;
    assert_eq!(status, 400);

    // Trigger: the run calls the hanging agent, so it stays running.
    let trigger = "/api/v1/tasks/{key}/trigger";
    let trigger_path = "/api/v1/tasks/daily-report/trigger";
    let (status, _) = api
        .call("POST", trigger, trigger_path, Some(json!({"nope": 1})), &[])
        .await;
    assert_eq!(status, 422);
    let (status, run) = api
        .call(
            "POST",
            trigger,
            trigger_path,
            Some(json!({"payload": {"q": 2}})),
            &[],
        )
        .await;
    assert_eq!(status, 202);
    let run_id = run["id"].as_str().expect("run id").to_string();
    hanging.next().await;

    let task_runs = "/api/v1/tasks/{key}/runs";
    let (status, runs) = api
        .call(
            "GET",
            task_runs,
            "/api/v1/tasks/daily-report/runs",
            None,
            &[],
        )
        .await;
    assert_eq!(
        (status, runs[0]["id"].as_str()),
        (200, Some(run_id.as_str()))
    );
    let (status, _) = api
        .call(
            "GET",
            task_runs,
            "/api/v1/tasks/daily-report/runs?limit=-1",
            None,
            &[],
        )
        .await;
    assert_eq!(status, 400);

    let runs = "/api/v1/runs";
    let (status, page) = api
        .call("GET", runs, "/api/v1/runs?status=running", None, &[])
        .await;
    assert_eq!(
        (status, page["runs"][0]["id"].as_str()),
        (200, Some(run_id.as_str()))
    );
    let (status, _) = api
        .call("GET", runs, "/api/v1/runs?status=later", None, &[])
        .await;
    assert_eq!(status, 400);
    let (status, _) = api
        .call("GET", runs, "/api/v1/runs?task=nope", None, &[])
        .await;
    assert_eq!(status, 404);

    let run_one = "/api/v1/runs/{id}";
    let (status, run) = api
        .call("GET", run_one, &format!("/api/v1/runs/{run_id}"), None, &[])
        .await;
    assert_eq!(
        (status, run["attempts"][0]["attempt"].as_i64()),
        (200, Some(1))
    );
    let (status, _) = api
        .call("GET", run_one, "/api/v1/runs/seven", None, &[])
        .await;
    assert_eq!(status, 400);
    let missing = "/api/v1/runs/0190aaaa-0000-7000-8000-000000000000";
    let (status, _) = api.call("GET", run_one, missing, None, &[]).await;
    assert_eq!(status, 404);

    let cancel = "/api/v1/runs/{id}/cancel";
    let cancel_path = format!("/api/v1/runs/{run_id}/cancel");
    let (status, run) = api.call("POST", cancel, &cancel_path, None, &[]).await;
    assert_eq!((status, run["status"].as_str()), (200, Some("cancelled")));
    let (status, _) = api.call("POST", cancel, &cancel_path, None, &[]).await;
    assert_eq!(status, 409);
    let (status, _) = api
        .call("POST", cancel, &format!("{missing}/cancel"), None, &[])
        .await;
    assert_eq!(status, 404);

    let nodes = "/api/v1/nodes";
    let (status, _) = api.call("GET", nodes, nodes, None, &[]).await;
    assert_eq!(status, 200);

    let preview = "/api/v1/cron/preview";
    let (status, answer) = api
        .call(
            "POST",
            preview,
            preview,
            Some(
                json!({"expression": "*/15 9-17 * * 1-5", "timezone": "Europe/Berlin", "count": 2}),
            ),
            &[],
        )
        .await;
    assert_eq!(
        (status, answer["next"].as_array().map(Vec::len)),
        (200, Some(2))
    );
    let (status, problem) = api
        .call(
            "POST",
            preview,
            preview,
            Some(json!({"expression": "0 9 * * mon-fri-sat"})),
            &[],
        )
        .await;
    assert_eq!(status, 422);
    assert!(problem["column"].is_u64(), "{problem}");

    let (status, _) = api.call("DELETE", one, path, None, &[]).await;
    assert_eq!(status, 204);
    let (status, _) = api
        .call("DELETE", one, "/api/v1/tasks/nope", None, &[])
        .await;
    assert_eq!(status, 404);

    // Every documented operation was exercised.
    let documented: BTreeSet<(String, String)> = api.doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("item")
                .keys()
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let missed: Vec<_> = documented.difference(&api.seen).collect();
    assert!(missed.is_empty(), "not exercised: {missed:?}");

    // Outside the document: a problem, not an empty 404 or 405.
    for (method, path, expect) in [
        ("GET", "/api/v1/nothing", 404),
        ("PUT", "/api/v1/tasks", 405),
    ] {
        let r = api
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).expect("method"),
                server.url(path),
            )
            .send()
            .await
            .expect("request");
        assert_eq!(r.status().as_u16(), expect);
        assert_eq!(
            r.headers()["content-type"].to_str().ok(),
            Some("application/problem+json")
        );
    }
}
