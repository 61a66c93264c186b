//! Task definitions are checked on the way in; every error names the field.

use crate::model::{ActionSpec, ScheduleSpec, TaskSpec};
use crate::schedule::CompiledSchedule;

/// A rejected task definition: which field (a dotted path such as
/// `schedule.cron` or `retry.max_attempts`) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// Dotted path of the field at fault.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// An `Err` naming `field`.
pub(crate) fn fail<T>(field: &str, message: impl Into<String>) -> Result<T, ValidationError> {
    Err(ValidationError {
        field: field.to_string(),
        message: message.into(),
    })
}

const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

impl TaskSpec {
    /// Checks every field; on success, the schedule compiled with `hash_key`
    /// (the task id, for `H` fields).
    pub fn validate(&self, hash_key: &str) -> Result<CompiledSchedule, ValidationError> {
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if self.name.is_empty() || self.name.len() > 128 || !self.name.chars().all(name_ok) {
            return fail(
                "name",
                "must be 1-128 characters of letters, digits, `-`, `_` and `.`",
            );
        }
        if self.description.len() > 4096 {
            return fail("description", "at most 4096 bytes");
        }
        for (key, value) in &self.labels {
            if key.is_empty() || key.len() > 63 {
                return fail("labels", format!("label key `{key}` must be 1-63 bytes"));
            }
            if value.len() > 256 {
                return fail(&format!("labels.{key}"), "at most 256 bytes");
            }
        }
        self.validate_action()?;
        let retry = &self.retry;
        if !(1..=100).contains(&retry.max_attempts) {
            return fail("retry.max_attempts", "must be 1-100 (1 means no retry)");
        }
        let backoff = &retry.backoff;
        if !(backoff.multiplier.is_finite() && (1.0..=10.0).contains(&backoff.multiplier)) {
            return fail("retry.backoff.multiplier", "must be between 1 and 10");
        }
        if !(0.0..=1.0).contains(&backoff.jitter) {
            return fail("retry.backoff.jitter", "must be between 0 and 1");
        }
        if backoff.initial > backoff.max {
            return fail("retry.backoff.initial", "must not exceed retry.backoff.max");
        }
        if self.timeout.is_some_and(|t| t.as_millis() == 0) {
            return fail("timeout", "must be positive (omit it for no limit)");
        }
        const DAY: u64 = 86_400_000;
        for (field, value, max_days) in [
            ("timeout", self.timeout.unwrap_or_default(), 30),
            ("retry.backoff.max", backoff.max, 30),
            ("misfire.grace", self.misfire.grace, 365),
        ] {
            if value.as_millis() > max_days * DAY {
                return fail(field, format!("at most {max_days}d"));
            }
        }
        if self.misfire.max_catchup > 1000 {
            return fail("misfire.max_catchup", "at most 1000");
        }
        CompiledSchedule::compile(&self.schedule, hash_key)
    }

    fn validate_action(&self) -> Result<(), ValidationError> {
        match &self.action {
            ActionSpec::Http { method, url, .. } => {
                if !METHODS.contains(&method.as_str()) {
                    return fail(
                        "action.method",
                        format!("`{method}` is not one of {}", METHODS.join(", ")),
                    );
                }
                let rest = url
                    .strip_prefix("http://")
                    .or_else(|| url.strip_prefix("https://"));
                match rest {
                    Some(r) if !r.is_empty() && !r.starts_with('/') => Ok(()),
                    _ => fail(
                        "action.url",
                        format!("`{url}` is not an http:// or https:// URL with a host"),
                    ),
                }
            }
            ActionSpec::Exec { command, .. } => match command.first() {
                Some(program) if !program.is_empty() => Ok(()),
                _ => fail(
                    "action.command",
                    "needs at least the program, e.g. [\"python3\", \"agent.py\"]",
                ),
            },
            ActionSpec::Handler { name, .. } if name.is_empty() => {
                fail("action.name", "the handler's registered name is empty")
            }
            ActionSpec::Handler { .. } => Ok(()),
        }
    }
}

impl ScheduleSpec {
    /// The field path for errors about this schedule's main value.
    pub(crate) fn field(&self) -> &'static str {
        match self {
            ScheduleSpec::Cron { .. } => "schedule.cron",
            ScheduleSpec::Every { .. } => "schedule.every",
            ScheduleSpec::Once { .. } => "schedule.once",
            ScheduleSpec::Manual => "schedule.manual",
        }
    }
}
