//! agentcron, the library: a scheduler that gives AI agents a calendar.
//!
//! # Layout
//! - [`cron`]: the cron dialect (re-exported from `agentcron-cron`): parse an
//!   expression, ask for the next fire time in a time zone, describe it.
//!
//! The model, the `Store` trait with its SQLite / PostgreSQL / MySQL
//! backends, the engine loops (planner, dispatcher, lease keeper, reaper,
//! pruner), actions and notifiers join this crate as they are built; see
//! `docs/architecture.md` for the plan and what exists today.

#![forbid(unsafe_code)]

pub use agentcron_cron as cron;
