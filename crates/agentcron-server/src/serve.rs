//! `agentcron serve`: open the database, bring the declared tasks up to date,
//! run the engine until SIGTERM/SIGINT, then stop gracefully.

use agentcron::store::{AnyStore, NewTask, Store, UpdateTask};
use agentcron::{Engine, EngineConfig, Handlers, SystemClock, TaskId, TaskSpec, TaskState};
use anyhow::{Context as _, bail};
use jiff::Timestamp;

use crate::UsageError;
use crate::config::{Config, LogFormat};

pub(crate) async fn run(config: Config) -> anyhow::Result<()> {
    init_logging(&config)?;
    let store = open(&config.database).await?;
    let changed = sync_tasks(&store, &config.tasks, Timestamp::now()).await?;
    let node = config.node.clone().unwrap_or_else(default_node);
    let engine_config = EngineConfig {
        node: node.clone(),
        workers: config.workers,
        lease: config.lease.to_std(),
        exec_enabled: config.exec_enabled,
        max_result_bytes: config.max_result_bytes,
        keep_runs: config.history.keep_runs,
        keep_for: config.history.keep_for.to_std(),
        // Other nodes change a shared database too (see AnyStore::max_sleep).
        max_sleep: store.max_sleep(),
        ..EngineConfig::default()
    };
    let tokens = crate::auth::Tokens::new(&config.tokens)?;
    let listener = bind(&config.listen, !tokens.is_empty()).await?;
    let address = listener
        .local_addr()
        .context("reading the listen address")?;
    let engine = Engine::start(store.clone(), SystemClock, engine_config, Handlers::new())
        .context("starting the engine")?;
    let engine = std::sync::Arc::new(engine);
    let api = std::sync::Arc::new(crate::api::Api {
        store,
        engine: engine.clone(),
        tokens,
    });
    let stop_http = tokio_util::sync::CancellationToken::new();
    let http = {
        let stop = stop_http.clone();
        tokio::spawn(async move {
            axum::serve(listener, crate::api::router(api))
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        })
    };
    tracing::info!("listening on http://{address}");
    tracing::info!(
        database = %redact(&config.database),
        node = %node,
        workers = config.workers,
        declared_tasks = config.tasks.len(),
        tasks_changed = changed,
        "agentcron is running; stop it with SIGTERM or Ctrl-C"
    );
    wait_for_stop_signal().await?;
    tracing::info!(grace = %config.shutdown_grace, "stopping: no new claims; letting running attempts finish");
    stop_http.cancel();
    match http.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "the HTTP server stopped with an error"),
        Err(e) => tracing::warn!(error = %e, "the HTTP server task failed"),
    }
    // The API held the other handle; it has stopped.
    match std::sync::Arc::into_inner(engine) {
        Some(engine) => engine.shutdown(config.shutdown_grace.to_std()).await,
        None => tracing::warn!("the engine is still shared; skipping the graceful stop"),
    }
    tracing::info!("stopped");
    Ok(())
}

/// Binds the API's address. Without API tokens only loopback addresses
/// are allowed: an open scheduler on a network is a remote-execution hole.
async fn bind(listen: &str, has_tokens: bool) -> anyhow::Result<tokio::net::TcpListener> {
    let addr: std::net::SocketAddr = listen.parse().map_err(|_| {
        UsageError(format!(
            "listen `{listen}` is not an address like 127.0.0.1:8080"
        ))
    })?;
    if !addr.ip().is_loopback() && !has_tokens {
        bail!(UsageError(format!(
            "refusing to listen on {addr}: it is not a loopback address and no API tokens are configured \
             (make one with `agentcron token create --role admin`, or listen on 127.0.0.1)"
        )));
    }
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

async fn open(url: &str) -> anyhow::Result<AnyStore> {
    match AnyStore::open(url).await {
        Err(agentcron::store::StoreError::Unsupported(e)) => Err(UsageError(e.to_string()).into()),
        other => other.with_context(|| format!("cannot open the database {}", redact(url))),
    }
}

/// A database URL without its password, for messages and logs.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Creates declared tasks that do not exist and updates those whose
/// definition changed (by name). Returns how many it created or updated.
async fn sync_tasks(store: &AnyStore, tasks: &[TaskSpec], now: Timestamp) -> anyhow::Result<usize> {
    let mut changed = 0;
    for (i, spec) in tasks.iter().enumerate() {
        // A deleted (cancelled) task of that name stays history; declaring
        // the name again makes a new task.
        let existing = store
            .get_task_by_name(&spec.name)
            .await?
            .filter(|t| t.state != TaskState::Cancelled);
        let id = existing.as_ref().map_or_else(TaskId::new, |t| t.id);
        let schedule = spec
            .validate(&id.to_string())
            .map_err(|e| UsageError(format!("task[{i}] `{}`: {e}", spec.name)))?;
        match existing {
            None => {
                store
                    .create_task(NewTask {
                        id,
                        spec: spec.clone(),
                        next_fire_at: schedule.next_after(now),
                        now,
                    })
                    .await?;
                tracing::info!(task = %spec.name, "created declared task");
                changed += 1;
            }
            Some(task) if task.spec != *spec => {
                // A changed schedule starts over from now; otherwise keep the next fire.
                let next_fire_at = if task.spec.schedule == spec.schedule {
                    task.next_fire_at
                } else {
                    schedule.next_after(now)
                };
                let state = if task.state == TaskState::Completed {
                    TaskState::Active
                } else {
                    task.state
                };
                store
                    .update_task(UpdateTask {
                        id: task.id,
                        expected_version: task.version,
                        spec: spec.clone(),
                        state,
                        next_fire_at,
                        now,
                    })
                    .await?;
                tracing::info!(task = %spec.name, "updated declared task");
                changed += 1;
            }
            Some(_) => {}
        }
    }
    Ok(changed)
}

fn default_node() -> String {
    let host = agentcron::engine::host_name().unwrap_or_else(|| "node".into());
    let suffix = uuid::Uuid::now_v7().simple().to_string();
    format!("{host}-{}", &suffix[suffix.len() - 6..])
}

fn init_logging(config: &Config) -> anyhow::Result<()> {
    let level: tracing::Level = config
        .log_level
        .parse()
        .map_err(|_| UsageError(format!("log_level `{}` is not a level", config.log_level)))?;
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match config.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Human => builder.try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

async fn wait_for_stop_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
        tokio::select! {
            _ = term.recv() => {}
            r = tokio::signal::ctrl_c() => r.context("listening for SIGINT")?,
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("listening for Ctrl-C")?;
    Ok(())
}
