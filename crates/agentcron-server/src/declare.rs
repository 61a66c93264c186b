//! Tasks as code: `agentcron apply -f tasks.toml [--prune] [--dry-run]` makes
//! the server's tasks match a file of `[[task]]` tables (the same tables as
//! in `agentcron.toml`), and `agentcron export` writes the server's tasks in
//! that format. Both talk to the API, so they work against any node.
//!
//! `apply` reads and validates the whole file before it changes anything,
//! prints its plan (create, change with the fields that differ, delete with
//! `--prune`), then carries it out; each change is one API call, and a
//! change uses `If-Match`, so a concurrent edit is reported, not overwritten.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};

use agentcron::TaskSpec;
use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

use crate::UsageError;
use crate::client::{self, Target};

/// A file of `[[task]]` tables.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    #[serde(default)]
    task: Vec<TaskSpec>,
}

/// Reads `path` (`-` for standard input): TOML `[[task]]` tables, or JSON
/// (`{"task": [...]}` or a list) when the name ends in `.json`. Every task is
/// validated and names must be unique.
pub(crate) fn read_tasks(path: &Path) -> anyhow::Result<Vec<TaskSpec>> {
    let text = if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read standard input")?;
        text
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?
    };
    let shown = path.display();
    let tasks = if path.extension().is_some_and(|e| e == "json") {
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| UsageError(format!("{shown}: not JSON: {e}")))?;
        let list = match value {
            Value::Object(mut o) if o.len() == 1 && o.contains_key("task") => {
                o.remove("task").unwrap_or_default()
            }
            other => other,
        };
        serde_json::from_value::<Vec<TaskSpec>>(list)
            .map_err(|e| UsageError(format!("{shown}: {e}")))?
    } else {
        toml::from_str::<TaskFile>(&text)
            .map_err(|e| UsageError(format!("{shown}: {}", e.to_string().trim())))?
            .task
    };
    let mut names = BTreeSet::new();
    for (i, spec) in tasks.iter().enumerate() {
        spec.validate(&spec.name)
            .map_err(|e| UsageError(format!("{shown}: task[{i}] `{}`: {e}", spec.name)))?;
        if !names.insert(spec.name.as_str()) {
            bail!(UsageError(format!(
                "{shown}: two tasks are named `{}`",
                spec.name
            )));
        }
    }
    Ok(tasks)
}

/// Tasks as `[[task]]` tables, leaving out the retry, overlap and misfire
/// settings that are the defaults (reading fills them in again).
pub(crate) fn to_toml(tasks: &[TaskSpec]) -> anyhow::Result<String> {
    const NO_TOML: &str =
        "the tasks cannot be written as TOML (a JSON null in a body or payload has no TOML form)";
    let mut tables = Vec::new();
    for spec in tasks {
        let plain = TaskSpec {
            retry: Default::default(),
            overlap: Default::default(),
            misfire: Default::default(),
            ..spec.clone()
        };
        let mut table = toml::Table::try_from(spec).context(NO_TOML)?;
        let plain = toml::Table::try_from(plain).context(NO_TOML)?;
        for key in ["retry", "overlap", "misfire"] {
            if table.get(key) == plain.get(key) {
                table.remove(key);
            }
        }
        tables.push(toml::Value::Table(table));
    }
    let mut file = toml::Table::new();
    file.insert("task".into(), toml::Value::Array(tables));
    toml::to_string(&file).context(NO_TOML)
}

/// The definition inside a task as the API returns it.
pub(crate) fn spec_of(task: &Value) -> anyhow::Result<TaskSpec> {
    let mut spec = task.clone();
    if let Some(o) = spec.as_object_mut() {
        for key in [
            "id",
            "state",
            "next_fire_at",
            "version",
            "created_at",
            "updated_at",
        ] {
            o.remove(key);
        }
    }
    serde_json::from_value(spec).context("the server sent a task this client cannot read")
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`: keys only in
/// `old` become `null`, objects in both are patched key by key, everything
/// else is replaced. (`new` must hold no `null`s, which task definitions do
/// not.)
pub(crate) fn replace_patch(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for key in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            for (key, value) in n {
                match o.get(key) {
                    Some(before) if before == value => {}
                    Some(before) => {
                        patch.insert(key.clone(), replace_patch(before, value));
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        (_, n) => n.clone(),
    }
}

/// The top-level fields in which two definitions differ.
fn changed_fields(old: &TaskSpec, new: &TaskSpec) -> anyhow::Result<Vec<String>> {
    let patch = replace_patch(&serde_json::to_value(old)?, &serde_json::to_value(new)?);
    Ok(patch
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default())
}

/// Every task on the server that is not cancelled (all pages), by name.
async fn live_tasks(target: &Target) -> anyhow::Result<BTreeMap<String, Value>> {
    let mut tasks = BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        let mut query = vec![("limit", "500".to_string())];
        query.extend(after.clone().map(|a| ("after", a)));
        let page = client::get(target, "/api/v1/tasks", &query).await?;
        for task in page["tasks"].as_array().into_iter().flatten() {
            if task["state"] != "cancelled"
                && let Some(name) = task["name"].as_str()
            {
                tasks.insert(name.to_string(), task.clone());
            }
        }
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => return Ok(tasks),
        }
    }
}

/// One step of an apply.
enum Step {
    Create(TaskSpec),
    Change {
        spec: TaskSpec,
        current: Value,
        fields: Vec<String>,
    },
    Delete(String),
}

pub(crate) async fn apply(
    target: &Target,
    file: &Path,
    prune: bool,
    dry_run: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let declared = read_tasks(file)?;
    let mut live = live_tasks(target).await?;
    let mut steps = Vec::new();
    let mut unchanged = 0;
    for spec in declared {
        match live.remove(&spec.name) {
            None => steps.push(Step::Create(spec)),
            Some(current) => {
                let fields = changed_fields(&spec_of(&current)?, &spec)?;
                if fields.is_empty() {
                    unchanged += 1;
                } else {
                    steps.push(Step::Change {
                        spec,
                        current,
                        fields,
                    });
                }
            }
        }
    }
    let kept = live.len();
    if prune {
        steps.extend(live.into_keys().map(Step::Delete));
    }
    if target.json {
        let plan: Vec<Value> = steps
            .iter()
            .map(|s| match s {
                Step::Create(spec) => serde_json::json!({"create": spec.name}),
                Step::Change { spec, fields, .. } => {
                    serde_json::json!({"change": spec.name, "fields": fields})
                }
                Step::Delete(name) => serde_json::json!({"delete": name}),
            })
            .collect();
        client::print_json(
            out,
            &serde_json::json!({"plan": plan, "unchanged": unchanged, "dry_run": dry_run}),
        )?;
    } else {
        for step in &steps {
            match step {
                Step::Create(spec) => writeln!(out, "+ create  {}", spec.name)?,
                Step::Change { spec, fields, .. } => {
                    writeln!(out, "~ change  {}  ({})", spec.name, fields.join(", "))?
                }
                Step::Delete(name) => writeln!(out, "- delete  {name}")?,
            }
        }
        writeln!(out, "= {unchanged} unchanged")?;
        if kept > 0 && !prune {
            writeln!(
                out,
                "  ({kept} task(s) on the server are not in the file; --prune deletes them)"
            )?;
        }
    }
    if dry_run {
        if !target.json {
            writeln!(out, "dry run: nothing was changed")?;
        }
        return Ok(());
    }
    let total = steps.len();
    for (done, step) in steps.into_iter().enumerate() {
        let result = match &step {
            Step::Create(spec) => {
                client::send_json(target, reqwest::Method::POST, "/api/v1/tasks", spec, None).await
            }
            Step::Change {
                spec,
                current,
                fields: _,
            } => {
                let id = current["id"].as_str().unwrap_or_default();
                let patch = replace_patch(
                    &serde_json::to_value(spec_of(current)?)?,
                    &serde_json::to_value(spec)?,
                );
                client::send_json(
                    target,
                    reqwest::Method::PATCH,
                    &format!("/api/v1/tasks/{id}"),
                    &patch,
                    current["version"].as_i64(),
                )
                .await
            }
            Step::Delete(name) => client::delete(target, &format!("/api/v1/tasks/{name}")).await,
        };
        let (verb, name) = match &step {
            Step::Create(spec) => ("create", spec.name.as_str()),
            Step::Change { spec, .. } => ("change", spec.name.as_str()),
            Step::Delete(name) => ("delete", name.as_str()),
        };
        result.with_context(|| {
            format!("applied {done} of {total} changes; could not {verb} `{name}`")
        })?;
        if !target.json {
            writeln!(out, "{verb}d {name}")?;
        }
    }
    if !target.json {
        writeln!(out, "applied: {total} change(s), {unchanged} unchanged")?;
    }
    Ok(())
}

pub(crate) async fn export(
    target: &Target,
    output: Option<PathBuf>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let tasks: Vec<TaskSpec> = live_tasks(target)
        .await?
        .values()
        .map(spec_of)
        .collect::<anyhow::Result<_>>()?;
    let text = if target.json {
        serde_json::to_string_pretty(&serde_json::json!({"task": tasks}))? + "\n"
    } else {
        format!(
            "# agentcron tasks, exported from {} ({} task(s)).\n# Apply with: agentcron apply -f FILE\n\n{}",
            target.server,
            tasks.len(),
            to_toml(&tasks)?
        )
    };
    match output {
        None => out.write_all(text.as_bytes())?,
        Some(path) => {
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {} task(s) to {}", tasks.len(), path.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Applies a merge patch (RFC 7386), as the server does.
    fn merge(target: &mut Value, patch: Value) {
        match (target, patch) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(&k);
                    } else {
                        merge(t.entry(k).or_insert(Value::Null), v);
                    }
                }
            }
            (t, p) => *t = p,
        }
    }

    #[test]
    fn replace_patch_turns_old_into_new() {
        let cases = [
            (
                json!({"schedule": {"cron": "0 9 * * *", "timezone": "UTC"}, "timeout": "5s", "n": 1}),
                json!({"schedule": {"every": "5m"}, "n": 1}),
            ),
            (json!({"a": [1, 2]}), json!({"a": [2], "b": {"c": "d"}})),
            (json!({}), json!({"x": {"y": {"z": 1}}})),
        ];
        for (old, new) in cases {
            let patch = replace_patch(&old, &new);
            let mut patched = old.clone();
            merge(&mut patched, patch.clone());
            assert_eq!(patched, new, "patch {patch}");
        }
        let patch = replace_patch(&json!({"keep": 1, "drop": 2}), &json!({"keep": 1}));
        assert_eq!(patch, json!({"drop": null}));
    }

    #[test]
    fn files_are_validated_whole_before_anything_happens() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write");
            path
        };
        let good = write(
            "good.toml",
            "[[task]]\nname = \"a\"\nschedule = { every = \"5m\" }\naction = { type = \"handler\", name = \"h\" }\n",
        );
        let tasks = read_tasks(&good).expect("reads");
        assert_eq!(tasks.len(), 1);
        // What export writes, apply reads back unchanged.
        let again = write("again.toml", &to_toml(&tasks).expect("toml"));
        assert_eq!(read_tasks(&again).expect("reads"), tasks);

        let twice = write(
            "twice.toml",
            &format!(
                "{}\n{}",
                std::fs::read_to_string(&good).expect("read"),
                std::fs::read_to_string(&good).expect("read")
            ),
        );
        let err = read_tasks(&twice).unwrap_err().to_string();
        assert!(err.contains("two tasks are named `a`"), "{err}");
        let bad_cron = write(
            "bad.toml",
            "[[task]]\nname = \"b\"\nschedule = { cron = \"0 9 * *\" }\naction = { type = \"handler\", name = \"h\" }\n",
        );
        let err = read_tasks(&bad_cron).unwrap_err().to_string();
        assert!(err.contains("task[0] `b`"), "{err}");
        let typo = write("typo.toml", "[[tasks]]\nname = \"c\"\n");
        let err = read_tasks(&typo).unwrap_err().to_string();
        assert!(err.contains("tasks"), "{err}");
        let as_json = write(
            "tasks.json",
            r#"[{"name": "j", "schedule": {"manual": true}, "action": {"type": "handler", "name": "h"}}]"#,
        );
        assert_eq!(read_tasks(&as_json).expect("json")[0].name, "j");
    }
}
