//! High availability on PostgreSQL and on MariaDB, end to end: three `agentcron serve`
//! processes share one database while tasks fire every second with an http
//! action pointed at a local recording server, and every 10 s one node
//! is killed with SIGKILL and started again.
//!
//! Afterwards, for the fires in the window: each has exactly one ledger row,
//! none is missing, every run finished, every delivery the recorder saw for a
//! run has its own attempt number (a second delivery is a recovery, with
//! attempt > 1 and the same idempotency key), and no run has two successful
//! attempts.
//!
//! Short by default (CI); `AGENTCRON_TEST_CHAOS_SECS=600` runs the long form.
//! Runs on each database that `AGENTCRON_TEST_POSTGRES_URL` and
//! `AGENTCRON_TEST_MYSQL_URL` name (under CI both must be set), one after the
//! other.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use sqlx::{Connection, Executor, Row};
use support::{Server, client, serve_with_database};

const TASKS: usize = 200;

fn database_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) => Some(url),
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{var} is not set; .ci/run sets it after starting the database"
            );
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "note: the HA test skips that database; set {var} to run it"
            );
            None
        }
    }
}

/// An isolated place in one of the two databases, and an admin connection.
enum Db {
    Pg(sqlx::PgConnection),
    My(sqlx::MySqlConnection),
}

impl Db {
    /// A fresh schema (PostgreSQL) or database (MariaDB); returns the
    /// connection, the URL that opens it and its name (to qualify tables).
    async fn isolated(kind: &str, base: &str) -> (Db, String, String) {
        let name = format!("agentcron_ha_{}", uuid::Uuid::now_v7().simple());
        if kind == "postgres" {
            let mut c = sqlx::PgConnection::connect(base)
                .await
                .expect("reach PostgreSQL");
            c.execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
                .await
                .expect("create schema");
            let sep = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{sep}options=-c%20search_path%3D{name}");
            (Db::Pg(c), url, name)
        } else {
            let mut c = sqlx::MySqlConnection::connect(base)
                .await
                .expect("reach MariaDB");
            c.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .await
                .expect("create database");
            let server = base.rsplit_once('/').map_or(base, |(s, _)| s);
            (Db::My(c), format!("{server}/{name}"), name)
        }
    }

    async fn drop_place(&mut self, name: &str) {
        match self {
            Db::Pg(c) => c
                .execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {name} CASCADE")))
                .await
                .map(|_| ()),
            Db::My(c) => c
                .execute(sqlx::AssertSqlSafe(format!("DROP DATABASE {name}")))
                .await
                .map(|_| ()),
        }
        .expect("drop");
    }

    /// A count, with `?` placeholders bound to `binds`.
    async fn count(&mut self, sql: &str, binds: &[i64]) -> i64 {
        match self {
            Db::Pg(c) => {
                let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(dollars(sql)));
                for b in binds {
                    q = q.bind(*b);
                }
                q.fetch_one(c).await.expect("count")
            }
            Db::My(c) => {
                let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_string()));
                for b in binds {
                    q = q.bind(*b);
                }
                q.fetch_one(c).await.expect("count")
            }
        }
    }

    /// The runs in the window: (task name, scheduled_for, status, attempt, id).
    async fn runs(
        &mut self,
        place: &str,
        window: (i64, i64),
    ) -> Vec<(String, i64, String, i64, String)> {
        let sql = format!(
            "SELECT t.name, r.scheduled_for, r.status, r.attempt, r.id FROM {place}.runs r \
             JOIN {place}.tasks t ON t.id = r.task_id WHERE r.scheduled_for BETWEEN ? AND ?"
        );
        macro_rules! read {
            ($c:expr, $sql:expr) => {{
                let rows = sqlx::query(sqlx::AssertSqlSafe($sql))
                    .bind(window.0)
                    .bind(window.1)
                    .fetch_all($c)
                    .await
                    .expect("runs");
                rows.iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
                    .collect()
            }};
        }
        match self {
            Db::Pg(c) => read!(c, dollars(&sql)),
            Db::My(c) => read!(c, sql),
        }
    }
}

/// `?` as `$1, $2, …` for PostgreSQL.
fn dollars(sql: &str) -> String {
    let mut n = 0;
    sql.chars()
        .map(|c| {
            if c == '?' {
                n += 1;
                format!("${n}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_killed_in_turn_record_every_fire_once() {
    // One database after the other: six nodes at once would share 2 cores.
    for (kind, var) in [
        ("postgres", "AGENTCRON_TEST_POSTGRES_URL"),
        ("mariadb", "AGENTCRON_TEST_MYSQL_URL"),
    ] {
        if let Some(base) = database_url(var) {
            chaos(kind, &base).await;
        }
    }
}

async fn chaos(kind: &str, base: &str) {
    use agentcron_testkit::http::{Reply, TestServer};
    let secs: u64 = std::env::var("AGENTCRON_TEST_CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);

    // A schema (or database) of its own.
    let (mut admin, url, place) = Db::isolated(kind, base).await;

    // A slow agent, so that a kill interrupts calls in flight.
    let mut recorder = TestServer::start(vec![Reply::Slow {
        delay: Duration::from_millis(300),
        body: "{}".into(),
    }])
    .await;
    // A short lease, so that a killed node's runs come back within seconds.
    let config = "lease = \"3s\"\n";
    let mut nodes: Vec<Server> = (0..3).map(|_| serve_with_database(config, &url)).collect();
    let http = client();
    for i in 0..TASKS {
        let spec = serde_json::json!({
            "name": format!("every-second-{i}"),
            "schedule": {"every": "1s"},
            "action": {"type": "http", "url": format!("{}/fire", recorder.url)},
            "retry": {"max_attempts": 5, "backoff": {"initial": "1s", "max": "1s"}},
            // Every fire runs, even while a killed node still holds the one before.
            "overlap": "allow",
        });
        let r = http
            .post(nodes[i % 3].url("/api/v1/tasks"))
            .json(&spec)
            .send()
            .await
            .expect("create");
        assert_eq!(r.status().as_u16(), 201);
    }
    let start = jiff::Timestamp::now();

    // Chaos: every 10 s, SIGKILL one node and start it again.
    let mut killed = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(10)).await;
        // Dropping a server kills it with SIGKILL; then a fresh one starts.
        drop(nodes.remove(killed % 3));
        nodes.push(serve_with_database(config, &url));
        killed += 1;
    }
    let end = jiff::Timestamp::now();
    // Stop firing, then let the runs in flight (and any recoveries) finish.
    for i in 0..TASKS {
        let r = http
            .post(nodes[0].url(&format!("/api/v1/tasks/every-second-{i}/pause")))
            .send()
            .await
            .expect("pause");
        assert_eq!(r.status().as_u16(), 200);
    }

    // The window: whole seconds from 2 s after the start to 2 s before the end.
    let first = start.as_second() + 2;
    let last = end.as_second() - 2;
    let window = (first * 1000, last * 1000);
    let settle = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let open = admin
            .count(
                &format!(
                    "SELECT COUNT(*) FROM {place}.runs WHERE scheduled_for BETWEEN ? AND ? \
                     AND status IN ('queued', 'running', 'retrying')"
                ),
                &[window.0, window.1],
            )
            .await;
        if open == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < settle,
            "{open} runs still open 30 s after the chaos"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(nodes);

    // The ledger: one row per (task, second), none missing, all succeeded.
    let rows = admin.runs(&place, window).await;
    let mut fires: BTreeMap<(String, i64), usize> = BTreeMap::new();
    let mut runs: BTreeMap<String, i64> = BTreeMap::new();
    let mut recovered = 0;
    for (name, at, status, attempt, id) in rows {
        assert_eq!(status, "succeeded", "{kind}: {name} at {at}");
        *fires.entry((name, at)).or_default() += 1;
        runs.insert(id, attempt);
        if attempt > 1 {
            recovered += 1;
        }
    }
    let seconds = last - first + 1;
    assert_eq!(
        fires.len(),
        TASKS * usize::try_from(seconds).expect("seconds"),
        "every fire in the window has a row"
    );
    assert!(fires.values().all(|n| *n == 1), "no fire has two rows");
    for (name, at) in fires.keys() {
        assert_eq!(at % 1000, 0, "{name} fired at a whole second");
    }

    // No run has two successful attempts.
    let doubled = admin
        .count(
            &format!(
                "SELECT COUNT(*) FROM (SELECT run_id FROM {place}.attempts \
                 WHERE outcome = 'succeeded' GROUP BY run_id HAVING COUNT(*) > 1) AS d"
            ),
            &[],
        )
        .await;
    assert_eq!(doubled, 0, "a run completed twice");

    // Deliveries: per idempotency key, each delivery has its own attempt.
    let mut delivered: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    while let Ok(req) = recorder.requests.try_recv() {
        let key = req.headers.get("idempotency-key").cloned().expect("key");
        let attempt = req
            .headers
            .get("x-agentcron-attempt")
            .and_then(|a| a.parse().ok())
            .expect("attempt header");
        delivered.entry(key).or_default().push(attempt);
    }
    let mut duplicates = 0;
    for (run, attempt) in &runs {
        let seen = delivered.get(run).cloned().unwrap_or_default();
        assert!(!seen.is_empty(), "run {run} succeeded without a delivery");
        let distinct: BTreeSet<i64> = seen.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            seen.len(),
            "run {run}: an attempt delivered twice: {seen:?}"
        );
        assert!(
            seen.iter().all(|a| a <= attempt),
            "run {run}: {seen:?} > {attempt}"
        );
        if seen.len() > 1 {
            duplicates += 1;
            assert!(seen.iter().any(|a| *a > 1), "run {run}: {seen:?}");
        }
    }
    eprintln!(
        "HA on {kind}: {secs} s, {killed} kills, {} fires in the window, each once; \
         {recovered} runs needed more than one attempt, {duplicates} were delivered more than once",
        fires.len()
    );
    admin.drop_place(&place).await;
}
