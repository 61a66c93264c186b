//! The agentcron cron dialect: parse an expression once, then ask for the
//! next fire time in any time zone, fast and correct across DST.
//!
//! # Layout
//! - [`Schedule`] (this file): the public face — [`Schedule::parse`],
//!   [`Schedule::next_after`], [`Schedule::iter_after`], [`Schedule::describe`],
//!   and [`ScheduleBuilder`] for the hash key, the [`DstPolicy`] and the
//!   `@every` anchor.
//! - `parse`: text to syntax tree — fields, lists, ranges, steps, names,
//!   `L`/`W`/`#`, `H` hashing, `@` macros; errors name field and column
//!   ([`ParseError`], [`Field`] in `error`).
//! - `fields`: the syntax tree compiled to one bitmask per field, and the
//!   search for the next matching local wall time (no time zones).
//! - `civil`: integer calendar arithmetic used by that search.
//! - `zone`: wall times to instants — walks the zone's offset segments and
//!   applies the DST policy.
//! - `describe`: English and Chinese descriptions.
//!
//! # Dialect
//! 5 fields (`min hour dom month dow`), 6 (seconds first) or 7 (… year).
//! `*`, `?`, lists, ranges, steps (`*/15`, `1-30/5`, `5/15`), month and
//! weekday names, `L`, `L-3`, `LW`, `15W`, `5L`, `FRI#2`, `H`, `H/15`,
//! `H(0-29)/10`, `@yearly` … `@hourly`, `@every 1h30m`. Day-of-month and
//! day-of-week combine as in Vixie cron: when either field starts with `*`
//! (or `?`) a day must match both, otherwise either.
//!
//! ```
//! use agentcron_cron::Schedule;
//! let s = Schedule::parse("0 9 * * 1-5")?;
//! let start: jiff::ZonedDateTime = "2026-11-27T10:00:00[Asia/Shanghai]".parse()?;
//! let next = s.next_after(&start).expect("fires again");
//! assert_eq!(next.to_string(), "2026-11-30T09:00:00+08:00[Asia/Shanghai]");
//! assert_eq!(s.describe(agentcron_cron::Lang::En), "At 09:00, Monday through Friday");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod civil;
mod describe;
mod error;
mod fields;
mod parse;
mod zone;

use std::fmt;
use std::str::FromStr;

use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};

pub use describe::Lang;
pub use error::{Field, ParseError};

use civil::Civil;
use fields::{Fields, MonthCache};
use parse::{CronExpr, Expr};
use zone::{Segment, ZoneSearch};

/// What a fixed-time job does when its local time falls in a spring-forward gap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Gap {
    /// Fire once, at the first instant after the gap (cron(8)'s behaviour).
    #[default]
    Shift,
    /// Do not fire that day.
    Skip,
}

/// What a fixed-time job does when its local time occurs twice in a fall-back fold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fold {
    /// Fire at the first occurrence only (cron(8)'s behaviour).
    #[default]
    Once,
    /// Fire at both occurrences.
    Twice,
}

/// The DST policy of one schedule. It applies to fixed-time jobs — those whose
/// second, minute and hour fields all avoid a leading `*`. Jobs with a leading
/// `*` in any of them fire at every real instant whose wall time matches, never
/// twice at the same instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DstPolicy {
    /// Spring-forward behaviour.
    pub gap: Gap,
    /// Fall-back behaviour.
    pub fold: Fold,
}

impl FromStr for Gap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "shift" => Ok(Gap::Shift),
            "skip" => Ok(Gap::Skip),
            _ => Err(format!(
                "unknown DST gap policy `{s}` (expected shift or skip)"
            )),
        }
    }
}

impl FromStr for Fold {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "once" => Ok(Fold::Once),
            "twice" => Ok(Fold::Twice),
            _ => Err(format!(
                "unknown DST fold policy `{s}` (expected once or twice)"
            )),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Cron {
        expr: Box<CronExpr>,
        fields: Fields,
        fixed: bool,
    },
    Every {
        seconds: i64,
        anchor: Timestamp,
    },
}

/// A parsed schedule: a cron expression or `@every` interval, with its DST policy.
///
/// Parse once, query many times; a `Schedule` is immutable, cheap to share and
/// `Send + Sync`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    source: String,
    kind: Kind,
    dst: DstPolicy,
}

/// Options for [`Schedule`]: the `H` hash key, the DST policy and the `@every` anchor.
///
/// ```
/// use agentcron_cron::{Gap, Schedule};
/// let s = Schedule::builder()
///     .hash_key("0193a4f2-task-id")
///     .dst_gap(Gap::Skip)
///     .parse("H 9 * * *")?;
/// assert!(s.expression().starts_with('H'));
/// # Ok::<(), agentcron_cron::ParseError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ScheduleBuilder {
    hash_key: Option<String>,
    dst: DstPolicy,
    anchor: Option<Timestamp>,
}

impl ScheduleBuilder {
    /// The key `H` fields hash to pick their value (agentcron uses the task id).
    pub fn hash_key(mut self, key: impl Into<String>) -> Self {
        self.hash_key = Some(key.into());
        self
    }

    /// The whole DST policy.
    pub fn dst(mut self, policy: DstPolicy) -> Self {
        self.dst = policy;
        self
    }

    /// Spring-forward behaviour of fixed-time jobs.
    pub fn dst_gap(mut self, gap: Gap) -> Self {
        self.dst.gap = gap;
        self
    }

    /// Fall-back behaviour of fixed-time jobs.
    pub fn dst_fold(mut self, fold: Fold) -> Self {
        self.dst.fold = fold;
        self
    }

    /// The instant `@every` intervals count from (default: the Unix epoch).
    pub fn anchor(mut self, anchor: Timestamp) -> Self {
        self.anchor = Some(anchor);
        self
    }

    /// Parses the expression with these options.
    pub fn parse(self, expression: &str) -> Result<Schedule, ParseError> {
        let kind = match parse::parse(expression, self.hash_key.as_deref())? {
            Expr::Every { seconds } => Kind::Every {
                seconds,
                anchor: self.anchor.unwrap_or(Timestamp::UNIX_EPOCH),
            },
            Expr::Cron(expr) => {
                let fields = Fields::compile(&expr);
                if fields
                    .next_match(Civil::from_wall_seconds(0), &mut MonthCache::default())
                    .is_none()
                {
                    return Err(parse::never_fires(&expr));
                }
                let fixed = !(expr.second.star || expr.minute.star || expr.hour.star);
                Kind::Cron {
                    expr,
                    fields,
                    fixed,
                }
            }
        };
        Ok(Schedule {
            source: expression.trim().to_string(),
            kind,
            dst: self.dst,
        })
    }
}

impl Schedule {
    /// Parses an expression with default options (no hash key, default DST
    /// policy, `@every` anchored at the Unix epoch).
    pub fn parse(expression: &str) -> Result<Schedule, ParseError> {
        ScheduleBuilder::default().parse(expression)
    }

    /// Options for parsing: hash key, DST policy, `@every` anchor.
    pub fn builder() -> ScheduleBuilder {
        ScheduleBuilder::default()
    }

    /// The expression as given (trimmed).
    pub fn expression(&self) -> &str {
        &self.source
    }

    /// The DST policy.
    pub fn dst_policy(&self) -> DstPolicy {
        self.dst
    }

    /// True for a fixed-time cron job (no leading `*` in the second, minute
    /// and hour fields): the DST policy applies to it.
    pub fn is_fixed_time(&self) -> bool {
        matches!(self.kind, Kind::Cron { fixed: true, .. })
    }

    /// The `@every` interval in seconds, for interval schedules.
    pub fn interval_seconds(&self) -> Option<i64> {
        match self.kind {
            Kind::Every { seconds, .. } => Some(seconds),
            Kind::Cron { .. } => None,
        }
    }

    /// The first fire time strictly after `start`, in `start`'s time zone;
    /// `None` when the schedule never fires again (year fields end, or year
    /// 9999 is passed).
    pub fn next_after(&self, start: &ZonedDateTime) -> Option<ZonedDateTime> {
        match &self.kind {
            Kind::Every { seconds, anchor } => every_next(*seconds, *anchor, start.timestamp())
                .map(|ts| ts.to_zoned_datetime(start.time_zone().clone())),
            Kind::Cron { fields, fixed, .. } => {
                let search = ZoneSearch {
                    fields,
                    fixed: *fixed,
                    policy: self.dst,
                    tz: start.time_zone(),
                };
                let t = zone::floor_second(start);
                let seg_offset = i64::from(start.offset().seconds());
                let mut seg = search.segment_after(t, seg_offset);
                let mut months = MonthCache::default();
                let from = zone::civil_after(start);
                // Fast path: the first match lies in the start's segment.
                let found = fields
                    .next_match(from, &mut months)
                    .map(|(civil, wall)| (wall, civil));
                let at = match found.and_then(|(wall, _)| seg.instant_of(wall)) {
                    Some(at) => at,
                    None => {
                        let known = zone::Memo {
                            from: t + 1 + seg_offset,
                            found,
                        };
                        search
                            .next_after(t, &mut seg, None, &mut months, Some(known))?
                            .at
                    }
                };
                zone::to_zoned(at, start.time_zone())
            }
        }
    }

    /// The fire times strictly after `start`, in increasing order, in
    /// `start`'s time zone.
    pub fn iter_after(&self, start: &ZonedDateTime) -> Iter<'_> {
        Iter {
            cursor: Cursor::new(self, start),
        }
    }

    /// The fire instants strictly after `start` (whose zone decides the wall
    /// times), in increasing order. Cheaper per step than [`Schedule::iter_after`]:
    /// it never builds a [`ZonedDateTime`].
    pub fn timestamps_after(&self, start: &ZonedDateTime) -> Timestamps<'_> {
        Timestamps {
            cursor: Cursor::new(self, start),
        }
    }

    /// Does the schedule fire at this instant? For cron schedules this is the
    /// wall-time match only (the DST policy is not consulted); sub-second
    /// instants never match.
    pub fn matches(&self, at: &ZonedDateTime) -> bool {
        match &self.kind {
            Kind::Every { seconds, anchor } => {
                let d = at.timestamp().as_nanosecond() - anchor.as_nanosecond();
                d.rem_euclid(i128::from(*seconds) * 1_000_000_000) == 0
            }
            Kind::Cron { fields, .. } => {
                at.timestamp().subsec_nanosecond() == 0 && {
                    let dt = at.datetime();
                    fields.matches(Civil {
                        year: i32::from(dt.year()),
                        month: dt.month() as u32,
                        day: dt.day() as u32,
                        hour: dt.hour() as u32,
                        minute: dt.minute() as u32,
                        second: dt.second() as u32,
                    })
                }
            }
        }
    }

    /// A one-line description in English or Chinese:
    /// "At 09:00, Monday through Friday" / "周一至周五 09:00".
    pub fn describe(&self, lang: Lang) -> String {
        match &self.kind {
            Kind::Every { seconds, .. } => describe::every(*seconds, lang),
            Kind::Cron { expr, .. } => describe::cron(expr, lang),
        }
    }
}

fn every_next(seconds: i64, anchor: Timestamp, start: Timestamp) -> Option<Timestamp> {
    let step = i128::from(seconds) * 1_000_000_000;
    let a = anchor.as_nanosecond();
    let k = (start.as_nanosecond() - a).div_euclid(step) + 1;
    Timestamp::from_nanosecond(a + k * step).ok()
}

impl FromStr for Schedule {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        Schedule::parse(s)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Iteration state shared by [`Iter`] and [`Timestamps`]: the last fire, the
/// wall time it matched and the offset segment it lies in, so that a step
/// costs one bitmask search.
#[derive(Debug)]
struct Cursor<'a> {
    schedule: &'a Schedule,
    /// Last fire (or the start), floored to whole seconds.
    t: i64,
    /// Last fire (or the start), exact; used by `@every`.
    exact: Timestamp,
    /// Wall time one second after the last fire, when known.
    wall_after: Option<Civil>,
    seg: Option<Segment>,
    months: MonthCache,
    offset: i64,
    tz: TimeZone,
    done: bool,
}

impl<'a> Cursor<'a> {
    fn new(schedule: &'a Schedule, start: &ZonedDateTime) -> Self {
        Cursor {
            schedule,
            t: zone::floor_second(start),
            exact: start.timestamp(),
            wall_after: Some(zone::civil_after(start)),
            seg: None,
            months: MonthCache::default(),
            offset: i64::from(start.offset().seconds()),
            tz: start.time_zone().clone(),
            done: false,
        }
    }

    fn advance(&mut self) -> Option<Timestamp> {
        if self.done {
            return None;
        }
        let next = match &self.schedule.kind {
            Kind::Every { seconds, anchor } => every_next(*seconds, *anchor, self.exact),
            Kind::Cron { fields, fixed, .. } => {
                if let (Some(seg), Some(from)) = (&self.seg, self.wall_after) {
                    // Fast path: the next match lies in the current segment.
                    if let Some((civil, wall)) = fields.next_match(from, &mut self.months)
                        && let Some(at) = seg.instant_of(wall)
                    {
                        return self.fired(at, Some(civil));
                    }
                }
                let search = ZoneSearch {
                    fields,
                    fixed: *fixed,
                    policy: self.schedule.dst,
                    tz: &self.tz,
                };
                let seg = self
                    .seg
                    .get_or_insert_with(|| search.segment_after(self.t, self.offset));
                match search.next_after(self.t, seg, self.wall_after.take(), &mut self.months, None)
                {
                    Some(fire) => return self.fired(fire.at, fire.wall),
                    None => None,
                }
            }
        };
        match next {
            Some(ts) => self.exact = ts,
            None => self.done = true,
        }
        next
    }

    /// Records a cron fire at epoch second `at` that matched wall time `wall`.
    fn fired(&mut self, at: i64, wall: Option<Civil>) -> Option<Timestamp> {
        let Ok(ts) = Timestamp::from_second(at) else {
            self.done = true;
            return None;
        };
        self.t = at;
        self.exact = ts;
        self.wall_after = wall.map(|c| Civil {
            second: c.second + 1,
            ..c
        });
        Some(ts)
    }
}

/// Fire times after a start instant, from [`Schedule::iter_after`].
#[derive(Debug)]
pub struct Iter<'a> {
    cursor: Cursor<'a>,
}

impl Iterator for Iter<'_> {
    type Item = ZonedDateTime;

    fn next(&mut self) -> Option<ZonedDateTime> {
        let ts = self.cursor.advance()?;
        Some(ts.to_zoned_datetime(self.cursor.tz.clone()))
    }
}

/// Fire instants after a start instant, from [`Schedule::timestamps_after`].
#[derive(Debug)]
pub struct Timestamps<'a> {
    cursor: Cursor<'a>,
}

impl Iterator for Timestamps<'_> {
    type Item = Timestamp;

    fn next(&mut self) -> Option<Timestamp> {
        self.cursor.advance()
    }
}
