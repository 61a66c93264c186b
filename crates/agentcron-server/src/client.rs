//! The CLI client: `agentcron task list|show|pause|resume|run|rm`,
//! `agentcron runs list|show|cancel` and `agentcron nodes` talk to a running server's API (`--server`, or
//! `AGENTCRON_SERVER`, default `http://127.0.0.1:8080`). Tables for people,
//! `--json` for scripts; a failure prints the server's problem in one line.

use std::io::Write;

use anyhow::{Context as _, bail};
use clap::Subcommand;

use crate::UsageError;

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
    pub(crate) server: String,
    /// Print the server's JSON instead of a table.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// API token (needed when the server has tokens configured).
    #[arg(long, env = "AGENTCRON_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
}

/// A task's fields as flags (`task add`, `task edit`).
#[derive(Debug, Default, clap::Args)]
pub(crate) struct Fields {
    /// Cron expression, e.g. "0 9 * * 1-5".
    #[arg(long, help_heading = "Schedule")]
    cron: Option<String>,
    /// IANA time zone of --cron (default UTC), e.g. Asia/Shanghai.
    #[arg(long, requires = "cron", help_heading = "Schedule")]
    tz: Option<String>,
    /// Fixed interval, e.g. 25m.
    #[arg(long, help_heading = "Schedule")]
    every: Option<String>,
    /// One fire at an instant, e.g. 2026-12-01T09:00:00+08:00.
    #[arg(long, help_heading = "Schedule")]
    once: Option<String>,
    /// Fire only when triggered.
    #[arg(long, help_heading = "Schedule")]
    manual: bool,
    /// Call this URL (http action).
    #[arg(long, value_name = "URL", help_heading = "Action")]
    http: Option<String>,
    /// HTTP method (default POST).
    #[arg(long, requires = "http", help_heading = "Action")]
    method: Option<String>,
    /// Extra request header (repeatable).
    #[arg(
        long = "header",
        value_name = "NAME:VALUE",
        requires = "http",
        help_heading = "Action"
    )]
    headers: Vec<String>,
    /// JSON request body.
    #[arg(long, value_name = "JSON", requires = "http", help_heading = "Action")]
    body: Option<String>,
    /// Run the in-process handler registered under this name.
    #[arg(long, value_name = "NAME", help_heading = "Action")]
    handler: Option<String>,
    /// JSON payload for --handler.
    #[arg(
        long,
        value_name = "JSON",
        requires = "handler",
        help_heading = "Action"
    )]
    payload: Option<String>,
    /// Run this command (exec action): give it after `--`.
    #[arg(last = true, value_name = "COMMAND", help_heading = "Action")]
    command: Vec<String>,
    /// Per-attempt time limit, e.g. 30s.
    #[arg(long)]
    timeout: Option<String>,
    /// Attempts in all (1 = no retry).
    #[arg(long)]
    max_attempts: Option<u32>,
    /// allow, forbid, replace or queue.
    #[arg(long)]
    overlap: Option<String>,
    /// Label (repeatable); on edit it adds or changes that label.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Free text.
    #[arg(long)]
    description: Option<String>,
}

/// A `--body`/`--payload` argument.
fn json_arg(flag: &str, text: &str) -> anyhow::Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| UsageError(format!("--{flag} is not JSON: {e}")).into())
}

impl Fields {
    /// The schedule the flags give, if any.
    fn schedule(&self) -> anyhow::Result<Option<serde_json::Value>> {
        let given = [
            self.cron.is_some(),
            self.every.is_some(),
            self.once.is_some(),
            self.manual,
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            bail!(UsageError(
                "give one schedule: --cron, --every, --once or --manual".into()
            ));
        }
        Ok(if let Some(cron) = &self.cron {
            let mut s = serde_json::json!({"cron": cron});
            if let Some(tz) = &self.tz {
                s["timezone"] = tz.clone().into();
            }
            Some(s)
        } else if let Some(every) = &self.every {
            Some(serde_json::json!({"every": every}))
        } else if let Some(once) = &self.once {
            Some(serde_json::json!({"once": once}))
        } else if self.manual {
            Some(serde_json::json!({"manual": true}))
        } else {
            None
        })
    }

    /// The action the flags give, if any.
    fn action(&self) -> anyhow::Result<Option<serde_json::Value>> {
        let given = [
            self.http.is_some(),
            self.handler.is_some(),
            !self.command.is_empty(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            bail!(UsageError(
                "give one action: --http URL, --handler NAME or -- COMMAND…".into()
            ));
        }
        Ok(if let Some(url) = &self.http {
            let mut a = serde_json::json!({"type": "http", "url": url});
            if let Some(m) = &self.method {
                a["method"] = m.to_uppercase().into();
            }
            let mut headers = serde_json::Map::new();
            for h in &self.headers {
                let (k, v) = h
                    .split_once(':')
                    .ok_or_else(|| UsageError(format!("--header `{h}` is not NAME:VALUE")))?;
                headers.insert(k.trim().to_string(), v.trim().into());
            }
            if !headers.is_empty() {
                a["headers"] = headers.into();
            }
            if let Some(b) = &self.body {
                a["body"] = json_arg("body", b)?;
            }
            Some(a)
        } else if let Some(name) = &self.handler {
            let mut a = serde_json::json!({"type": "handler", "name": name});
            if let Some(p) = &self.payload {
                a["payload"] = json_arg("payload", p)?;
            }
            Some(a)
        } else if !self.command.is_empty() {
            Some(serde_json::json!({"type": "exec", "command": self.command}))
        } else {
            None
        })
    }

    /// Lays the given flags over `spec` (a task definition as JSON).
    fn overlay(&self, spec: &mut serde_json::Value) -> anyhow::Result<()> {
        if let Some(s) = self.schedule()? {
            spec["schedule"] = s;
        }
        if let Some(a) = self.action()? {
            spec["action"] = a;
        }
        if let Some(t) = &self.timeout {
            spec["timeout"] = t.clone().into();
        }
        if let Some(n) = self.max_attempts {
            spec["retry"]["max_attempts"] = n.into();
        }
        if let Some(o) = &self.overlap {
            spec["overlap"] = o.clone().into();
        }
        if let Some(d) = &self.description {
            spec["description"] = d.clone().into();
        }
        for label in &self.labels {
            let (k, v) = label
                .split_once('=')
                .ok_or_else(|| UsageError(format!("--label `{label}` is not KEY=VALUE")))?;
            spec["labels"][k] = v.into();
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.cron.is_none()
            && self.every.is_none()
            && self.once.is_none()
            && !self.manual
            && self.http.is_none()
            && self.handler.is_none()
            && self.command.is_empty()
            && self.timeout.is_none()
            && self.max_attempts.is_none()
            && self.overlap.is_none()
            && self.labels.is_empty()
            && self.description.is_none()
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum TaskCommand {
    /// Create a task from flags, or from a file (-f task.toml|task.json).
    ///
    /// agentcron task add daily-report --cron "0 9 * * 1-5" --tz Asia/Shanghai --http http://127.0.0.1:9000/agent
    ///
    /// agentcron task add backup --every 6h -- /usr/local/bin/backup --quick
    Add {
        /// The task's name (with flags).
        name: Option<String>,
        /// A file with one task's definition (TOML or JSON; `-` for stdin).
        #[arg(short = 'f', long, value_name = "FILE", conflicts_with = "name")]
        file: Option<std::path::PathBuf>,
        #[command(flatten)]
        fields: Fields,
    },
    /// Change a task: by flags, by a file with its whole new definition, or
    /// (with neither) in $VISUAL / $EDITOR as TOML.
    Edit {
        task: String,
        /// A file with the task's whole new definition (TOML or JSON).
        #[arg(short = 'f', long, value_name = "FILE")]
        file: Option<std::path::PathBuf>,
        #[command(flatten)]
        fields: Fields,
    },
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

/// An HTTP client that sends the token, if there is one.
fn client(target: &Target) -> anyhow::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = target.token.as_deref().filter(|t| !t.is_empty()) {
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| UsageError("the API token has characters a header cannot carry".into()))?;
        value.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    reqwest::Client::builder()
        .default_headers(headers)
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
pub(crate) async fn get(
    target: &Target,
    path: &str,
    query: &[(&str, String)],
) -> anyhow::Result<serde_json::Value> {
    send(target, client(target)?.get(url(target, path)).query(query)).await
}

/// POSTs to `path` (no body).
async fn post(target: &Target, path: &str) -> anyhow::Result<serde_json::Value> {
    send(target, client(target)?.post(url(target, path))).await
}

/// Sends `body` as JSON with `method`; `if_match` is the expected version.
pub(crate) async fn send_json(
    target: &Target,
    method: reqwest::Method,
    path: &str,
    body: &impl serde::Serialize,
    if_match: Option<i64>,
) -> anyhow::Result<serde_json::Value> {
    let mut request = client(target)?
        .request(method, url(target, path))
        .json(body);
    if let Some(version) = if_match {
        request = request.header(reqwest::header::IF_MATCH, version.to_string());
    }
    send(target, request).await
}

/// DELETEs `path`.
pub(crate) async fn delete(target: &Target, path: &str) -> anyhow::Result<serde_json::Value> {
    send(target, client(target)?.delete(url(target, path))).await
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

pub(crate) fn print_json(out: &mut impl Write, v: &serde_json::Value) -> anyhow::Result<()> {
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
        TaskCommand::Add { name, file, fields } => {
            let spec = match file {
                Some(path) => {
                    if !fields.is_empty() {
                        bail!(UsageError("give either -f FILE or flags, not both".into()));
                    }
                    serde_json::to_value(read_one(&path)?)?
                }
                None => {
                    let Some(name) = name else {
                        bail!(UsageError("give the task's name, or -f FILE".into()));
                    };
                    let mut spec = serde_json::json!({"name": name});
                    fields.overlay(&mut spec)?;
                    for (key, hint) in [
                        ("schedule", "--cron, --every, --once or --manual"),
                        ("action", "--http URL, --handler NAME or -- COMMAND…"),
                    ] {
                        if spec.get(key).is_none() {
                            bail!(UsageError(format!("a task needs a {key}: give {hint}")));
                        }
                    }
                    spec
                }
            };
            let body =
                send_json(target, reqwest::Method::POST, "/api/v1/tasks", &spec, None).await?;
            say(
                out,
                target,
                &body,
                format!(
                    "created {} ({}); next fire {}",
                    cell(&body["name"]),
                    cell(&body["id"]),
                    cell(&body["next_fire_at"])
                ),
            )
        }
        TaskCommand::Edit { task, file, fields } => {
            let current = get(target, &format!("/api/v1/tasks/{task}"), &[]).await?;
            let old = serde_json::to_value(crate::declare::spec_of(&current)?)?;
            let new = match (file, fields.is_empty()) {
                (Some(_), false) => {
                    bail!(UsageError("give either -f FILE or flags, not both".into()))
                }
                (Some(path), true) => serde_json::to_value(read_one(&path)?)?,
                (None, false) => {
                    let mut new = old.clone();
                    fields.overlay(&mut new)?;
                    new
                }
                (None, true) => edit_in_editor(&crate::declare::spec_of(&current)?)?,
            };
            let patch = crate::declare::replace_patch(&old, &new);
            if patch.as_object().is_some_and(serde_json::Map::is_empty) {
                return say(out, target, &current, format!("{task}: no changes"));
            }
            let id = current["id"].as_str().unwrap_or_default();
            let body = send_json(
                target,
                reqwest::Method::PATCH,
                &format!("/api/v1/tasks/{id}"),
                &patch,
                current["version"].as_i64(),
            )
            .await?;
            let fields: Vec<&str> = patch
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect())
                .unwrap_or_default();
            say(
                out,
                target,
                &body,
                format!(
                    "changed {} ({}); version {}, next fire {}",
                    cell(&body["name"]),
                    fields.join(", "),
                    cell(&body["version"]),
                    cell(&body["next_fire_at"])
                ),
            )
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
            delete(target, &format!("/api/v1/tasks/{task}")).await?;
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

/// One task's definition from a file: TOML (top-level keys of the task, or
/// one `[[task]]`) or JSON by extension; `-` reads standard input as TOML.
fn read_one(path: &std::path::Path) -> anyhow::Result<agentcron::TaskSpec> {
    let text = if path == std::path::Path::new("-") {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("cannot read standard input")?;
        text
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?
    };
    parse_one(&text, path.extension().is_some_and(|e| e == "json"))
        .map_err(|e| UsageError(format!("{}: {e}", path.display())).into())
}

fn parse_one(text: &str, json: bool) -> Result<agentcron::TaskSpec, String> {
    let spec: agentcron::TaskSpec = if json {
        serde_json::from_str(text).map_err(|e| e.to_string())?
    } else {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct One {
            task: [agentcron::TaskSpec; 1],
        }
        match toml::from_str::<One>(text) {
            Ok(One { task: [spec] }) => spec,
            Err(_) => toml::from_str(text).map_err(|e| e.to_string().trim().to_string())?,
        }
    };
    spec.validate(&spec.name).map_err(|e| e.to_string())?;
    Ok(spec)
}

/// Opens the definition in the user's editor as TOML and returns what was
/// saved (as JSON), validated.
fn edit_in_editor(spec: &agentcron::TaskSpec) -> anyhow::Result<serde_json::Value> {
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    let dir = tempfile_dir()?;
    let path = dir.join(format!("{}.toml", spec.name));
    let text = toml::to_string(spec).context(
        "this task cannot be edited as TOML (a JSON null in its body or payload); use -f FILE.json",
    )?;
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    // The editor command may carry arguments (`code --wait`).
    let mut words = editor.split_whitespace();
    let program = words.next().unwrap_or("vi");
    let status = std::process::Command::new(program)
        .args(words)
        .arg(&path)
        .status()
        .with_context(|| format!("cannot start the editor `{editor}`"))?;
    if !status.success() {
        bail!("the editor `{editor}` exited with {status}; nothing was changed");
    }
    let saved = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    let spec = parse_one(&saved, false)
        .map_err(|e| UsageError(format!("the edited definition: {e}; nothing was changed")))?;
    Ok(serde_json::to_value(spec)?)
}

/// A fresh private directory for the editor's file.
fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir =
        std::env::temp_dir().join(format!("agentcron-edit-{}", uuid::Uuid::now_v7().simple()));
    // Private: a definition may carry secrets in headers or environment.
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}
