//! The engine on PostgreSQL: a node whose clock is 5 s ahead of the
//! database measures and records that skew, and writes its leases in the
//! database's time, so that other nodes judge them by one clock.
//! Needs `AGENTCRON_TEST_POSTGRES_URL` (fails under CI without it).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentcron::store::Store;
use agentcron::{Engine, EngineConfig, Handlers, ManualClock, RunStatus};
use jiff::{SignedDuration, Timestamp};
use support::{Cleanup, create_task, holding, recv};

#[tokio::test]
async fn a_skewed_node_records_its_skew_and_leases_in_database_time() {
    let Some((store, schema)) = support::pg_store().await else {
        return;
    };
    let ahead = SignedDuration::from_secs(5);
    let clock = Arc::new(ManualClock::new(Timestamp::now() + ahead));
    let (handlers, mut seen, release): (Handlers, _, _) = holding();
    let config = EngineConfig {
        node: "skewed".into(),
        lease: Duration::from_secs(30),
        ..EngineConfig::default()
    };
    let engine = Engine::start(store.clone(), clock.clone(), config, handlers).unwrap();

    // The node's record shows the skew (node minus database), within 1 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let skew = loop {
        let nodes = store.nodes().await.unwrap();
        if let Some(n) = nodes.iter().find(|n| n.id == "skewed" && n.skew_ms != 0) {
            break n.skew_ms;
        }
        assert!(tokio::time::Instant::now() < deadline, "no skew recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!((4000..=6000).contains(&skew), "skew {skew} ms");

    // A run it claims holds a lease that ends 30 s after the database's now,
    // not after its own clock's (which is 5 s further).
    let task = create_task(
        &store,
        support::every_minute("hold", serde_json::json!({"schedule": {"manual": true}})),
        agentcron::Clock::now(&*clock),
    )
    .await;
    engine.trigger(task.id, None).await.unwrap().unwrap();
    let run = recv(&mut seen).await;
    let stored = store.get_run(run.run).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Running);
    let lease_end = stored.lease_expires_at.unwrap();
    let db_now = store.database_now().await.unwrap().unwrap();
    let left = lease_end.duration_since(db_now);
    assert!(
        left > SignedDuration::from_secs(27) && left <= SignedDuration::from_secs(30),
        "lease ends {left:?} after the database's now"
    );
    // Let the attempt finish (the manual clock would never end a grace).
    release.notify_one();
    engine.shutdown(Duration::from_secs(1)).await;
    schema.cleanup().await;
}

#[tokio::test]
async fn a_task_created_by_another_node_wakes_an_idle_engine() {
    let Some((store, schema)) = support::pg_store().await else {
        return;
    };
    // An engine that never polls: only a notification can tell it of the task.
    let (handlers, mut seen) = support::reporting(|_| Ok(()));
    let config = EngineConfig {
        node: "listener".into(),
        max_sleep: None,
        ..EngineConfig::default()
    };
    let engine = Engine::start(store.clone(), agentcron::SystemClock, config, handlers).unwrap();
    // Let it go idle: no tasks, so it sleeps with no deadline.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // "Another node": its own connection pool on the same schema.
    let other = agentcron::store::PgStore::open(&schema.url).await.unwrap();
    create_task(
        &other,
        support::every_minute("report", serde_json::json!({"schedule": {"every": "1s"}})),
        Timestamp::now(),
    )
    .await;
    let run = tokio::time::timeout(Duration::from_secs(5), recv(&mut seen))
        .await
        .expect("the idle engine ran the other node's task within 5 s");
    assert_eq!(run.attempt, 1);
    engine.shutdown(Duration::from_secs(1)).await;
    other.close().await;
    schema.cleanup().await;
}
