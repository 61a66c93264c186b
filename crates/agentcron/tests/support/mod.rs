//! Shared by the engine-level tests: a harness around a real SQLite file and
//! a manual clock, and reporting handlers; and a PostgreSQL store in a schema
//! of its own for the backend tests.

#![allow(clippy::unwrap_used, dead_code, unreachable_pub, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use agentcron::store::{NewTask, SqliteStore, Store};
use agentcron::{
    ActionError, Engine, EngineConfig, Handlers, ManualClock, Run, RunId, Task, TaskId, TaskSpec,
};
use jiff::Timestamp;
use tokio::sync::mpsc;

pub fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

/// What a handler saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub run: RunId,
    pub scheduled_for: Timestamp,
    pub attempt: i64,
    pub fence: i64,
}

impl Seen {
    fn of(ctx: &agentcron::HandlerContext) -> Seen {
        Seen {
            run: ctx.run_id,
            scheduled_for: ctx.scheduled_for,
            attempt: ctx.attempt,
            fence: ctx.fence,
        }
    }
}

pub struct Harness {
    pub engine: Option<Engine<SqliteStore, Arc<ManualClock>>>,
    pub store: SqliteStore,
    pub clock: Arc<ManualClock>,
    pub _dir: tempfile::TempDir,
}

pub async fn open_store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agentcron.db").display());
    (SqliteStore::open(&url).await.unwrap(), dir)
}

/// Tests move the clock in jumps; a lease longer than any jump keeps the
/// lease machinery out of tests that are not about it.
pub fn config() -> EngineConfig {
    EngineConfig {
        node: "test-node".into(),
        workers: 8,
        lease: Duration::from_secs(600),
        ..EngineConfig::default()
    }
}

impl Harness {
    pub async fn start(start: Timestamp, handlers: Handlers) -> Harness {
        Self::start_with(start, handlers, config()).await
    }

    pub async fn start_with(start: Timestamp, handlers: Handlers, config: EngineConfig) -> Harness {
        let (store, dir) = open_store().await;
        let clock = Arc::new(ManualClock::new(start));
        let engine = Engine::start(store.clone(), clock.clone(), config, handlers).unwrap();
        Harness {
            engine: Some(engine),
            store,
            clock,
            _dir: dir,
        }
    }

    /// Creates a task the way the API will: validate, compute the first fire, store, wake.
    pub async fn create(&self, spec: serde_json::Value) -> Task {
        let task = create_task(&self.store, spec, self.clock_now()).await;
        if let Some(e) = &self.engine {
            e.wake();
        }
        task
    }

    pub fn clock_now(&self) -> Timestamp {
        agentcron::Clock::now(&*self.clock)
    }

    pub fn set(&self, t: &str) {
        self.clock.set(ts(t));
    }

    pub async fn runs(&self, task: &Task) -> Vec<Run> {
        let mut runs = self.store.runs_of_task(task.id, 100).await.unwrap();
        runs.reverse();
        runs
    }

    /// Polls until `check` accepts the task's runs (oldest first), up to 5 s.
    pub async fn until(&self, task: &Task, what: &str, check: impl Fn(&[Run]) -> bool) -> Vec<Run> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let runs = self.runs(task).await;
            if check(&runs) {
                return runs;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for: {what}; runs: {runs:#?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

pub async fn create_task<S: Store>(store: &S, spec: serde_json::Value, now: Timestamp) -> Task {
    let spec: TaskSpec = serde_json::from_value(spec).unwrap();
    let id = TaskId::new();
    let schedule = spec.validate(&id.to_string()).unwrap();
    store
        .create_task(NewTask {
            id,
            next_fire_at: schedule.next_after(now),
            spec,
            now,
        })
        .await
        .unwrap()
}

pub async fn recv(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the handler ran within 5 s")
        .expect("channel open")
}

/// A handler that reports each call and then behaves as `behave` says for that attempt.
pub fn reporting(
    behave: impl Fn(i64) -> Result<(), ActionError> + Send + Sync + 'static,
) -> (Handlers, mpsc::UnboundedReceiver<Seen>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let behave = Arc::new(behave);
    let mut handlers = Handlers::new();
    handlers.register("report", move |ctx| {
        let tx = tx.clone();
        let behave = behave.clone();
        async move {
            let _ = tx.send(Seen::of(&ctx));
            behave(ctx.attempt).map(|()| Some(serde_json::json!({"attempt": ctx.attempt})))
        }
    });
    (handlers, rx)
}

/// A handler that reports, then holds until its run is cancelled or `release` fires.
pub fn holding() -> (
    Handlers,
    mpsc::UnboundedReceiver<Seen>,
    Arc<tokio::sync::Notify>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let mut handlers = Handlers::new();
    let r = release.clone();
    handlers.register("hold", move |ctx| {
        let tx = tx.clone();
        let release = r.clone();
        async move {
            let _ = tx.send(Seen::of(&ctx));
            tokio::select! {
                _ = release.notified() => Ok(None),
                _ = ctx.cancel.cancelled() => Err(ActionError::permanent("cancelled")),
            }
        }
    });
    (handlers, rx, release)
}

/// A task spec firing every minute with the named handler, plus `extra` keys.
pub fn every_minute(handler: &str, extra: serde_json::Value) -> serde_json::Value {
    merged(
        serde_json::json!({
            "name": "job",
            "schedule": {"cron": "* * * * *"},
            "action": {"type": "handler", "name": handler},
        }),
        extra,
    )
}

/// `spec` with the top-level keys of `extra` added (or replaced).
pub fn merged(mut spec: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    spec
}

/// What a backend leaves behind after a passing test, and its removal
/// (after a failing test it stays, to look at).
pub trait Cleanup {
    async fn cleanup(self);
}

impl Cleanup for tempfile::TempDir {
    async fn cleanup(self) {}
}

/// A schema of its own for one test.
pub struct PgSchema {
    pub store: agentcron::store::PgStore,
    /// The URL that opens this schema.
    pub url: String,
    base: String,
    schema: String,
}

impl Cleanup for PgSchema {
    async fn cleanup(self) {
        use sqlx::{Connection, Executor};
        self.store.close().await;
        let mut admin = sqlx::PgConnection::connect(&self.base)
            .await
            .expect("reach PostgreSQL");
        admin
            .execute(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA {} CASCADE",
                self.schema
            )))
            .await
            .expect("drop the test schema");
    }
}

/// A PostgreSQL store in a fresh schema of the database named by
/// `AGENTCRON_TEST_POSTGRES_URL`. Without it: fails under CI, else says how
/// to enable the backend and skips.
pub async fn pg_store() -> Option<(agentcron::store::PgStore, PgSchema)> {
    use sqlx::{Connection, Executor};
    let Ok(base) = std::env::var("AGENTCRON_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "AGENTCRON_TEST_POSTGRES_URL is not set; .ci/run sets it after starting PostgreSQL"
        );
        // Once per run, past the test harness's capture (it only takes
        // `print!`/`eprint!`), so the skip is seen.
        static SAY: std::sync::Once = std::sync::Once::new();
        SAY.call_once(|| {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "note: the PostgreSQL conformance tests pass without running; set \
                 AGENTCRON_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test to run them"
            );
        });
        return None;
    };
    let schema = format!("agentcron_test_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::PgConnection::connect(&base)
        .await
        .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {base}: {e}"));
    admin
        .execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .await
        .expect("create schema");
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let store = agentcron::store::PgStore::open(&url)
        .await
        .expect("open postgres");
    Some((
        store.clone(),
        PgSchema {
            store,
            url,
            base,
            schema,
        },
    ))
}

/// A database of its own for one test on MySQL/MariaDB.
pub struct MyDatabase {
    pub store: agentcron::store::MySqlStore,
    base: String,
    name: String,
}

impl Cleanup for MyDatabase {
    async fn cleanup(self) {
        use sqlx::{Connection, Executor};
        self.store.close().await;
        let mut admin = sqlx::MySqlConnection::connect(&self.base)
            .await
            .expect("reach MySQL");
        admin
            .execute(sqlx::AssertSqlSafe(format!("DROP DATABASE {}", self.name)))
            .await
            .expect("drop the test database");
    }
}

/// A MySQL/MariaDB store in a fresh database on the server named by
/// `AGENTCRON_TEST_MYSQL_URL`. Without it: fails under CI, else notes how to
/// enable the backend and skips.
pub async fn mysql_store() -> Option<(agentcron::store::MySqlStore, MyDatabase)> {
    use sqlx::{Connection, Executor};
    let Ok(base) = std::env::var("AGENTCRON_TEST_MYSQL_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "AGENTCRON_TEST_MYSQL_URL is not set; .ci/run sets it after starting MariaDB"
        );
        static SAY: std::sync::Once = std::sync::Once::new();
        SAY.call_once(|| {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "note: the MySQL conformance tests pass without running; set \
                 AGENTCRON_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306/test to run them"
            );
        });
        return None;
    };
    let name = format!("agentcron_test_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::MySqlConnection::connect(&base)
        .await
        .unwrap_or_else(|e| panic!("cannot reach MySQL at {base}: {e}"));
    admin
        .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .expect("create database");
    let server = base.rsplit_once('/').map_or(base.as_str(), |(s, _)| s);
    let url = format!("{server}/{name}");
    let store = agentcron::store::MySqlStore::open(&url)
        .await
        .expect("open mysql");
    Some((store.clone(), MyDatabase { store, base, name }))
}
