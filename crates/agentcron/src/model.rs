//! The domain model: what a task is (its definition as users write it, and
//! the stored task around it) and what a run is (one nominal fire of a task).

use std::collections::BTreeMap;
use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::HumanDuration;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new time-ordered (UUIDv7) id.
            pub fn new() -> Self {
                $name(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, uuid::Error> {
                Ok($name(s.parse()?))
            }
        }
    };
}

id_type!(
    /// A task's id (UUIDv7, so ids sort by creation time).
    TaskId
);
id_type!(
    /// A run's id; also the idempotency key actions receive.
    RunId
);

/// When a task fires. JSON: `{"cron": "0 9 * * 1-5", "timezone": "Asia/Shanghai"}`,
/// `{"every": "25m"}`, `{"once": "2026-12-01T09:00:00+08:00"}` or `{"manual": true}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ScheduleWire", into = "ScheduleWire")]
pub enum ScheduleSpec {
    /// A cron expression read in an IANA time zone, with its DST policy.
    Cron {
        /// The expression (see `agentcron::cron`).
        expr: String,
        /// IANA zone name; default `UTC`.
        timezone: String,
        /// Spring-forward and fall-back behaviour of fixed-time jobs.
        dst: agentcron_cron::DstPolicy,
    },
    /// A fixed interval, counted from `anchor` (default: the Unix epoch).
    Every {
        /// The interval, at least 1s.
        interval: HumanDuration,
        /// Where the grid of fire times starts.
        anchor: Option<Timestamp>,
    },
    /// One fire at an instant.
    Once {
        /// When.
        at: Timestamp,
    },
    /// Never fires by itself; only when triggered.
    Manual,
}

/// The JSON shape of [`ScheduleSpec`]: exactly one of the keys is given.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleWire {
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dst: Option<DstWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every: Option<HumanDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    anchor: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    once: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    manual: Option<bool>,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DstWire {
    #[serde(default)]
    gap: GapWire,
    #[serde(default)]
    fold: FoldWire,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum GapWire {
    #[default]
    Shift,
    Skip,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FoldWire {
    #[default]
    Once,
    Twice,
}

impl TryFrom<ScheduleWire> for ScheduleSpec {
    type Error = String;

    fn try_from(w: ScheduleWire) -> Result<Self, String> {
        let given = [
            w.cron.is_some(),
            w.every.is_some(),
            w.once.is_some(),
            w.manual.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err("give exactly one of `cron`, `every`, `once` or `manual`".into());
        }
        if w.cron.is_none() && (w.timezone.is_some() || w.dst.is_some()) {
            return Err("`timezone` and `dst` belong to a `cron` schedule".into());
        }
        if w.every.is_none() && w.anchor.is_some() {
            return Err("`anchor` belongs to an `every` schedule".into());
        }
        Ok(if let Some(expr) = w.cron {
            let dst = w.dst.unwrap_or_default();
            ScheduleSpec::Cron {
                expr,
                timezone: w.timezone.unwrap_or_else(|| "UTC".into()),
                dst: agentcron_cron::DstPolicy {
                    gap: match dst.gap {
                        GapWire::Shift => agentcron_cron::Gap::Shift,
                        GapWire::Skip => agentcron_cron::Gap::Skip,
                    },
                    fold: match dst.fold {
                        FoldWire::Once => agentcron_cron::Fold::Once,
                        FoldWire::Twice => agentcron_cron::Fold::Twice,
                    },
                },
            }
        } else if let Some(interval) = w.every {
            ScheduleSpec::Every {
                interval,
                anchor: w.anchor,
            }
        } else if let Some(at) = w.once {
            ScheduleSpec::Once { at }
        } else if w.manual == Some(true) {
            ScheduleSpec::Manual
        } else {
            return Err("`manual` must be true (omit the schedule's other keys)".into());
        })
    }
}

impl From<ScheduleSpec> for ScheduleWire {
    fn from(s: ScheduleSpec) -> Self {
        match s {
            ScheduleSpec::Cron {
                expr,
                timezone,
                dst,
            } => ScheduleWire {
                cron: Some(expr),
                timezone: Some(timezone),
                dst: Some(DstWire {
                    gap: match dst.gap {
                        agentcron_cron::Gap::Shift => GapWire::Shift,
                        agentcron_cron::Gap::Skip => GapWire::Skip,
                    },
                    fold: match dst.fold {
                        agentcron_cron::Fold::Once => FoldWire::Once,
                        agentcron_cron::Fold::Twice => FoldWire::Twice,
                    },
                }),
                ..ScheduleWire::default()
            },
            ScheduleSpec::Every { interval, anchor } => ScheduleWire {
                every: Some(interval),
                anchor,
                ..ScheduleWire::default()
            },
            ScheduleSpec::Once { at } => ScheduleWire {
                once: Some(at),
                ..ScheduleWire::default()
            },
            ScheduleSpec::Manual => ScheduleWire {
                manual: Some(true),
                ..ScheduleWire::default()
            },
        }
    }
}

/// What a run does. JSON is tagged by `type`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ActionSpec {
    /// Call an HTTP endpoint; 2xx is success.
    Http {
        /// Method, default `POST`.
        #[serde(default = "default_method")]
        method: String,
        /// `http://` or `https://` URL.
        url: String,
        /// Extra request headers.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
        /// JSON body, rendered as a template.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<serde_json::Value>,
    },
    /// Run a command (argv, no shell); exit 0 is success.
    Exec {
        /// Program and arguments.
        command: Vec<String>,
        /// Extra environment variables.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        /// Working directory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
    /// An in-process async function registered by name (library use).
    Handler {
        /// The registered name.
        name: String,
        /// Payload passed to the handler.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payload: Option<serde_json::Value>,
    },
}

fn default_method() -> String {
    "POST".into()
}

/// Exponential backoff between attempts of one run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Backoff {
    /// Delay before the second attempt.
    pub initial: HumanDuration,
    /// Upper bound of any delay.
    pub max: HumanDuration,
    /// Growth per attempt.
    pub multiplier: f64,
    /// Random spread, as a fraction of the delay (0 to 1).
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: HumanDuration::from_secs(1),
            max: HumanDuration::from_secs(300),
            multiplier: 2.0,
            jitter: 0.1,
        }
    }
}

/// How often a run is attempted before it fails.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Attempts in all, at least 1 (1 means no retry).
    pub max_attempts: u32,
    /// Delays between attempts.
    pub backoff: Backoff,
    /// Also retry HTTP 4xx answers (408 and 429 always retry; other 4xx do
    /// not unless this is set).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub retry_4xx: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 1,
            backoff: Backoff::default(),
            retry_4xx: false,
        }
    }
}

/// What happens when a fire comes while the previous run is still going.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlapPolicy {
    /// Run both.
    Allow,
    /// Record the new fire as skipped, with the reason (default: no pile-ups).
    #[default]
    Forbid,
    /// Cancel the running one, start the new one.
    Replace,
    /// Start the new one when the previous ends.
    Queue,
}

/// Which missed fires (after downtime or a long pause) still run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MisfireKind {
    /// None: every missed fire is recorded as missed.
    Skip,
    /// The most recent missed fire runs once (default).
    #[default]
    Once,
    /// Every missed fire runs, up to `max_catchup`.
    All,
}

/// The misfire policy: what to do with fires later than `grace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MisfirePolicy {
    /// See [`MisfireKind`].
    pub policy: MisfireKind,
    /// A fire later than this is a misfire.
    pub grace: HumanDuration,
    /// With `all`: at most this many catch-up runs.
    pub max_catchup: u32,
}

impl Default for MisfirePolicy {
    fn default() -> Self {
        MisfirePolicy {
            policy: MisfireKind::Once,
            grace: HumanDuration::from_secs(60),
            max_catchup: 10,
        }
    }
}

/// A task as users define it (API body, `[[task]]` table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Unique name: 1–128 characters of letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Free labels for filtering.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// When it fires.
    pub schedule: ScheduleSpec,
    /// What a run does.
    pub action: ActionSpec,
    /// Retries.
    #[serde(default)]
    pub retry: RetryPolicy,
    /// Per-attempt time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<HumanDuration>,
    /// Overlapping runs.
    #[serde(default)]
    pub overlap: OverlapPolicy,
    /// Late fires.
    #[serde(default)]
    pub misfire: MisfirePolicy,
}

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Fires on schedule.
    Active,
    /// Does not fire; fires in the pause are recorded as a task event.
    Paused,
    /// Deleted by a user; kept for history.
    Cancelled,
    /// A `once` task after its fire.
    Completed,
}

/// A stored task: its definition and its bookkeeping.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Id.
    pub id: TaskId,
    /// The definition.
    #[serde(flatten)]
    pub spec: TaskSpec,
    /// Life state.
    pub state: TaskState,
    /// The next nominal fire, if any.
    pub next_fire_at: Option<Timestamp>,
    /// Bumped on every change (optimistic locking).
    pub version: i64,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// Something that happened to a task besides its runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskEvent {
    /// The task.
    pub task_id: TaskId,
    /// `paused` or `resumed`.
    pub kind: String,
    /// When.
    pub at: Timestamp,
    /// Details, e.g. `{"fires_skipped": 3}` on a resume.
    pub detail: Option<serde_json::Value>,
}

/// A node that has run the engine on this database.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Its name in leases and attempts.
    pub id: String,
    /// Host name.
    pub host: String,
    /// agentcron version.
    pub version: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last start, claim or lease renewal.
    pub heartbeat_at: Timestamp,
    /// Its clock minus the database's, in milliseconds (0 on SQLite: one clock).
    pub skew_ms: i64,
}

/// Where a run (one nominal fire) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Waiting for a worker (or for `run_at`).
    Queued,
    /// An attempt is executing under a lease.
    Running,
    /// An attempt failed; the next waits for `run_at`.
    Retrying,
    /// Done, successfully.
    Succeeded,
    /// Done, failed after the last attempt.
    Failed,
    /// Done: the last attempt ran out of time.
    TimedOut,
    /// Done: cancelled by a user or by the overlap policy.
    Cancelled,
    /// Not executed: the overlap policy said so.
    Skipped,
    /// Not executed: later than the misfire grace.
    Missed,
}

impl RunStatus {
    /// The name stored and shown (`timed_out`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Retrying => "retrying",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Skipped => "skipped",
            RunStatus::Missed => "missed",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        ALL_STATUSES.iter().copied().find(|st| st.as_str() == s)
    }

    /// True once nothing more will happen to the run.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            RunStatus::Queued | RunStatus::Running | RunStatus::Retrying
        )
    }
}

const ALL_STATUSES: [RunStatus; 9] = [
    RunStatus::Queued,
    RunStatus::Running,
    RunStatus::Retrying,
    RunStatus::Succeeded,
    RunStatus::Failed,
    RunStatus::TimedOut,
    RunStatus::Cancelled,
    RunStatus::Skipped,
    RunStatus::Missed,
];

/// Why a run exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The schedule fired.
    Schedule,
    /// A user or agent triggered it.
    Manual,
    /// Its executor died; this is the retry.
    Recovery,
    /// An upstream task finished.
    Dependency,
    /// Requested for a past window.
    Backfill,
    /// A missed fire run late by the misfire policy.
    Catchup,
}

impl Trigger {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::Manual => "manual",
            Trigger::Recovery => "recovery",
            Trigger::Dependency => "dependency",
            Trigger::Backfill => "backfill",
            Trigger::Catchup => "catchup",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Trigger::Schedule,
            Trigger::Manual,
            Trigger::Recovery,
            Trigger::Dependency,
            Trigger::Backfill,
            Trigger::Catchup,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

impl TaskState {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Active => "active",
            TaskState::Paused => "paused",
            TaskState::Cancelled => "cancelled",
            TaskState::Completed => "completed",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            TaskState::Active,
            TaskState::Paused,
            TaskState::Cancelled,
            TaskState::Completed,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

/// One nominal fire of a task (or a stretch of consecutive missed fires).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Id; actions get it as the idempotency key.
    pub id: RunId,
    /// The task.
    pub task_id: TaskId,
    /// The nominal fire time (the first, for a missed stretch).
    pub scheduled_for: Timestamp,
    /// The last fire of a collapsed missed stretch.
    pub last_scheduled_for: Option<Timestamp>,
    /// How many nominal fires this row stands for.
    pub fire_count: i64,
    /// Where it stands.
    pub status: RunStatus,
    /// Why it exists.
    pub trigger: Trigger,
    /// Attempts started so far.
    pub attempt: i64,
    /// Attempts allowed.
    pub max_attempts: i64,
    /// When the next attempt may start.
    pub run_at: Timestamp,
    /// The node holding the lease.
    pub lease_owner: Option<String>,
    /// When that lease runs out.
    pub lease_expires_at: Option<Timestamp>,
    /// Bumped on every claim; a finishing write must name the current one.
    pub fence: i64,
    /// Start of the current or last attempt.
    pub started_at: Option<Timestamp>,
    /// End of the run.
    pub finished_at: Option<Timestamp>,
    /// The action's result (JSON).
    pub result: Option<serde_json::Value>,
    /// Why it failed, was skipped or missed.
    pub error: Option<String>,
    /// Captured output (capped).
    pub output: Option<String>,
    /// Payload override given with a manual trigger.
    pub payload: Option<serde_json::Value>,
}
