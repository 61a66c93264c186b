//! Engine benchmark on a real SQLite file, or a real PostgreSQL database, with
//! a no-op handler.
//!
//! `cargo run --release -p agentcron --bin engine-bench [-- burst|sustained [TASKS]]`
//!
//! `… -- pg-burst|pg-sustained URL NODES [TASKS]` runs the same on PostgreSQL
//! (in a fresh schema of the database at URL) with NODES engines in this
//! process, each with its own connection pool, and counts duplicate starts.
//!
//! - burst: 5,000 `once` tasks due at the same instant. Prints the time until
//!   all have started, start lateness (start minus scheduled time) p50/p99/max,
//!   and the time until every run is durably recorded as succeeded.
//! - sustained: 12,000 (or TASKS) tasks firing every second for 10 s. Prints the runs
//!   recorded as succeeded per second and their lateness.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentcron::store::{AnyStore, NewTask, Store};
use agentcron::{Engine, EngineConfig, Handlers, RunStatus, SystemClock, TaskId, TaskSpec};
use jiff::{SignedDuration, Timestamp};

type Lateness = Arc<Mutex<Vec<i64>>>;

/// What the no-op handler saw, shared by every engine of a run.
#[derive(Clone, Default)]
struct Seen {
    lateness: Lateness,
    started: Arc<AtomicUsize>,
    /// Run ids started, to count duplicate starts across nodes.
    runs: Arc<Mutex<std::collections::HashSet<agentcron::RunId>>>,
    duplicates: Arc<AtomicUsize>,
}

fn handlers(seen: &Seen) -> Handlers {
    let mut h = Handlers::new();
    let seen = seen.clone();
    h.register("noop", move |ctx| {
        let late = Timestamp::now()
            .duration_since(ctx.scheduled_for)
            .as_micros() as i64;
        if let Ok(mut l) = seen.lateness.lock() {
            l.push(late);
        }
        if let Ok(mut runs) = seen.runs.lock()
            && !runs.insert(ctx.run_id)
        {
            seen.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        seen.started.fetch_add(1, Ordering::Relaxed);
        async { Ok(None) }
    });
    h
}

/// Where a bench runs: the stores its engines use (one per node).
struct Target {
    stores: Vec<AnyStore>,
    /// PostgreSQL: the schema to drop afterwards, and how to reach the database.
    schema: Option<(String, String)>,
}

impl Target {
    async fn sqlite(name: &str) -> Result<Target, Box<dyn std::error::Error>> {
        let dir = tempfile_dir()?;
        let store = AnyStore::open(&format!("sqlite://{}/{name}.db", dir.display())).await?;
        Ok(Target {
            stores: vec![store],
            schema: None,
        })
    }

    async fn postgres(base: &str, nodes: usize) -> Result<Target, Box<dyn std::error::Error>> {
        use sqlx::{Connection, Executor};
        let schema = format!("agentcron_bench_{}", std::process::id());
        let mut admin = sqlx::PgConnection::connect(base).await?;
        admin
            .execute(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
            )))
            .await?;
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        let mut stores = Vec::new();
        for _ in 0..nodes {
            stores.push(AnyStore::open(&url).await?);
        }
        Ok(Target {
            stores,
            schema: Some((base.to_string(), schema)),
        })
    }

    fn start(
        &self,
        seen: &Seen,
    ) -> Result<Vec<Engine<AnyStore, SystemClock>>, Box<dyn std::error::Error>> {
        let mut engines = Vec::new();
        for (i, store) in self.stores.iter().enumerate() {
            let mut config = config();
            config.node = format!("bench-{i}");
            config.max_sleep = store.max_sleep();
            engines.push(Engine::start(
                store.clone(),
                SystemClock,
                config,
                handlers(seen),
            )?);
        }
        Ok(engines)
    }

    async fn finish(
        self,
        engines: Vec<Engine<AnyStore, SystemClock>>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        for e in engines {
            e.shutdown(Duration::from_secs(5)).await;
        }
        if let Some((base, schema)) = self.schema {
            use sqlx::{Connection, Executor};
            let mut admin = sqlx::PgConnection::connect(&base).await?;
            admin
                .execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .await?;
        }
        Ok(())
    }

    /// How far ahead the first fire is set: time to create the tasks (one
    /// statement each, slower over a network connection than into SQLite).
    fn lead(&self, secs: i64) -> SignedDuration {
        SignedDuration::from_secs(if self.schema.is_some() {
            secs * 4
        } else {
            secs
        })
    }

    fn describe(&self) -> String {
        match &self.schema {
            None => "SQLite".into(),
            Some(_) => format!("PostgreSQL, {} node(s)", self.stores.len()),
        }
    }
}

fn percentile(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

async fn create(
    store: &AnyStore,
    n: usize,
    schedule: serde_json::Value,
    first: Timestamp,
) -> Result<(), Box<dyn std::error::Error>> {
    for i in 0..n {
        let spec: TaskSpec = serde_json::from_value(serde_json::json!({
            "name": format!("task-{i}"),
            "schedule": schedule,
            "action": {"type": "handler", "name": "noop"},
            "overlap": "allow",
            "misfire": {"policy": "all", "grace": "1m"},
        }))?;
        let id = TaskId::new();
        let schedule = spec.validate(&id.to_string())?;
        let next = schedule.next_after(first - SignedDuration::from_millis(1));
        store
            .create_task(NewTask {
                id,
                spec,
                next_fire_at: next,
                now: Timestamp::now(),
            })
            .await?;
    }
    Ok(())
}

async fn succeeded(store: &AnyStore) -> Result<i64, Box<dyn std::error::Error>> {
    Ok(store
        .run_status_counts()
        .await?
        .into_iter()
        .find(|(s, _)| *s == RunStatus::Succeeded)
        .map_or(0, |(_, n)| n))
}

fn config() -> EngineConfig {
    EngineConfig {
        node: "bench".into(),
        workers: 4096,
        plan_batch: 5000,
        ..EngineConfig::default()
    }
}

async fn burst(target: Target) -> Result<(), Box<dyn std::error::Error>> {
    const N: usize = 5000;
    let store = target.stores[0].clone();
    let fire = Timestamp::now() + target.lead(3);
    create(
        &store,
        N,
        serde_json::json!({"once": fire.to_string()}),
        fire,
    )
    .await?;
    let seen = Seen::default();
    let started = seen.started.clone();
    let engines = target.start(&seen)?;
    // Wait for the fire, then for every start and every recorded outcome.
    while Timestamp::now() < fire {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let t0 = Instant::now();
    while started.load(Ordering::Relaxed) < N {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "burst did not finish"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let all_started = t0.elapsed();
    while (succeeded(&store).await? as usize) < N {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "outcomes not recorded"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let all_recorded = t0.elapsed();
    let what = target.describe();
    target.finish(engines).await?;
    let mut l = seen.lateness.lock().map_err(|_| "poisoned")?.clone();
    l.sort_unstable();
    println!("burst ({what}): {N} tasks due at one instant");
    println!(
        "  all started after      {:8.1} ms",
        all_started.as_secs_f64() * 1000.0
    );
    println!(
        "  all recorded after     {:8.1} ms",
        all_recorded.as_secs_f64() * 1000.0
    );
    println!(
        "  lateness p50 / p99 / max  {:.1} / {:.1} / {:.1} ms",
        percentile(&l, 0.5),
        percentile(&l, 0.99),
        percentile(&l, 1.0)
    );
    println!(
        "  duplicate starts       {:8}",
        seen.duplicates.load(Ordering::Relaxed)
    );
    Ok(())
}

async fn sustained(target: Target, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let n_tasks = n;
    const SECS: i64 = 10;
    let store = target.stores[0].clone();
    let start = Timestamp::now().round(jiff::Unit::Second)? + target.lead(5);
    create(&store, n_tasks, serde_json::json!({"every": "1s"}), start).await?;
    let seen = Seen::default();
    let engines = target.start(&seen)?;
    while Timestamp::now() < start {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let before = succeeded(&store).await?;
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(SECS as u64)).await;
    let after = succeeded(&store).await?;
    let elapsed = t0.elapsed().as_secs_f64();
    let what = target.describe();
    target.finish(engines).await?;
    let mut l = seen.lateness.lock().map_err(|_| "poisoned")?.clone();
    l.sort_unstable();
    println!("sustained ({what}): {n_tasks} tasks every second for {SECS} s");
    println!(
        "  recorded succeeded runs  {:8.0} runs/s",
        (after - before) as f64 / elapsed
    );
    println!(
        "  started                  {:8.0} runs/s",
        l.len() as f64 / elapsed
    );
    println!(
        "  lateness p50 / p99 / max  {:.1} / {:.1} / {:.1} ms",
        percentile(&l, 0.5),
        percentile(&l, 0.99),
        percentile(&l, 1.0)
    );
    println!(
        "  duplicate starts         {:8}",
        seen.duplicates.load(Ordering::Relaxed)
    );
    Ok(())
}

fn tempfile_dir() -> Result<std::path::PathBuf, std::io::Error> {
    let dir = std::env::temp_dir().join(format!("agentcron-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).cloned();
    let which = arg(1).unwrap_or_else(|| "all".into());
    let number = |i: usize, default: usize| arg(i).and_then(|n| n.parse().ok()).unwrap_or(default);
    match which.as_str() {
        "burst" => burst(Target::sqlite("burst").await?).await?,
        "sustained" => sustained(Target::sqlite("sustained").await?, number(2, 12_000)).await?,
        "all" => {
            burst(Target::sqlite("burst").await?).await?;
            sustained(Target::sqlite("sustained").await?, 12_000).await?;
        }
        "pg-burst" | "pg-sustained" => {
            let url =
                arg(2).ok_or("give the PostgreSQL URL, e.g. postgres://postgres@127.0.0.1/test")?;
            let target = Target::postgres(&url, number(3, 1)).await?;
            if which == "pg-burst" {
                burst(target).await?;
            } else {
                sustained(target, number(4, 5_000)).await?;
            }
        }
        other => {
            return Err(format!(
                "unknown bench `{other}`: burst, sustained, pg-burst, pg-sustained"
            )
            .into());
        }
    }
    let _ = std::fs::remove_dir_all(tempfile_dir()?);
    Ok(())
}
