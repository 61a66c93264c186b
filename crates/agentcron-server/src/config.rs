//! The daemon's configuration: defaults, then `agentcron.toml`, then
//! `AGENTCRON_*` environment variables, then command-line flags — each later
//! layer wins. Unknown keys and unknown `AGENTCRON_*` variables are errors:
//! a typo should stop the start, not be ignored.

use std::path::{Path, PathBuf};

use agentcron::{HumanDuration, TaskSpec};
use anyhow::{Context as _, bail};
use serde::Deserialize;

use crate::UsageError;

/// The resolved configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Config {
    /// `sqlite://agentcron.db` (PostgreSQL and MySQL come later).
    pub(crate) database: String,
    /// Where the HTTP API will listen (the API arrives with its issue).
    pub(crate) listen: String,
    /// This node's name; default `<host>-<random>`.
    pub(crate) node: Option<String>,
    /// Runs executing at once on this node.
    pub(crate) workers: usize,
    /// How long a claim holds without renewal.
    pub(crate) lease: HumanDuration,
    /// How long running attempts may finish on SIGTERM/SIGINT.
    pub(crate) shutdown_grace: HumanDuration,
    /// Whether `exec` actions run on this node.
    pub(crate) exec_enabled: bool,
    /// Largest action result (http body, exec output) kept, in bytes.
    pub(crate) max_result_bytes: usize,
    /// `human` or `json`.
    pub(crate) log_format: LogFormat,
    /// `error`, `warn`, `info`, `debug` or `trace`.
    pub(crate) log_level: String,
    /// How much run history to keep.
    pub(crate) history: History,
    /// Tasks created or updated (by name) at start.
    #[serde(rename = "task")]
    pub(crate) tasks: Vec<TaskSpec>,
    /// API tokens (`[[token]]`: name, role, hash).
    #[serde(rename = "token")]
    pub(crate) tokens: Vec<crate::auth::TokenEntry>,
}

/// `[history]`: finished runs beyond a task's newest `keep_runs`, or older
/// than `keep_for`, are deleted.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct History {
    pub(crate) keep_runs: u32,
    pub(crate) keep_for: HumanDuration,
}

impl Default for History {
    fn default() -> Self {
        History {
            keep_runs: 1000,
            keep_for: HumanDuration::from_secs(30 * 86_400),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database: "sqlite://agentcron.db".into(),
            listen: "127.0.0.1:8080".into(),
            node: None,
            workers: 64,
            lease: HumanDuration::from_secs(30),
            shutdown_grace: HumanDuration::from_secs(30),
            exec_enabled: false,
            max_result_bytes: 64 * 1024,
            log_format: LogFormat::Human,
            log_level: "info".into(),
            history: History::default(),
            tasks: Vec::new(),
            tokens: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LogFormat {
    Human,
    Json,
}

/// Overrides from the command line.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct Flags {
    /// Configuration file (default: ./agentcron.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Database URL, e.g. sqlite://agentcron.db.
    #[arg(long, value_name = "URL")]
    pub(crate) database: Option<String>,
    /// Address for the HTTP API, e.g. 127.0.0.1:8080.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<String>,
    /// Log format.
    #[arg(long, value_name = "human|json")]
    pub(crate) log_format: Option<LogFormat>,
}

/// The environment variables read, and the config key each sets (none for
/// those `serve` accepts but does not use: the CLI client's).
const ENV_KEYS: [(&str, &str); 12] = [
    ("AGENTCRON_CONFIG", ""),
    ("AGENTCRON_SERVER", ""),
    ("AGENTCRON_TOKEN", ""),
    ("AGENTCRON_DATABASE", "database"),
    ("AGENTCRON_LISTEN", "listen"),
    ("AGENTCRON_NODE", "node"),
    ("AGENTCRON_WORKERS", "workers"),
    ("AGENTCRON_LEASE", "lease"),
    ("AGENTCRON_SHUTDOWN_GRACE", "shutdown_grace"),
    ("AGENTCRON_EXEC_ENABLED", "exec_enabled"),
    ("AGENTCRON_LOG_FORMAT", "log_format"),
    ("AGENTCRON_LOG_LEVEL", "log_level"),
];

impl Config {
    /// Resolves the configuration from `env` (name, value pairs) and `flags`.
    pub(crate) fn load(
        flags: &Flags,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Config> {
        let env: Vec<(String, String)> = env
            .into_iter()
            // AGENTCRON_TEST_* configure the test suite, not the daemon.
            .filter(|(k, _)| k.starts_with("AGENTCRON_") && !k.starts_with("AGENTCRON_TEST_"))
            .collect();
        for (key, _) in &env {
            if !ENV_KEYS.iter().any(|(k, _)| k == key) {
                let known: Vec<&str> = ENV_KEYS.iter().map(|(k, _)| *k).collect();
                bail!(UsageError(format!(
                    "unknown environment variable {key} (known: {})",
                    known.join(", ")
                )));
            }
        }
        let env_value = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());

        // The file: --config, else AGENTCRON_CONFIG, else ./agentcron.toml if present.
        let explicit = flags
            .config
            .clone()
            .or_else(|| env_value("AGENTCRON_CONFIG").map(PathBuf::from));
        let mut table = match &explicit {
            Some(path) => read_table(path)?,
            None if Path::new("agentcron.toml").exists() => {
                read_table(Path::new("agentcron.toml"))?
            }
            None => toml::Table::new(),
        };
        for (var, key) in ENV_KEYS.iter().filter(|(_, key)| !key.is_empty()) {
            if let Some(value) = env_value(var) {
                table.insert(
                    (*key).to_string(),
                    env_to_toml(key, &value).map_err(|e| UsageError(format!("{var}: {e}")))?,
                );
            }
        }
        if let Some(v) = &flags.database {
            table.insert("database".into(), toml::Value::String(v.clone()));
        }
        if let Some(v) = &flags.listen {
            table.insert("listen".into(), toml::Value::String(v.clone()));
        }
        if let Some(v) = flags.log_format {
            let name = match v {
                LogFormat::Human => "human",
                LogFormat::Json => "json",
            };
            table.insert("log_format".into(), toml::Value::String(name.into()));
        }
        let config: Config = table.try_into().map_err(|e: toml::de::Error| {
            UsageError(format!("invalid configuration: {}", e.message().trim()))
        })?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> anyhow::Result<()> {
        crate::auth::Tokens::new(&self.tokens)?;
        if self.workers == 0 {
            bail!(UsageError("workers must be at least 1".into()));
        }
        if self.lease.as_millis() < 1000 {
            bail!(UsageError("lease must be at least 1s".into()));
        }
        if !["error", "warn", "info", "debug", "trace"].contains(&self.log_level.as_str()) {
            bail!(UsageError(format!(
                "log_level `{}` is not one of error, warn, info, debug, trace",
                self.log_level
            )));
        }
        self.listen.parse::<std::net::SocketAddr>().map_err(|_| {
            UsageError(format!(
                "listen `{}` is not an address like 127.0.0.1:8080",
                self.listen
            ))
        })?;
        let mut names = std::collections::BTreeSet::new();
        for (i, task) in self.tasks.iter().enumerate() {
            if !names.insert(task.name.as_str()) {
                bail!(UsageError(format!(
                    "task[{i}]: the name `{}` is used twice",
                    task.name
                )));
            }
        }
        Ok(())
    }
}

fn read_table(path: &Path) -> anyhow::Result<toml::Table> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read configuration file {}", path.display()))?;
    text.parse::<toml::Table>().map_err(|e| {
        UsageError(format!(
            "{}: {}",
            path.display(),
            e.to_string().trim().replace('\n', " ")
        ))
        .into()
    })
}

/// An environment variable's text as the TOML value its key expects.
fn env_to_toml(key: &str, value: &str) -> Result<toml::Value, String> {
    Ok(match key {
        "workers" => toml::Value::Integer(
            value
                .parse()
                .map_err(|_| format!("`{value}` is not a whole number"))?,
        ),
        "exec_enabled" => toml::Value::Boolean(match value {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            _ => return Err(format!("`{value}` is not true or false")),
        }),
        _ => toml::Value::String(value.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn file(text: &str) -> (tempfile::TempDir, Flags) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentcron.toml");
        std::fs::write(&path, text).unwrap();
        (
            dir,
            Flags {
                config: Some(path),
                ..Flags::default()
            },
        )
    }

    #[test]
    fn layers_in_order_defaults_file_env_flags() {
        let (_dir, mut flags) =
            file("database = \"sqlite://from-file.db\"\nworkers = 8\nlease = \"10s\"\n");
        let c = Config::load(&flags, env(&[])).unwrap();
        assert_eq!(
            (c.database.as_str(), c.workers, c.lease.to_string()),
            ("sqlite://from-file.db", 8, "10s".into())
        );
        assert_eq!(
            c.listen, "127.0.0.1:8080",
            "untouched keys keep their defaults"
        );
        let c = Config::load(
            &flags,
            env(&[
                ("AGENTCRON_DATABASE", "sqlite://from-env.db"),
                ("AGENTCRON_WORKERS", "3"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (c.database.as_str(), c.workers),
            ("sqlite://from-env.db", 3)
        );
        flags.database = Some("sqlite://from-flag.db".into());
        let c = Config::load(
            &flags,
            env(&[("AGENTCRON_DATABASE", "sqlite://from-env.db")]),
        )
        .unwrap();
        assert_eq!(c.database, "sqlite://from-flag.db");
    }

    #[test]
    fn unknown_keys_and_variables_are_errors() {
        let (_dir, flags) = file("databse = \"sqlite://x.db\"\n");
        let err = Config::load(&flags, env(&[])).unwrap_err().to_string();
        assert!(err.contains("unknown field `databse`"), "{err}");
        // The test suite's variables are not the daemon's business.
        Config::load(
            &Flags::default(),
            env(&[("AGENTCRON_TEST_POSTGRES_URL", "postgres://x")]),
        )
        .expect("AGENTCRON_TEST_* are ignored");
        let err = Config::load(&Flags::default(), env(&[("AGENTCRON_DATABSE", "x")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "unknown environment variable AGENTCRON_DATABSE (known: AGENTCRON_CONFIG"
            ),
            "{err}"
        );
        let err = Config::load(&Flags::default(), env(&[("AGENTCRON_WORKERS", "many")]))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "AGENTCRON_WORKERS: `many` is not a whole number");
        let err = Config::load(
            &Flags::default(),
            env(&[("AGENTCRON_LISTEN", "everywhere")]),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "listen `everywhere` is not an address like 127.0.0.1:8080"
        );
    }

    #[test]
    fn history_limits_are_a_table() {
        let (_dir, flags) = file("[history]\nkeep_runs = 50\nkeep_for = \"7d\"\n");
        let c = Config::load(&flags, env(&[])).unwrap();
        assert_eq!(
            (c.history.keep_runs, c.history.keep_for.to_string()),
            (50, "7d".into())
        );
        let c = Config::load(&Flags::default(), env(&[])).unwrap();
        assert_eq!(
            (c.history.keep_runs, c.history.keep_for.to_string()),
            (1000, "30d".into())
        );
        let (_dir, flags) = file("[history]\nkeep_rows = 5\n");
        assert!(
            Config::load(&flags, env(&[]))
                .unwrap_err()
                .to_string()
                .contains("unknown field `keep_rows`")
        );
    }

    #[test]
    fn tasks_are_declared_as_task_tables() {
        let (_dir, flags) = file(
            r#"
            [[task]]
            name = "daily-report"
            schedule = { cron = "0 9 * * 1-5", timezone = "Asia/Shanghai" }
            action = { type = "http", url = "http://127.0.0.1:9000/agent" }
            retry = { max_attempts = 3 }

            [[task]]
            name = "heartbeat"
            schedule = { every = "30s" }
            action = { type = "handler", name = "beat" }
            "#,
        );
        let c = Config::load(&flags, env(&[])).unwrap();
        assert_eq!(c.tasks.len(), 2);
        assert_eq!(c.tasks[0].retry.max_attempts, 3);
        let (_dir, flags) = file(
            "[[task]]\nname = \"a\"\nschedule = { every = \"1m\" }\naction = { type = \"handler\", name = \"x\" }\n[[task]]\nname = \"a\"\nschedule = { every = \"1m\" }\naction = { type = \"handler\", name = \"x\" }\n",
        );
        assert_eq!(
            Config::load(&flags, env(&[])).unwrap_err().to_string(),
            "task[1]: the name `a` is used twice"
        );
    }
}
