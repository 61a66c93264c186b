//! Actions: what a run does.
//!
//! - `http`: call an endpoint (see its module docs for headers and retries).
//! - `handler` (here): in-process async functions registered by name.
//! - `template`: minijinja rendering of payload strings.
//!
//! - `exec`: run a program in its own process group (off unless enabled).
//!
//! An action's error says whether to retry ([`ActionError::Retryable`], with
//! an optional delay the callee asked for) or not ([`ActionError::Permanent`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::model::{ActionSpec, RunId, TaskId, Trigger};

mod exec;
pub(crate) mod http;
mod template;

/// A successful attempt: the run's result and captured output.
#[derive(Clone, Debug, Default)]
pub(crate) struct Done {
    pub(crate) result: Option<serde_json::Value>,
    pub(crate) output: Option<String>,
}

/// Everything an action may use about the attempt it performs.
#[derive(Clone, Debug)]
pub(crate) struct Attempt {
    pub(crate) run_id: RunId,
    pub(crate) task_id: TaskId,
    pub(crate) task_name: String,
    pub(crate) labels: std::collections::BTreeMap<String, String>,
    pub(crate) scheduled_for: Timestamp,
    pub(crate) trigger: Trigger,
    pub(crate) attempt: i64,
    pub(crate) fence: i64,
    /// The manual trigger's payload override, if any.
    pub(crate) payload: Option<serde_json::Value>,
}

/// What actions share across attempts.
#[derive(Debug)]
pub(crate) struct Actions {
    pub(crate) handlers: Handlers,
    pub(crate) http: reqwest::Client,
    /// Whether this node runs `exec` actions.
    pub(crate) exec_enabled: bool,
    /// Largest result or output kept, in bytes.
    pub(crate) max_result: usize,
}

impl Actions {
    pub(crate) fn new(
        handlers: Handlers,
        exec_enabled: bool,
        max_result: usize,
    ) -> Result<Self, ActionError> {
        Ok(Actions {
            handlers,
            http: http::client()?,
            exec_enabled,
            max_result,
        })
    }

    /// Performs `action` once.
    pub(crate) async fn perform(
        &self,
        action: &ActionSpec,
        retry: &crate::model::RetryPolicy,
        attempt: &Attempt,
        cancel: CancellationToken,
    ) -> Result<Done, ActionError> {
        let result = |r: Option<serde_json::Value>| Done {
            result: r,
            output: None,
        };
        match action {
            ActionSpec::Http {
                method,
                url,
                headers,
                body,
            } => http::call(
                &self.http,
                http::Call {
                    method,
                    url,
                    headers,
                    body: body.as_ref(),
                },
                attempt,
                retry.retry_4xx,
                self.max_result,
            )
            .await
            .map(result),
            ActionSpec::Handler { name, payload } => {
                let context = HandlerContext {
                    run_id: attempt.run_id,
                    task_id: attempt.task_id,
                    task_name: attempt.task_name.clone(),
                    scheduled_for: attempt.scheduled_for,
                    attempt: attempt.attempt,
                    fence: attempt.fence,
                    payload: attempt.payload.clone().or_else(|| payload.clone()),
                    cancel,
                };
                self.handlers.call(name, context).await.map(result)
            }
            ActionSpec::Exec { .. } if !self.exec_enabled => Err(ActionError::permanent(
                "exec actions are disabled on this node; enable them with `exec_enabled = true` \
                 in agentcron.toml or AGENTCRON_EXEC_ENABLED=true",
            )),
            ActionSpec::Exec { command, env, cwd } => {
                exec::run(command, env, cwd.as_deref(), attempt, self.max_result).await
            }
        }
    }
}

/// Why an attempt failed, and whether another attempt may help.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// Worth retrying (network trouble, 5xx, 429, timeouts of the callee).
    #[error("{message}")]
    Retryable {
        /// What happened.
        message: String,
        /// The callee's requested delay (`Retry-After`), if any.
        retry_after: Option<Duration>,
    },
    /// Retrying cannot help (bad request, missing handler).
    #[error("{message}")]
    Permanent {
        /// What happened.
        message: String,
    },
}

impl ActionError {
    /// A retryable error.
    pub fn retryable(message: impl Into<String>) -> Self {
        ActionError::Retryable {
            message: message.into(),
            retry_after: None,
        }
    }

    /// A permanent error.
    pub fn permanent(message: impl Into<String>) -> Self {
        ActionError::Permanent {
            message: message.into(),
        }
    }
}

/// What a handler gets to know about the attempt it serves.
#[derive(Clone, Debug)]
pub struct HandlerContext {
    /// The run: the idempotency key, the same on every attempt.
    pub run_id: RunId,
    /// The task.
    pub task_id: TaskId,
    /// The task's name.
    pub task_name: String,
    /// The nominal fire time.
    pub scheduled_for: Timestamp,
    /// This attempt's number, from 1.
    pub attempt: i64,
    /// This attempt's fence; higher on a recovery of the same run.
    pub fence: i64,
    /// The task's payload, or the manual trigger's override.
    pub payload: Option<serde_json::Value>,
    /// Cancelled when the run is cancelled, times out or loses its lease.
    pub cancel: CancellationToken,
}

/// The future a handler returns: the run's result on success.
pub type HandlerFuture =
    Pin<Box<dyn Future<Output = Result<Option<serde_json::Value>, ActionError>> + Send>>;

type HandlerFn = Arc<dyn Fn(HandlerContext) -> HandlerFuture + Send + Sync>;

/// In-process handlers by name, for `{"type": "handler", "name": …}` actions.
#[derive(Clone, Default)]
pub struct Handlers {
    map: HashMap<String, HandlerFn>,
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.map.keys()).finish()
    }
}

impl Handlers {
    /// No handlers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `handler` under `name`, replacing any earlier one.
    ///
    /// ```
    /// let mut handlers = agentcron::Handlers::new();
    /// handlers.register("generate_daily_report", |ctx| async move {
    ///     Ok(Some(serde_json::json!({"run": ctx.run_id.to_string()})))
    /// });
    /// ```
    pub fn register<F, Fut>(&mut self, name: impl Into<String>, handler: F)
    where
        F: Fn(HandlerContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<serde_json::Value>, ActionError>> + Send + 'static,
    {
        let f: HandlerFn = Arc::new(move |ctx| Box::pin(handler(ctx)));
        self.map.insert(name.into(), f);
    }

    pub(crate) fn call(&self, name: &str, ctx: HandlerContext) -> HandlerFuture {
        match self.map.get(name) {
            Some(f) => f(ctx),
            None => {
                let message = format!(
                    "no handler named `{name}` is registered in this process (register it with Handlers::register)"
                );
                Box::pin(async move { Err(ActionError::permanent(message)) })
            }
        }
    }
}
