//! Engine benchmark on a real SQLite file with a no-op handler.
//!
//! `cargo run --release -p agentcron --bin engine-bench [-- burst|sustained [TASKS]]`
//!
//! - burst: 5,000 `once` tasks due at the same instant. Prints the time until
//!   all have started, start lateness (start minus scheduled time) p50/p99/max,
//!   and the time until every run is durably recorded as succeeded.
//! - sustained: 12,000 (or TASKS) tasks firing every second for 10 s. Prints the runs
//!   recorded as succeeded per second and their lateness.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentcron::store::{NewTask, SqliteStore, Store};
use agentcron::{Engine, EngineConfig, Handlers, RunStatus, SystemClock, TaskId, TaskSpec};
use jiff::{SignedDuration, Timestamp};

type Lateness = Arc<Mutex<Vec<i64>>>;

fn handlers(lateness: &Lateness, started: &Arc<AtomicUsize>) -> Handlers {
    let mut h = Handlers::new();
    let (lateness, started) = (lateness.clone(), started.clone());
    h.register("noop", move |ctx| {
        let late = Timestamp::now()
            .duration_since(ctx.scheduled_for)
            .as_micros() as i64;
        if let Ok(mut l) = lateness.lock() {
            l.push(late);
        }
        started.fetch_add(1, Ordering::Relaxed);
        async { Ok(None) }
    });
    h
}

fn percentile(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

async fn create(
    store: &SqliteStore,
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

async fn succeeded(store: &SqliteStore) -> Result<i64, Box<dyn std::error::Error>> {
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

async fn burst() -> Result<(), Box<dyn std::error::Error>> {
    const N: usize = 5000;
    let dir = tempfile_dir()?;
    let store = SqliteStore::open(&format!("sqlite://{}/burst.db", dir.display())).await?;
    let fire = Timestamp::now() + SignedDuration::from_secs(3);
    create(
        &store,
        N,
        serde_json::json!({"once": fire.to_string()}),
        fire,
    )
    .await?;
    let lateness: Lateness = Arc::new(Mutex::new(Vec::with_capacity(N)));
    let started = Arc::new(AtomicUsize::new(0));
    let engine = Engine::start(
        store.clone(),
        SystemClock,
        config(),
        handlers(&lateness, &started),
    )?;
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
    engine.shutdown(Duration::from_secs(5)).await;
    let mut l = lateness.lock().map_err(|_| "poisoned")?.clone();
    l.sort_unstable();
    println!("burst: {N} tasks due at one instant");
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
    Ok(())
}

async fn sustained(n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let n_tasks = n;
    const SECS: i64 = 10;
    let dir = tempfile_dir()?;
    let store = SqliteStore::open(&format!("sqlite://{}/sustained.db", dir.display())).await?;
    let start = Timestamp::now().round(jiff::Unit::Second)? + SignedDuration::from_secs(5);
    create(&store, n_tasks, serde_json::json!({"every": "1s"}), start).await?;
    let lateness: Lateness = Arc::new(Mutex::new(Vec::new()));
    let started = Arc::new(AtomicUsize::new(0));
    let engine = Engine::start(
        store.clone(),
        SystemClock,
        config(),
        handlers(&lateness, &started),
    )?;
    while Timestamp::now() < start {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let before = succeeded(&store).await?;
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(SECS as u64)).await;
    let after = succeeded(&store).await?;
    let elapsed = t0.elapsed().as_secs_f64();
    engine.shutdown(Duration::from_secs(5)).await;
    let mut l = lateness.lock().map_err(|_| "poisoned")?.clone();
    l.sort_unstable();
    println!("sustained: {n_tasks} tasks every second for {SECS} s");
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
    Ok(())
}

fn tempfile_dir() -> Result<std::path::PathBuf, std::io::Error> {
    let dir = std::env::temp_dir().join(format!("agentcron-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    if which == "burst" || which == "all" {
        burst().await?;
    }
    if which == "sustained" || which == "all" {
        let n = std::env::args()
            .nth(2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(12_000);
        sustained(n).await?;
    }
    let _ = std::fs::remove_dir_all(tempfile_dir()?);
    Ok(())
}
