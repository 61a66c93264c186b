//! What the server's integration tests share: a real `agentcron serve`
//! process on 127.0.0.1:0 over a SQLite file in a temporary directory, the
//! CLI client against it, polling, and a JSON Schema check of answers
//! against the served OpenAPI document.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub struct Server {
    child: Child,
    pub base: String,
    pub dir: tempfile::TempDir,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agentcron serve` on a free loopback port and waits for its address.
pub fn serve() -> Server {
    serve_with("")
}

/// Like [`serve`], with `config` as its `agentcron.toml`.
pub fn serve_with(config: &str) -> Server {
    serve_on(config, "127.0.0.1:0")
}

/// Like [`serve_with`], listening on `listen`.
pub fn serve_on(config: &str, listen: &str) -> Server {
    serve_full(config, listen, None)
}

/// Like [`serve_with`], on the database at `url` (a SQLite file in the
/// server's directory when `None`).
pub fn serve_with_database(config: &str, url: &str) -> Server {
    serve_full(config, "127.0.0.1:0", Some(url))
}

fn serve_full(config: &str, listen: &str, database: Option<&str>) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("agentcron.toml"), config).expect("config");
    let db = database.map_or_else(
        || format!("sqlite://{}", dir.path().join("agentcron.db").display()),
        str::to_string,
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args([
            "serve",
            "--database",
            &db,
            "--listen",
            listen,
            "--log-format",
            "json",
        ])
        .current_dir(dir.path())
        .env_remove("AGENTCRON_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentcron starts");
    let stderr = child.stderr.take().expect("piped");
    let mut lines = BufReader::new(stderr).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("serve logs its address before exiting")
            .expect("utf-8 log");
        if let Some(rest) = line.split("listening on ").nth(1) {
            // A wildcard address is reached on loopback.
            break rest
                .replace("0.0.0.0", "127.0.0.1")
                .trim_end_matches(['"', '}'])
                .split('"')
                .next()
                .expect("address")
                .to_string();
        }
    };
    // Keep draining the log so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server { child, base, dir }
}

/// Sending a request and reading its answer in one step (tests only: a
/// failure panics).
pub trait Answer {
    /// The answer's status code.
    async fn status_code(self) -> u16;
    /// The answer's body as JSON.
    async fn json_value(self) -> Value;
}

impl Answer for reqwest::RequestBuilder {
    async fn status_code(self) -> u16 {
        self.send()
            .await
            .expect("the request is answered")
            .status()
            .as_u16()
    }

    async fn json_value(self) -> Value {
        self.send()
            .await
            .expect("the request is answered")
            .json()
            .await
            .expect("a JSON answer")
    }
}

/// POSTs a 2 MiB body to `path` over raw HTTP and returns the status,
/// content type and body of the answer. The server answers 413 as soon as it
/// sees the length, possibly before the body is sent, and closes: an HTTP
/// client may then report a broken request instead of the answer, so this
/// ignores write errors and reads what came back.
pub async fn post_oversized(base: &str, path: &str) -> (u16, Option<String>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://").to_string();
    let mut tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let body = "a".repeat(2 << 20);
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = tcp.write_all(head.as_bytes()).await;
    let _ = tcp.write_all(body.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tcp.read_to_end(&mut answer),
    )
    .await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let content_type = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-type")
            .then(|| v.trim().to_string())
    });
    (status, content_type, body.to_string())
}

pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Polls `GET url` until `done` accepts the JSON, up to 10 s.
pub async fn until(
    http: &reqwest::Client,
    url: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let v: Value = http
            .get(url)
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        if done(&v) {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Runs the CLI client against `server` (no token).
pub fn cli(server: &Server, args: &[&str]) -> std::process::Output {
    cli_env(server, args, &[])
}

/// Runs the CLI client against `server` with extra environment variables,
/// in the server's directory.
pub fn cli_env(server: &Server, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentcron"));
    cmd.args(args)
        .env("AGENTCRON_SERVER", &server.base)
        .env_remove("AGENTCRON_TOKEN")
        .current_dir(server.dir.path())
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the client runs")
}

/// Checks `value` against `schema`, resolving `$ref`s in `doc`: the subset
/// of JSON Schema the OpenAPI document uses (type, enum, const, properties,
/// required, additionalProperties, items, minItems, allOf, oneOf, minimum, maximum,
/// minLength, maxLength). Formats and patterns are not checked.
pub fn conforms(doc: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let target = doc
            .pointer(r.trim_start_matches('#'))
            .ok_or_else(|| format!("{at}: dangling $ref {r}"))?;
        return conforms(doc, target, value, at);
    }
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{at}: bad type in schema")),
        };
        let ok = names.iter().any(|t| match *t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => false,
        });
        if !ok {
            return Err(format!("{at}: {value} is not of type {types}"));
        }
    }
    if schema.get("const").is_some_and(|c| c != value) {
        return Err(format!("{at}: {value} is not {}", schema["const"]));
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        return Err(format!("{at}: {value} is not one of {options:?}"));
    }
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(n) = value.as_f64()
        && (bound("minimum").is_some_and(|m| n < m) || bound("maximum").is_some_and(|m| n > m))
    {
        return Err(format!("{at}: {n} is out of range"));
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if schema
            .get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| len < m)
            || schema
                .get("maxLength")
                .and_then(Value::as_u64)
                .is_some_and(|m| len > m)
        {
            return Err(format!("{at}: {s:?} has the wrong length"));
        }
    }
    if let Some(Value::Array(all)) = schema.get("allOf") {
        for part in all {
            conforms(doc, part, value, at)?;
        }
    }
    if let Some(Value::Array(options)) = schema.get("oneOf") {
        let matching = options
            .iter()
            .filter(|o| conforms(doc, o, value, at).is_ok())
            .count();
        if matching != 1 {
            return Err(format!("{at}: {value} matches {matching} of oneOf, not 1"));
        }
    }
    if let Value::Object(o) = value {
        if let Some(Value::Array(required)) = schema.get("required") {
            for r in required.iter().filter_map(Value::as_str) {
                if !o.contains_key(r) {
                    return Err(format!("{at}: missing required `{r}` in {value}"));
                }
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (k, v) in o {
            let here = format!("{at}.{k}");
            match properties.and_then(|p| p.get(k)) {
                Some(s) => conforms(doc, s, v, &here)?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!("{at}: `{k}` is not a documented property"));
                    }
                    Some(s @ Value::Object(_)) => conforms(doc, s, v, &here)?,
                    _ => {}
                },
            }
        }
    }
    if let Value::Array(items) = value {
        if schema
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| (items.len() as u64) < m)
        {
            return Err(format!("{at}: too few items"));
        }
        if let Some(item) = schema.get("items") {
            for (i, v) in items.iter().enumerate() {
                conforms(doc, item, v, &format!("{at}[{i}]"))?;
            }
        }
    }
    Ok(())
}

/// The documented schema of the answer to `method path` with `status`,
/// for `content_type`, if the document has one.
pub fn answer_schema<'a>(
    doc: &'a Value,
    method: &str,
    template: &str,
    status: u16,
    content_type: &str,
) -> Result<&'a Value, String> {
    let op = &doc["paths"][template][method.to_lowercase()];
    if op.is_null() {
        return Err(format!("{method} {template} is not documented"));
    }
    let mut response = op["responses"]
        .get(status.to_string())
        .ok_or_else(|| format!("{method} {template} does not document status {status}"))?;
    if let Some(r) = response.get("$ref").and_then(Value::as_str) {
        response = doc
            .pointer(r.trim_start_matches('#'))
            .ok_or_else(|| format!("dangling {r}"))?;
    }
    match response.get("content") {
        None => Ok(&Value::Null),
        Some(content) => content
            .get(content_type)
            .map(|c| &c["schema"])
            .ok_or_else(|| {
                format!(
                    "{method} {template} {status} does not document content type {content_type}"
                )
            }),
    }
}
