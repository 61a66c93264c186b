//! The CLI client: `agentcron task list|show|pause|resume|run|rm`,
//! `agentcron runs list|show|cancel` and `agentcron nodes` talk to a running server's API (`--server`, or
//! `AGENTCRON_SERVER`, default `http://127.0.0.1:8080`). Tables for people,
//! `--json` for scripts; a failure prints the server's problem in one line.

use std::io::Write;

use anyhow::{Context as _, bail};
use clap::Subcommand;

/// Where the server is, and how to print.
#[derive(Debug, clap::Args)]
pub(crate) struct Target {
    /// The server's base URL.
    #[arg(
        long,
        env = "AGENTCRON_SERVER",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    server: String,
    /// Print the server's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TaskCommand {
    /// List tasks (optionally by state or label `key=value`).
    List {
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        label: Option<String>,
    },
    /// Show one task by id or name.
    Show { task: String },
    /// Pause a task.
    Pause { task: String },
    /// Resume a paused task from now on.
    Resume { task: String },
    /// Run a task now.
    Run { task: String },
    /// Delete a task (it is kept as cancelled, with its history).
    Rm { task: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs, newest first (optionally of one task, in one status).
    List {
        #[arg(long)]
        task: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Show one run with its attempts.
    Show { run: String },
    /// Cancel a run that has not finished.
    Cancel { run: String },
}

fn client() -> anyhow::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .build()
        .context("cannot build the HTTP client")
}

/// Sends a request and returns the JSON answer (`null` for 204), or fails
/// with the server's problem in one line.
async fn send(
    target: &Target,
    request: reqwest::RequestBuilder,
) -> anyhow::Result<serde_json::Value> {
    let response = request
        .send()
        .await
        .with_context(|| format!("cannot reach the agentcron server at {}", target.server))?;
    let status = response.status();
    if status == reqwest::StatusCode::NO_CONTENT {
        return Ok(serde_json::Value::Null);
    }
    let url = response.url().to_string();
    let body: serde_json::Value = response
        .json()
        .await
        .with_context(|| format!("{url} did not answer JSON"))?;
    if !status.is_success() {
        let detail = body["detail"].as_str().unwrap_or("no detail");
        match body["field"].as_str() {
            Some(field) => bail!("{status}: {detail} (field {field})"),
            None => bail!("{status}: {detail}"),
        }
    }
    Ok(body)
}

fn url(target: &Target, path: &str) -> String {
    format!("{}{path}", target.server.trim_end_matches('/'))
}

/// GETs `path` with `query`.
async fn get(
    target: &Target,
    path: &str,
    query: &[(&str, String)],
) -> anyhow::Result<serde_json::Value> {
    send(target, client()?.get(url(target, path)).query(query)).await
}

/// POSTs to `path` (no body).
async fn post(target: &Target, path: &str) -> anyhow::Result<serde_json::Value> {
    send(target, client()?.post(url(target, path))).await
}

fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Prints rows as aligned columns.
fn table(out: &mut impl Write, head: &[&str], rows: &[Vec<String>]) -> anyhow::Result<()> {
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    writeln!(out, "{}", line(head.to_vec()))?;
    for row in rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    Ok(())
}

fn print_json(out: &mut impl Write, v: &serde_json::Value) -> anyhow::Result<()> {
    writeln!(out, "{}", serde_json::to_string_pretty(v)?)?;
    Ok(())
}

pub(crate) async fn task(
    cmd: TaskCommand,
    target: &Target,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match cmd {
        TaskCommand::List { state, label } => {
            let mut query = vec![("limit", "500".to_string())];
            query.extend(state.map(|s| ("state", s)));
            query.extend(label.map(|l| ("label", l)));
            let body = get(target, "/api/v1/tasks", &query).await?;
            if target.json {
                return print_json(out, &body["tasks"]);
            }
            let rows: Vec<Vec<String>> = body["tasks"]
                .as_array()
                .map(|tasks| {
                    tasks
                        .iter()
                        .map(|t| {
                            vec![
                                cell(&t["name"]),
                                cell(&t["state"]),
                                cell(&t["next_fire_at"]),
                                cell(&t["id"]),
                            ]
                        })
                        .collect()
                })
                .unwrap_or_default();
            table(out, &["NAME", "STATE", "NEXT FIRE", "ID"], &rows)
        }
        TaskCommand::Show { task } => {
            let body = get(target, &format!("/api/v1/tasks/{task}"), &[]).await?;
            print_json(out, &body)
        }
        TaskCommand::Pause { task } => {
            let body = post(target, &format!("/api/v1/tasks/{task}/pause")).await?;
            say(out, target, &body, format!("paused {task}"))
        }
        TaskCommand::Resume { task } => {
            let body = post(target, &format!("/api/v1/tasks/{task}/resume")).await?;
            say(
                out,
                target,
                &body,
                format!("resumed {task}; next fire {}", cell(&body["next_fire_at"])),
            )
        }
        TaskCommand::Run { task } => {
            let body = post(target, &format!("/api/v1/tasks/{task}/trigger")).await?;
            say(
                out,
                target,
                &body,
                format!("started run {}", cell(&body["id"])),
            )
        }
        TaskCommand::Rm { task } => {
            let path = url(target, &format!("/api/v1/tasks/{task}"));
            send(target, client()?.delete(path)).await?;
            say(
                out,
                target,
                &serde_json::json!({"deleted": task}),
                format!("deleted {task}"),
            )
        }
    }
}

/// One line for people, or the JSON with `--json`.
fn say(
    out: &mut impl Write,
    target: &Target,
    body: &serde_json::Value,
    line: String,
) -> anyhow::Result<()> {
    if target.json {
        return print_json(out, body);
    }
    writeln!(out, "{line}")?;
    Ok(())
}

pub(crate) async fn runs(
    cmd: RunsCommand,
    target: &Target,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (task, status, limit) = match cmd {
        RunsCommand::List {
            task,
            status,
            limit,
        } => (task, status, limit),
        RunsCommand::Show { run } => {
            let body = get(target, &format!("/api/v1/runs/{run}"), &[]).await?;
            return print_json(out, &body);
        }
        RunsCommand::Cancel { run } => {
            let body = post(target, &format!("/api/v1/runs/{run}/cancel")).await?;
            return say(out, target, &body, format!("cancelled run {run}"));
        }
    };
    let mut query = vec![("limit", limit.to_string())];
    query.extend(task.map(|t| ("task", t)));
    query.extend(status.map(|s| ("status", s)));
    let body = get(target, "/api/v1/runs", &query).await?;
    if target.json {
        return print_json(out, &body["runs"]);
    }
    let rows: Vec<Vec<String>> = body["runs"]
        .as_array()
        .map(|runs| {
            runs.iter()
                .map(|r| {
                    vec![
                        cell(&r["scheduled_for"]),
                        cell(&r["status"]),
                        cell(&r["attempt"]),
                        cell(&r["trigger"]),
                        cell(&r["error"]),
                        cell(&r["id"]),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    table(
        out,
        &[
            "SCHEDULED FOR",
            "STATUS",
            "ATTEMPT",
            "TRIGGER",
            "ERROR",
            "ID",
        ],
        &rows,
    )
}

pub(crate) async fn nodes(target: &Target, out: &mut impl Write) -> anyhow::Result<()> {
    let body = get(target, "/api/v1/nodes", &[]).await?;
    if target.json {
        return print_json(out, &body["nodes"]);
    }
    let rows: Vec<Vec<String>> = body["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .map(|n| {
                    vec![
                        cell(&n["id"]),
                        cell(&n["host"]),
                        cell(&n["version"]),
                        cell(&n["heartbeat_at"]),
                        cell(&n["skew_ms"]),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    table(
        out,
        &["NODE", "HOST", "VERSION", "LAST SEEN", "SKEW MS"],
        &rows,
    )
}
