//! The CLI client's writing commands against a real server: `task add`,
//! `task edit` (flags, file, editor), `apply` (plan, dry run, prune, refusal
//! of a bad file), `export` (and apply of its output changing nothing), and
//! shell completions.

mod support;

use support::{Answer, Server, cli, cli_env, client, serve};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the client and insists it succeeded.
fn ok(server: &Server, args: &[&str]) -> String {
    let out = cli(server, args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// Runs the client and insists it failed with `code`, one line on stderr.
fn fails(server: &Server, args: &[&str], code: i32) -> String {
    let out = cli(server, args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stdout(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

async fn task(server: &Server, name: &str) -> serde_json::Value {
    client()
        .get(server.url(&format!("/api/v1/tasks/{name}")))
        .json_value()
        .await
}

#[tokio::test]
async fn task_add_and_edit() {
    let server = serve();
    let said = ok(
        &server,
        &[
            "task",
            "add",
            "daily-report",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Asia/Shanghai",
            "--http",
            "http://127.0.0.1:9/agent",
            "--header",
            "X-Team: sales",
            "--body",
            r#"{"question": "sales"}"#,
            "--label",
            "team=sales",
            "--timeout",
            "30s",
            "--max-attempts",
            "3",
        ],
    );
    assert!(said.starts_with("created daily-report ("), "{said}");
    let t = task(&server, "daily-report").await;
    assert_eq!(
        t["schedule"],
        serde_json::json!({"cron": "0 9 * * 1-5", "timezone": "Asia/Shanghai", "dst": {"gap": "shift", "fold": "once"}})
    );
    assert_eq!(t["action"]["headers"]["X-Team"], "sales");
    assert_eq!(t["action"]["body"]["question"], "sales");
    assert_eq!(t["retry"]["max_attempts"], 3);
    assert_eq!(t["labels"]["team"], "sales");

    // An exec task: the command after `--`.
    ok(
        &server,
        &[
            "task",
            "add",
            "backup",
            "--every",
            "6h",
            "--",
            "/bin/echo",
            "hi",
        ],
    );
    assert_eq!(
        task(&server, "backup").await["action"]["command"],
        serde_json::json!(["/bin/echo", "hi"])
    );

    // Errors: the server's problem, or the client's own usage error.
    let err = fails(
        &server,
        &["task", "add", "x", "--cron", "0 25 * * *", "--handler", "h"],
        1,
    );
    assert!(
        err.contains("422") && err.contains("column 3") && err.contains("schedule.cron"),
        "{err}"
    );
    let err = fails(&server, &["task", "add", "x", "--handler", "h"], 2);
    assert!(err.contains("a task needs a schedule"), "{err}");
    let err = fails(
        &server,
        &[
            "task",
            "add",
            "x",
            "--every",
            "1h",
            "--cron",
            "* * * * *",
            "--handler",
            "h",
        ],
        2,
    );
    assert!(err.contains("give one schedule"), "{err}");
    let err = fails(
        &server,
        &[
            "task",
            "add",
            "x",
            "--every",
            "1h",
            "--handler",
            "h",
            "--payload",
            "{",
        ],
        2,
    );
    assert!(err.contains("--payload is not JSON"), "{err}");
    let err = fails(
        &server,
        &["task", "add", "backup", "--every", "1h", "--handler", "h"],
        1,
    );
    assert!(
        err.contains("409") && err.contains("already exists"),
        "{err}"
    );

    // From a file.
    let file = server.path("one.toml");
    std::fs::write(
        &file,
        "name = \"from-file\"\nschedule = { once = \"2030-01-01T00:00:00Z\" }\naction = { type = \"handler\", name = \"h\" }\n",
    )
    .expect("write");
    ok(
        &server,
        &["task", "add", "-f", file.to_str().expect("utf-8")],
    );
    assert_eq!(
        task(&server, "from-file").await["next_fire_at"],
        "2030-01-01T00:00:00Z"
    );

    // Edit by flags: only what changed is sent, under If-Match.
    let said = ok(
        &server,
        &[
            "task",
            "edit",
            "daily-report",
            "--every",
            "30m",
            "--timeout",
            "10s",
        ],
    );
    assert!(said.contains("(schedule, timeout); version 2"), "{said}");
    let t = task(&server, "daily-report").await;
    assert_eq!(t["schedule"], serde_json::json!({"every": "30m"}));
    assert_eq!(t["action"]["headers"]["X-Team"], "sales", "untouched");
    let said = ok(&server, &["task", "edit", "daily-report", "--every", "30m"]);
    assert!(said.contains("no changes"), "{said}");

    // Edit in the editor: a script stands in for a person.
    let editor = server.path("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/every = \"30m\"/every = \"45m\"/' \"$1\"\n",
    )
    .expect("write");
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let out = cli_env(
        &server,
        &["task", "edit", "daily-report"],
        &[("VISUAL", editor.to_str().expect("utf-8"))],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        task(&server, "daily-report").await["schedule"],
        serde_json::json!({"every": "45m"})
    );
    // An editor that breaks the definition changes nothing.
    std::fs::write(&editor, "#!/bin/sh\necho 'name = 5' > \"$1\"\n").expect("write");
    let out = cli_env(
        &server,
        &["task", "edit", "daily-report"],
        &[("VISUAL", editor.to_str().expect("utf-8"))],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing was changed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(task(&server, "daily-report").await["version"], 3);
}

#[tokio::test]
async fn apply_plans_then_changes_and_export_round_trips() {
    let server = serve();
    ok(
        &server,
        &["task", "add", "stale", "--every", "1h", "--handler", "h"],
    );
    ok(
        &server,
        &["task", "add", "keep", "--every", "2h", "--handler", "h"],
    );
    let file = server.path("tasks.toml");
    let path = file.to_str().expect("utf-8");
    std::fs::write(
        &file,
        r#"
[[task]]
name = "keep"
schedule = { every = "3h" }
action = { type = "handler", name = "h" }

[[task]]
name = "fresh"
schedule = { cron = "0 9 * * *", timezone = "Europe/Berlin" }
action = { type = "handler", name = "h" }
retry = { max_attempts = 2 }
"#,
    )
    .expect("write");

    let plan = ok(&server, &["apply", "-f", path, "--prune", "--dry-run"]);
    assert_eq!(
        plan,
        "~ change  keep  (schedule)\n+ create  fresh\n- delete  stale\n= 0 unchanged\ndry run: nothing was changed\n"
    );
    assert_eq!(task(&server, "keep").await["schedule"]["every"], "2h");

    // Without --prune, the extra task stays and is pointed out.
    let said = ok(&server, &["apply", "-f", path]);
    assert!(
        said.contains("1 task(s) on the server are not in the file"),
        "{said}"
    );
    assert!(
        said.ends_with("applied: 2 change(s), 0 unchanged\n"),
        "{said}"
    );
    assert_eq!(task(&server, "keep").await["schedule"]["every"], "3h");
    assert_eq!(task(&server, "fresh").await["retry"]["max_attempts"], 2);

    let said = ok(&server, &["apply", "-f", path, "--prune"]);
    assert_eq!(
        said,
        "- delete  stale\n= 2 unchanged\ndeleted stale\napplied: 1 change(s), 2 unchanged\n"
    );
    assert_eq!(task(&server, "stale").await["state"], "cancelled");
    let plan = ok(&server, &["apply", "-f", path, "--prune", "--json"]);
    let plan: serde_json::Value = serde_json::from_str(&plan).expect("json");
    assert_eq!(plan["plan"], serde_json::json!([]));
    assert_eq!(plan["unchanged"], 2);

    // A deleted task's name can be declared again: a new task.
    std::fs::write(
        server.path("again.toml"),
        "[[task]]\nname = \"stale\"\nschedule = { manual = true }\naction = { type = \"handler\", name = \"h\" }\n",
    )
    .expect("write");
    let said = ok(
        &server,
        &[
            "apply",
            "-f",
            server.path("again.toml").to_str().expect("utf-8"),
        ],
    );
    assert!(said.starts_with("+ create  stale\n"), "{said}");
    assert_eq!(task(&server, "stale").await["state"], "active");

    // A file with one bad task changes nothing at all.
    std::fs::write(
        server.path("bad.toml"),
        "[[task]]\nname = \"other\"\nschedule = { every = \"1h\" }\naction = { type = \"handler\", name = \"h\" }\n\
         [[task]]\nname = \"broken\"\nschedule = { cron = \"61 * * * *\" }\naction = { type = \"handler\", name = \"h\" }\n",
    )
    .expect("write");
    let err = fails(
        &server,
        &[
            "apply",
            "-f",
            server.path("bad.toml").to_str().expect("utf-8"),
        ],
        2,
    );
    assert!(err.contains("task[1] `broken`"), "{err}");
    assert_eq!(task(&server, "other").await["status"], 404);

    // Export, then apply the export: nothing to do.
    let exported = server.path("exported.toml");
    let exported = exported.to_str().expect("utf-8");
    ok(&server, &["export", "-o", exported]);
    let text = std::fs::read_to_string(exported).expect("exported");
    assert!(
        text.contains("name = \"fresh\"") && text.contains("timezone = \"Europe/Berlin\""),
        "{text}"
    );
    let said = ok(&server, &["apply", "-f", exported, "--prune"]);
    assert_eq!(said, "= 3 unchanged\napplied: 0 change(s), 3 unchanged\n");
    let json = ok(&server, &["export", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(json["task"].as_array().map(Vec::len), Some(3));
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef agentcron"),
        ("fish", "complete -c agentcron"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentcron"))
            .args(["completions", shell])
            .output()
            .expect("runs");
        assert!(out.status.success());
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}");
        for word in ["apply", "export", "task", "token"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["completions", "tcsh"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}
