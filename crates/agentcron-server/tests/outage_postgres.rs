//! A database outage under load: two `agentcron serve` nodes on a private
//! PostgreSQL server (made for this test with initdb, so the machine's own
//! server is never touched), ten tasks firing every second. The server is
//! stopped for 30 s (`AGENTCRON_TEST_OUTAGE_SECS`) and started again.
//!
//! During the outage both nodes stay up and `/readyz` answers 503. After it,
//! `/readyz` is ready again, outcomes are recorded again within 10 s, the
//! backlog is caught up within 30 s, and every fire
//! from before, during and after the outage has exactly one ledger row that
//! succeeded (misfire policy `once` with a grace longer than the outage, so
//! the late fires run).
//!
//! Runs when `AGENTCRON_TEST_POSTGRES_URL` is set (the machine has
//! PostgreSQL), as root (initdb runs as the `postgres` user).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sqlx::{Connection, Row};
use support::{client, serve_with_database};

const BIN: &str = "/usr/lib/postgresql/15/bin";

/// A PostgreSQL server of this test's own, in a temporary directory.
struct PrivatePg {
    dir: PathBuf,
    port: u16,
    _keep: tempfile::TempDir,
}

fn as_postgres(program: &str, args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args(["-u", "postgres", "--", &format!("{BIN}/{program}")])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

impl PrivatePg {
    fn create() -> PrivatePg {
        let keep = tempfile::tempdir().expect("tempdir");
        let dir = keep.path().join("pg");
        std::fs::create_dir(&dir).expect("mkdir");
        let chown = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(keep.path())
            .status()
            .expect("chown");
        assert!(chown.success());
        let out = as_postgres(
            "initdb",
            &[
                "-D",
                path(&dir),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
        );
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let pg = PrivatePg {
            dir,
            port,
            _keep: keep,
        };
        pg.start();
        pg
    }

    fn start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            path(&self.dir)
        );
        let log = self.dir.join("log");
        let out = as_postgres(
            "pg_ctl",
            &[
                "-D",
                path(&self.dir),
                "-l",
                path(&log),
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn stop(&self) {
        let out = as_postgres(
            "pg_ctl",
            &["-D", path(&self.dir), "-m", "fast", "-w", "stop"],
        );
        assert!(
            out.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let _ = as_postgres(
            "pg_ctl",
            &["-D", path(&self.dir), "-m", "immediate", "stop"],
        );
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

async fn ready(http: &reqwest::Client, base: &str) -> u16 {
    http.get(format!("{base}/readyz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_ride_out_a_database_outage() {
    use agentcron_testkit::http::{TestServer, ok};
    if std::env::var_os("AGENTCRON_TEST_POSTGRES_URL").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "AGENTCRON_TEST_POSTGRES_URL is not set; .ci/run sets it"
        );
        return;
    }
    let outage: u64 = std::env::var("AGENTCRON_TEST_OUTAGE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let pg = PrivatePg::create();
    let url = pg.url();
    let mut recorder = TestServer::start(vec![ok("{}")]).await;
    // Leases outlast the outage, so runs in flight keep their outcome and
    // write it afterwards instead of being recovered.
    let config = "lease = \"90s\"\n";
    let nodes = [
        serve_with_database(config, &url),
        serve_with_database(config, &url),
    ];
    let http = client();
    for i in 0..10 {
        let spec = serde_json::json!({
            "name": format!("every-second-{i}"),
            "schedule": {"every": "1s"},
            "action": {"type": "http", "url": format!("{}/fire", recorder.url)},
            "overlap": "allow",
            "misfire": {"policy": "all", "grace": "5m", "max_catchup": 1000},
        });
        let r = http
            .post(nodes[i % 2].url("/api/v1/tasks"))
            .json(&spec)
            .send()
            .await
            .expect("create");
        assert_eq!(r.status().as_u16(), 201);
    }
    let start = jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(4)).await;

    // The outage.
    pg.stop();
    let down_at = jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    for node in &nodes {
        assert_eq!(
            ready(&http, &node.base).await,
            503,
            "not ready while the database is down"
        );
    }
    tokio::time::sleep(Duration::from_secs(outage.saturating_sub(3))).await;
    pg.start();
    let up_at = jiff::Timestamp::now();

    // Ready again, and planning resumed: fires after the restart succeed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    for node in &nodes {
        while ready(&http, &node.base).await != 200 {
            assert!(tokio::time::Instant::now() < deadline, "not ready again");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let mut db = sqlx::PgConnection::connect(&url).await.expect("connect");
    // Resumed: outcomes are written again within 10 s of the restart.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let resumed_after = loop {
        let written: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE finished_at > $1")
            .bind(up_at.as_millisecond())
            .fetch_one(&mut db)
            .await
            .expect("count");
        if written > 0 {
            break jiff::Timestamp::now().duration_since(up_at);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing recorded within 10 s of the restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Caught up: the backlog ran and fires after the restart succeed, within 30 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let caught_up_after = loop {
        let after: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM runs WHERE scheduled_for > $1 AND status = 'succeeded'",
        )
        .bind(up_at.as_millisecond() + 1000)
        .fetch_one(&mut db)
        .await
        .expect("count");
        if after >= 10 {
            break jiff::Timestamp::now().duration_since(up_at);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not caught up within 30 s of the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    let end = jiff::Timestamp::now();
    for i in 0..10 {
        http.post(nodes[0].url(&format!("/api/v1/tasks/every-second-{i}/pause")))
            .send()
            .await
            .expect("pause");
    }

    // Every fire from 2 s after the start to 2 s before the end: one row, succeeded.
    let (first, last) = (start.as_second() + 2, end.as_second() - 2);
    let settle = tokio::time::Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let rows = sqlx::query(
            "SELECT t.name, r.scheduled_for, r.status, r.attempt FROM runs r \
             JOIN tasks t ON t.id = r.task_id WHERE r.scheduled_for BETWEEN $1 AND $2",
        )
        .bind(first * 1000)
        .bind(last * 1000)
        .fetch_all(&mut db)
        .await
        .expect("runs");
        let open = rows
            .iter()
            .filter(|r| {
                ["queued", "running", "retrying"].contains(&r.get::<String, _>("status").as_str())
            })
            .count();
        if open == 0 {
            break rows;
        }
        assert!(
            tokio::time::Instant::now() < settle,
            "{open} runs still open"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut fires: BTreeMap<(String, i64), usize> = BTreeMap::new();
    let mut retried = 0;
    for row in &rows {
        let name: String = row.get("name");
        let at: i64 = row.get("scheduled_for");
        let status: String = row.get("status");
        assert_eq!(status, "succeeded", "{name} at {at}");
        if row.get::<i64, _>("attempt") > 1 {
            retried += 1;
        }
        *fires.entry((name, at)).or_default() += 1;
    }
    let seconds = usize::try_from(last - first + 1).expect("seconds");
    assert_eq!(fires.len(), 10 * seconds, "every fire has a row");
    assert!(fires.values().all(|n| *n == 1), "no fire has two rows");
    let mut deliveries = 0;
    while recorder.requests.try_recv().is_ok() {
        deliveries += 1;
    }
    eprintln!(
        "outage: database down {:.1} s; recording resumed {:.1} s and caught up {:.1} s after \
         the restart; {} fires over {seconds} s, each once and succeeded; {retried} needed a \
         second attempt; {deliveries} deliveries",
        up_at.duration_since(down_at).as_secs_f64(),
        resumed_after.as_secs_f64(),
        caught_up_after.as_secs_f64(),
        fires.len(),
    );
    drop(nodes);
}
