//! The OpenAPI 3.1 document of the API, served at `/api/v1/openapi.json`.
//!
//! Written by hand (the wire shapes of schedules and durations are custom),
//! and held to the code by tests: `api::tests` checks that its operations are
//! exactly the router's routes and that every `$ref` resolves; the API
//! integration tests validate real answers against its schemas; schemathesis
//! fuzzes the server from it (`docs/testing.md`).

use serde_json::{Map, Value, json};

/// A `$ref` to a component schema.
fn schema(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn nullable_string() -> Value {
    json!({"type": ["string", "null"]})
}

fn timestamp() -> Value {
    json!({"type": "string", "format": "date-time"})
}

fn nullable_timestamp() -> Value {
    json!({"type": ["string", "null"], "format": "date-time"})
}

fn string_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

/// An object that refuses keys it does not name (request bodies).
fn closed(required: &[&str], properties: Value) -> Value {
    let mut o = object(required, properties);
    o["additionalProperties"] = json!(false);
    o
}

/// What a task definition holds, field by field (shared by the request
/// body, the stored task and the patch).
fn spec_properties() -> Map<String, Value> {
    let Value::Object(map) = json!({
        "name": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$",
                 "description": "Unique: 1-128 letters, digits, `-`, `_`, `.`."},
        "description": {"type": "string", "maxLength": 4096},
        "labels": {"type": "object", "propertyNames": {"minLength": 1, "maxLength": 63},
                   "additionalProperties": {"type": "string", "maxLength": 256}},
        "schedule": schema("Schedule"),
        "action": schema("Action"),
        "retry": schema("RetryPolicy"),
        "timeout": {"allOf": [schema("Duration")], "description": "At most 30d; omit for no limit"},
        "overlap": {"type": "string", "enum": ["allow", "forbid", "replace", "queue"],
                    "default": "forbid"},
        "misfire": schema("MisfirePolicy"),
    }) else {
        unreachable!("a JSON object literal")
    };
    map
}

fn schemas() -> Value {
    let spec = spec_properties();
    let mut task = spec.clone();
    for (k, v) in [
        ("id", json!({"type": "string", "format": "uuid"})),
        (
            "state",
            json!({"type": "string", "enum": ["active", "paused", "cancelled", "completed"]}),
        ),
        ("next_fire_at", nullable_timestamp()),
        ("version", json!({"type": "integer", "minimum": 1})),
        ("created_at", timestamp()),
        ("updated_at", timestamp()),
    ] {
        task.insert(k.into(), v);
    }
    // A merge patch: any field of the definition; `null` removes optional ones.
    let patch: Map<String, Value> = spec
        .keys()
        .map(|k| {
            (
                k.clone(),
                json!({"description": "New value (merged; null removes)"}),
            )
        })
        .collect();
    let run_properties = json!({
        "id": {"type": "string", "format": "uuid"},
        "task_id": {"type": "string", "format": "uuid"},
        "scheduled_for": timestamp(),
        "last_scheduled_for": nullable_timestamp(),
        "fire_count": {"type": "integer"},
        "status": schema("RunStatus"),
        "trigger": {"type": "string",
                    "enum": ["schedule", "manual", "recovery", "dependency", "backfill", "catchup"]},
        "attempt": {"type": "integer"},
        "max_attempts": {"type": "integer"},
        "run_at": timestamp(),
        "lease_owner": nullable_string(),
        "lease_expires_at": nullable_timestamp(),
        "fence": {"type": "integer"},
        "started_at": nullable_timestamp(),
        "finished_at": nullable_timestamp(),
        "result": {"description": "The action's result (any JSON), or null"},
        "error": nullable_string(),
        "output": nullable_string(),
        "payload": {"description": "Payload override of a manual trigger, or null"},
    });
    let run_required = [
        "id",
        "task_id",
        "scheduled_for",
        "status",
        "trigger",
        "attempt",
        "started_at",
        "finished_at",
        "result",
        "error",
    ];
    let mut run_with_attempts = object(&run_required, run_properties.clone());
    run_with_attempts["properties"]["attempts"] =
        json!({"type": "array", "items": schema("Attempt")});
    if let Some(required) = run_with_attempts["required"].as_array_mut() {
        required.push(json!("attempts"));
    }
    let duration = json!({
        "type": "string",
        "pattern": "^\\s*([0-9]+(ms|d|h|m|s))+\\s*$",
        "description": "A duration such as `500ms`, `90s`, `5m`, `1h30m` or `2d`.",
        "examples": ["90s", "1h30m"],
    });
    json!({
        "Duration": duration,
        "Schedule": {
            "description": "Exactly one of `cron`, `every`, `once`, `manual`.",
            "oneOf": [
                closed(&["cron"], json!({
                    "cron": {"type": "string", "examples": ["0 9 * * 1-5"]},
                    "timezone": {"type": "string", "default": "UTC", "examples": ["Asia/Shanghai"]},
                    "dst": closed(&[], json!({
                        "gap": {"type": "string", "enum": ["shift", "skip"], "default": "shift"},
                        "fold": {"type": "string", "enum": ["once", "twice"], "default": "once"},
                    })),
                })),
                closed(&["every"], json!({"every": schema("Duration"), "anchor": timestamp()})),
                closed(&["once"], json!({"once": timestamp()})),
                closed(&["manual"], json!({"manual": {"const": true}})),
            ],
        },
        "Action": {
            "oneOf": [
                closed(&["type", "url"], json!({
                    "type": {"const": "http"},
                    "method": {"type": "string", "default": "POST",
                               "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]},
                    "url": {"type": "string", "pattern": "^https?://[^/]", "examples": ["http://127.0.0.1:9000/agent"]},
                    "headers": string_map(),
                    "body": {"description": "JSON body; string leaves are templates"},
                })),
                closed(&["type", "command"], json!({
                    "type": {"const": "exec"},
                    "command": {"type": "array", "minItems": 1, "items": {"type": "string"},
                                "examples": [["python3", "agent.py"]]},
                    "env": string_map(),
                    "cwd": {"type": "string"},
                })),
                closed(&["type", "name"], json!({
                    "type": {"const": "handler"},
                    "name": {"type": "string", "minLength": 1},
                    "payload": {"description": "Passed to the handler"},
                })),
            ],
        },
        "RetryPolicy": closed(&[], json!({
            "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
            "backoff": closed(&[], json!({
                "initial": schema("Duration"),
                "max": schema("Duration"),
                "multiplier": {"type": "number", "minimum": 1, "maximum": 10, "default": 2},
                "jitter": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.1},
            })),
            "retry_4xx": {"type": "boolean", "default": false},
        })),
        "MisfirePolicy": closed(&[], json!({
            "policy": {"type": "string", "enum": ["skip", "once", "all"], "default": "once"},
            "grace": schema("Duration"),
            "max_catchup": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 10},
        })),
        "TaskSpec": closed(&["name", "schedule", "action"], Value::Object(spec)),
        "TaskPatch": closed(&[], Value::Object(patch)),
        "Task": object(&["id", "name", "schedule", "action", "state", "next_fire_at", "version",
                         "created_at", "updated_at"], Value::Object(task)),
        "TaskList": object(&["tasks", "next"], json!({
            "tasks": {"type": "array", "items": schema("Task")},
            "next": {"type": ["string", "null"], "description": "Pass as `after` for the next page"},
        })),
        "RunStatus": {"type": "string", "enum": ["queued", "running", "retrying", "succeeded",
                      "failed", "timed_out", "cancelled", "skipped", "missed"]},
        "Run": object(&run_required, run_properties),
        "RunWithAttempts": run_with_attempts,
        "Attempt": object(&["attempt", "node", "started_at"], json!({
            "attempt": {"type": "integer"},
            "fence": {"type": "integer"},
            "node": {"type": "string"},
            "started_at": timestamp(),
            "finished_at": nullable_timestamp(),
            "outcome": nullable_string(),
            "error": nullable_string(),
        })),
        "RunList": object(&["runs", "next"], json!({
            "runs": {"type": "array", "items": schema("Run")},
            "next": {"type": ["string", "null"], "description": "Pass as `before` for the next page"},
        })),
        "Upcoming": object(&["task", "state", "next"], json!({
            "task": {"type": "string"},
            "state": {"type": "string"},
            "next": {"type": "array", "items": timestamp()},
        })),
        "TriggerRequest": closed(&[], json!({
            "payload": {"description": "Replaces the action's payload (handler) or body (http) for this run"},
        })),
        "PreviewRequest": closed(&["expression"], json!({
            "expression": {"type": "string", "minLength": 1, "examples": ["0 9 * * 1-5"]},
            "timezone": {"type": ["string", "null"], "default": "UTC"},
            "count": {"type": ["integer", "null"], "minimum": 1, "maximum": 100, "default": 5},
        })),
        "Preview": object(&["valid", "description", "next"], json!({
            "valid": {"type": "boolean"},
            "description": {"type": "string"},
            "next": {"type": "array", "items": timestamp()},
        })),
        "NodeList": object(&["nodes"], json!({
            "nodes": {"type": "array", "items": object(
                &["id", "host", "version", "started_at", "heartbeat_at", "skew_ms"], json!({
                    "id": {"type": "string"},
                    "host": {"type": "string"},
                    "version": {"type": "string"},
                    "started_at": timestamp(),
                    "heartbeat_at": timestamp(),
                    "skew_ms": {"type": "integer"},
                }))},
        })),
        "Problem": object(&["type", "title", "status", "detail"], json!({
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "field": {"type": "string", "description": "The request field at fault"},
            "column": {"type": "integer", "description": "1-based column in a cron expression"},
        })),
    })
}

/// `{"$ref": …/responses/Problem}`.
fn problem() -> Value {
    json!({"$ref": "#/components/responses/Problem"})
}

fn json_body(of: Value) -> Value {
    json!({"content": {"application/json": {"schema": of}}})
}

fn ok(description: &str, of: Value) -> Value {
    let mut r = json_body(of);
    r["description"] = json!(description);
    r
}

/// One operation. `errors` lists the problem statuses beyond those every
/// protected operation may answer (401, 403, 503).
fn op(id: &str, summary: &str, params: &[Value], success: (u16, Value), errors: &[u16]) -> Value {
    let mut responses = Map::new();
    responses.insert(success.0.to_string(), success.1);
    for code in errors.iter().chain(&[401, 403, 503]) {
        responses.insert(code.to_string(), problem());
    }
    json!({
        "operationId": id,
        "summary": summary,
        "parameters": params,
        "responses": responses,
    })
}

fn with_body(operation: Value, of: Value, required: bool) -> Value {
    with_example(operation, of, required, Value::Null)
}

/// A request body with an example (the fuzzer starts from it).
fn with_example(mut operation: Value, of: Value, required: bool, example: Value) -> Value {
    let mut body = json_body(of);
    if !example.is_null() {
        body["content"]["application/json"]["example"] = example;
    }
    body["required"] = json!(required);
    operation["requestBody"] = body;
    operation
}

fn public(mut operation: Value) -> Value {
    operation["security"] = json!([]);
    if let Some(r) = operation["responses"].as_object_mut() {
        r.remove("401");
        r.remove("403");
    }
    operation
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description,
           "schema": {"type": "string"}})
}

fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description,
           "schema": schema})
}

fn limit(max: u32) -> Value {
    query(
        "limit",
        "Page size",
        json!({"type": "integer", "minimum": 1, "maximum": max, "default": 50}),
    )
}

fn if_match() -> Value {
    json!({"name": "If-Match", "in": "header", "required": true,
           "description": "The task's current `version`",
           "schema": {"type": "string", "pattern": "^\"?[0-9]+\"?$"}})
}

fn paths() -> Value {
    let task = path_param("key", "Task id or name");
    let mut run = path_param("id", "Run id");
    run["schema"]["format"] = json!("uuid");
    let task_ok = ok("The task", schema("Task"));
    json!({
        "/healthz": {"get": public(op("healthz", "The process is up", &[],
            (200, json!({"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}})), &[]))},
        "/readyz": {"get": public(op("readyz", "The database is reachable", &[],
            (200, ok("Ready", object(&["status"], json!({"status": {"const": "ready"}})))), &[]))},
        "/api/v1/openapi.json": {"get": public(op("openapi", "This document", &[],
            (200, ok("OpenAPI 3.1", json!({"type": "object"}))), &[]))},
        "/api/v1/tasks": {
            "post": with_example(op("createTask", "Create a task", &[],
                (201, ok("The stored task", schema("Task"))), &[400, 409, 413, 415, 422]),
                schema("TaskSpec"), true, json!({
                    "name": "daily-report",
                    "schedule": {"cron": "0 9 * * 1-5", "timezone": "Asia/Shanghai"},
                    "action": {"type": "http", "method": "POST", "url": "http://127.0.0.1:9000/agent",
                               "headers": {"X-Team": "sales"}, "body": {"question": "yesterday's sales"}},
                    "retry": {"max_attempts": 3, "backoff": {"initial": "2s", "max": "5m"}},
                    "timeout": "30s", "overlap": "forbid",
                    "misfire": {"policy": "once", "grace": "10m"},
                    "labels": {"team": "sales"},
                })),
            "get": op("listTasks", "List tasks, oldest first", &[
                query("state", "Only tasks in this state",
                      json!({"type": "string", "enum": ["active", "paused", "cancelled", "completed"]})),
                query("label", "`key=value`", json!({"type": "string", "pattern": "="})),
                query("name_prefix", "Names starting with this", json!({"type": "string"})),
                query("after", "Cursor: the `next` of the previous page", json!({"type": "string", "format": "uuid"})),
                limit(500),
            ], (200, ok("A page of tasks", schema("TaskList"))), &[400]),
        },
        "/api/v1/tasks/{key}": {
            "get": op("getTask", "One task", std::slice::from_ref(&task), (200, task_ok.clone()), &[404]),
            "patch": with_body(op("patchTask", "Change a task (JSON merge patch)",
                &[task.clone(), if_match()], (200, task_ok.clone()), &[400, 404, 409, 412, 413, 415, 422, 428]),
                schema("TaskPatch"), true),
            "delete": op("deleteTask", "Delete a task (kept as cancelled, with its runs)",
                std::slice::from_ref(&task), (204, json!({"description": "Deleted"})), &[404]),
        },
        "/api/v1/tasks/{key}/pause": {"post": op("pauseTask", "Pause a task",
            std::slice::from_ref(&task), (200, task_ok.clone()), &[404, 409])},
        "/api/v1/tasks/{key}/resume": {"post": op("resumeTask", "Resume a paused task from now",
            std::slice::from_ref(&task), (200, task_ok.clone()), &[404, 409])},
        "/api/v1/tasks/{key}/trigger": {"post": with_body(op("triggerTask", "Run a task now",
            std::slice::from_ref(&task), (202, ok("The queued run", schema("Run"))), &[400, 404, 413, 415, 422]),
            schema("TriggerRequest"), false)},
        "/api/v1/tasks/{key}/upcoming": {"get": op("upcoming", "The task's next fire times", &[task.clone(),
            query("count", "How many", json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 5}))],
            (200, ok("Upcoming fires", schema("Upcoming"))), &[400, 404, 409])},
        "/api/v1/tasks/{key}/runs": {"get": op("taskRuns", "The task's runs, newest first", &[task.clone(), limit(1000)],
            (200, ok("Runs", json!({"type": "array", "items": schema("Run")}))), &[400, 404])},
        "/api/v1/runs": {"get": op("listRuns", "Runs, newest first", &[
            query("status", "Only runs in this status", schema("RunStatus")),
            query("task", "Task id or name", json!({"type": "string"})),
            query("before", "Cursor: the `next` of the previous page", json!({"type": "string", "format": "uuid"})),
            limit(500),
        ], (200, ok("A page of runs", schema("RunList"))), &[400, 404])},
        "/api/v1/runs/{id}": {"get": op("getRun", "One run with its attempts", std::slice::from_ref(&run),
            (200, ok("The run", schema("RunWithAttempts"))), &[400, 404])},
        "/api/v1/runs/{id}/cancel": {"post": op("cancelRun", "Cancel a run that has not finished",
            std::slice::from_ref(&run), (200, ok("The cancelled run", schema("Run"))), &[400, 404, 409])},
        "/api/v1/nodes": {"get": op("listNodes", "Nodes that ran the engine on this database", &[],
            (200, ok("Nodes", schema("NodeList"))), &[])},
        "/api/v1/cron/preview": {"post": with_example(op("cronPreview", "Check a cron expression and show its next fires", &[],
            (200, ok("Valid; the next fires", schema("Preview"))), &[400, 413, 415, 422]),
            schema("PreviewRequest"), true,
            json!({"expression": "0 9 * * 1-5", "timezone": "Asia/Shanghai", "count": 3}))},
    })
}

/// The whole document.
pub(crate) fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "agentcron",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A scheduler that gives AI agents a calendar. Errors are \
                application/problem+json (RFC 9457). With API tokens configured every \
                /api/v1 endpoint except this document needs `Authorization: Bearer <token>`: \
                GET needs the read role, everything else write.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}, {}],
        "paths": paths(),
        "components": {
            "schemas": schemas(),
            "responses": {
                "Problem": {
                    "description": "An RFC 9457 problem naming the field at fault",
                    "content": {"application/problem+json": {"schema": schema("Problem")}},
                },
            },
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "A token from `agentcron token create`"},
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every `$ref` in `v`.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(o) => {
                for (k, v) in o {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => refs(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn operations_are_exactly_the_routes() {
        let doc = document();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("path item").keys() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
        let routed: BTreeSet<_> = crate::api::route_table()
            .into_iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        let missing: Vec<_> = routed.difference(&documented).collect();
        let extra: Vec<_> = documented.difference(&routed).collect();
        assert!(
            missing.is_empty(),
            "routes missing from the document: {missing:?}"
        );
        assert!(extra.is_empty(), "documented but not routed: {extra:?}");
    }

    #[test]
    fn document_is_well_formed_openapi_3_1() {
        let doc = document();
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());
        // Every reference resolves.
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 40, "{} refs", all.len());
        for r in all {
            let pointer = r.strip_prefix('#').expect("local reference");
            assert!(doc.pointer(pointer).is_some(), "dangling $ref {r}");
        }
        let mut ids = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            // Path templates' parameters are declared, required, in: path.
            let templated: BTreeSet<&str> = path
                .split('/')
                .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            for (method, op) in item.as_object().expect("path item") {
                assert!(
                    ["get", "post", "patch", "delete", "put"].contains(&method.as_str()),
                    "{method}"
                );
                let id = op["operationId"].as_str().expect("operationId");
                assert!(ids.insert(id.to_string()), "operationId {id} twice");
                let declared: BTreeSet<&str> = op["parameters"]
                    .as_array()
                    .expect("parameters")
                    .iter()
                    .filter(|p| p["in"] == "path")
                    .inspect(|p| assert_eq!(p["required"], true, "{id}"))
                    .filter_map(|p| p["name"].as_str())
                    .collect();
                assert_eq!(declared, templated, "{method} {path}");
                let responses = op["responses"].as_object().expect("responses");
                assert!(
                    responses.keys().any(|c| c.starts_with('2')),
                    "{id} has no success response"
                );
                for (code, r) in responses {
                    assert!(
                        code.len() == 3 && code.parse::<u16>().is_ok(),
                        "{id}: {code}"
                    );
                    assert!(
                        r.get("$ref").is_some() || r["description"].is_string(),
                        "{id} {code} has no description"
                    );
                }
            }
        }
    }
}
