//! agentcron, the library: a scheduler that gives AI agents a calendar.
//!
//! # Layout
//! - [`cron`]: the cron dialect (re-exported from `agentcron-cron`): parse an
//!   expression, ask for the next fire time in a time zone, describe it.
//! - `model`: the domain — [`TaskSpec`] (a task as users write it: schedule,
//!   action, retry, timeout, overlap and misfire policies), [`Task`] (stored,
//!   with state, next fire and version), ids.
//! - `validate`: checks a [`TaskSpec`] on the way in; [`ValidationError`]
//!   names the field.
//! - `schedule`: [`CompiledSchedule`], a task's schedule ready to answer
//!   "when next?" for the planner.
//! - `duration`: [`HumanDuration`], durations written `90s`, `1h30m`.
//! - [`store`]: the [`store::Store`] trait (one method per database
//!   operation) and its backends ([`store::SqliteStore`] today), with the
//!   migrations in `migrations/<backend>/`.
//! - [`engine`]: the loops every node runs — planner, dispatcher, lease
//!   keeper, reaper, pruner, completer — started by [`Engine::start`], plus
//!   [`Engine::pause`], [`Engine::resume`] and [`Engine::cancel_run`].
//! - `action`: what a run does — `http`, `exec` (process groups) and
//!   in-process [`Handlers`] registered by name; an [`ActionError`] says
//!   whether to retry.
//! - `clock`: [`SystemClock`] in production, [`ManualClock`] in tests.
//!
//! `docs/architecture.md` describes how these fit together.

#![forbid(unsafe_code)]

pub use agentcron_cron as cron;

mod action;
mod clock;
mod duration;
pub mod engine;
mod model;
mod schedule;
pub mod store;
mod validate;

pub use action::{ActionError, HandlerContext, HandlerFuture, Handlers};
pub use clock::{Clock, ManualClock, SystemClock};
pub use duration::{DurationError, HumanDuration};
pub use engine::{Engine, EngineConfig};
pub use model::{
    ActionSpec, Backoff, MisfireKind, MisfirePolicy, Node, OverlapPolicy, RetryPolicy, Run, RunId,
    RunStatus, ScheduleSpec, Task, TaskEvent, TaskId, TaskSpec, TaskState, Trigger,
};
pub use schedule::CompiledSchedule;
pub use validate::ValidationError;
