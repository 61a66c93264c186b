//! API tokens end to end: `agentcron token create` writes hashes into a
//! config file, a server started with it refuses requests without a token
//! (401), allows reads to a read token and refuses it changes (403), and may
//! then listen beyond loopback. The CLI client sends `AGENTCRON_TOKEN`.

mod support;

use std::process::Command;

use support::{Server, cli_env, client, serve_on};

/// `agentcron token create --role ROLE --config FILE`; returns the secret.
fn create_token(config: &std::path::Path, role: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["token", "create", "--role", role, "--config"])
        .arg(config)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("shown only this once"), "{text}");
    text.lines().next().expect("the secret").to_string()
}

/// A server whose config holds a read and a write token.
fn server_with_tokens(listen: &str) -> (Server, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentcron.toml");
    let read = create_token(&config, "read");
    let write = create_token(&config, "write");
    let text = std::fs::read_to_string(&config).expect("config");
    assert!(
        !text.contains(&read) && !text.contains(&write),
        "secrets are not stored"
    );
    (serve_on(&text, listen), read, write)
}

async fn status(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
) -> (u16, serde_json::Value, Option<String>) {
    let mut request = client().request(method, server.url(path));
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    if path.ends_with("/tasks") {
        request = request.json(&serde_json::json!({
            "name": "t", "schedule": {"manual": true}, "action": {"type": "handler", "name": "h"}}));
    }
    let response = request.send().await.expect("request");
    let code = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response.json().await.unwrap_or(serde_json::Value::Null);
    (code, body, challenge)
}

#[tokio::test]
async fn tokens_gate_the_api_by_role() {
    use reqwest::Method;
    let (server, read, write) = server_with_tokens("127.0.0.1:0");

    // Probes and the API description stay open.
    for path in ["/healthz", "/readyz", "/api/v1/openapi.json", "/api/docs"] {
        let (code, _, _) = status(&server, Method::GET, path, None).await;
        assert_eq!(code, 200, "{path}");
    }
    // No token, a wrong token, a wrong scheme: 401 with a challenge.
    let (code, problem, challenge) = status(&server, Method::GET, "/api/v1/tasks", None).await;
    assert_eq!(code, 401);
    assert_eq!(challenge.as_deref(), Some("Bearer realm=\"agentcron\""));
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Authorization: Bearer")),
        "{problem}"
    );
    let (code, _, _) = status(&server, Method::GET, "/api/v1/tasks", Some("act_nope")).await;
    assert_eq!(code, 401);

    // read: GET yes, POST no (403 naming the roles).
    let (code, _, _) = status(&server, Method::GET, "/api/v1/tasks", Some(&read)).await;
    assert_eq!(code, 200);
    let (code, problem, _) = status(&server, Method::POST, "/api/v1/tasks", Some(&read)).await;
    assert_eq!(code, 403);
    assert_eq!(
        problem["detail"],
        "token `read-1` has the read role; this needs write"
    );
    // write: both.
    let (code, _, _) = status(&server, Method::POST, "/api/v1/tasks", Some(&write)).await;
    assert_eq!(code, 201);
    let (code, _, _) = status(&server, Method::POST, "/api/v1/tasks/t/trigger", None).await;
    assert_eq!(code, 401);

    // The CLI client sends AGENTCRON_TOKEN; problems come back in one line.
    let out = cli_env(&server, &["task", "list"], &[("AGENTCRON_TOKEN", &read)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("t  "));
    let out = cli_env(&server, &["task", "rm", "t"], &[("AGENTCRON_TOKEN", &read)]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("403 Forbidden: token `read-1` has the read role; this needs write"),
        "{err}"
    );
    let out = cli_env(&server, &["task", "list"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    let out = cli_env(
        &server,
        &["task", "rm", "t", "--token", &write],
        &[("AGENTCRON_TOKEN", &read)],
    );
    assert!(out.status.success(), "--token wins over the environment");
}

#[tokio::test]
async fn with_tokens_the_server_may_listen_beyond_loopback() {
    let (server, read, _) = server_with_tokens("0.0.0.0:0");
    let (code, _, _) = status(&server, reqwest::Method::GET, "/api/v1/nodes", Some(&read)).await;
    assert_eq!(code, 200);
}

#[test]
fn a_bad_token_entry_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("agentcron.toml"),
        "[[token]]\nname = \"x\"\nrole = \"read\"\nhash = \"secret\"\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env_remove("AGENTCRON_TOKEN")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("token `x`: hash must be sha256:"), "{err}");
}
