//! A task's schedule compiled for the planner: parse once, then ask for the
//! next nominal fire after any instant.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::model::ScheduleSpec;
use crate::validate::{ValidationError, fail};

/// A schedule ready to answer "when next?".
#[derive(Clone, Debug)]
pub struct CompiledSchedule {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Cron {
        schedule: agentcron_cron::Schedule,
        tz: TimeZone,
    },
    Every {
        millis: i64,
        anchor: Timestamp,
    },
    Once(Timestamp),
    Manual,
}

impl CompiledSchedule {
    /// Compiles a schedule; `hash_key` feeds cron `H` fields (the task id).
    pub fn compile(spec: &ScheduleSpec, hash_key: &str) -> Result<Self, ValidationError> {
        let kind = match spec {
            ScheduleSpec::Cron {
                expr,
                timezone,
                dst,
            } => {
                let tz = TimeZone::get(timezone).or_else(|e| {
                    fail(
                        "schedule.timezone",
                        format!("unknown time zone `{timezone}` ({e})"),
                    )
                })?;
                let schedule = agentcron_cron::Schedule::builder()
                    .hash_key(hash_key)
                    .dst(*dst)
                    .parse(expr)
                    .or_else(|e| fail(spec.field(), e.to_string()))?;
                Kind::Cron { schedule, tz }
            }
            ScheduleSpec::Every { interval, anchor } => {
                if interval.as_millis() < 1000 {
                    return fail(spec.field(), "must be at least 1s");
                }
                Kind::Every {
                    millis: i64::try_from(interval.as_millis())
                        .or_else(|_| fail(spec.field(), "too large"))?,
                    anchor: anchor.unwrap_or(Timestamp::UNIX_EPOCH),
                }
            }
            ScheduleSpec::Once { at } => Kind::Once(*at),
            ScheduleSpec::Manual => Kind::Manual,
        };
        Ok(CompiledSchedule { kind })
    }

    /// The first nominal fire strictly after `after`, if any.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            Kind::Cron { schedule, tz } => schedule
                .timestamps_after(&after.to_zoned_datetime(tz.clone()))
                .next(),
            Kind::Every { millis, anchor } => {
                let step = i128::from(*millis) * 1_000_000;
                let a = anchor.as_nanosecond();
                let k = (after.as_nanosecond() - a).div_euclid(step) + 1;
                Timestamp::from_nanosecond(a + k * step).ok()
            }
            Kind::Once(at) => (*at > after).then_some(*at),
            Kind::Manual => None,
        }
    }
}
