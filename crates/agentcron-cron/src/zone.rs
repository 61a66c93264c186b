//! Local wall times to instants: walks the time zone's offset segments and
//! applies the schedule's DST policy.
//!
//! A zone's timeline is a sequence of segments of constant UTC offset split
//! by transitions. Within a segment with offset `o` the instant `t` shows the
//! wall time `t + o`, so the first matching instant in a segment is the first
//! matching wall time in the segment's wall range. Walking segments in order
//! gives the exact answer for every kind of transition:
//!
//! * wildcard jobs (second, minute or hour field starts with `*`) fire at every
//!   real instant whose wall time matches: wall times inside a spring-forward
//!   gap do not exist, and in a fall-back fold both passes fire;
//! * fixed-time jobs follow the policy: `gap = shift` fires once at the
//!   transition instant when a matching wall time was skipped, `gap = skip`
//!   does not; `fold = once` fires only in the first pass, `fold = twice` in both.

use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};

use crate::civil::Civil;
use crate::fields::{Fields, MonthCache};
use crate::{DstPolicy, Fold, Gap};

/// Every UTC offset jiff allows is smaller in size than this (±25:59:59).
const MAX_OFFSET_SECONDS: i64 = 26 * 3600;

/// So a fold is shorter than this, and a transition further back than this
/// cannot hide a repeated wall time.
const MAX_FOLD_SECONDS: i64 = 2 * MAX_OFFSET_SECONDS;

/// The search state between two answers, kept by iterators.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    /// UTC offset (seconds) of the current segment.
    offset: i64,
    /// First instant (epoch seconds) of the next segment, `i64::MAX` if none.
    end: i64,
    /// The offset the next segment starts with (meaningless when `end` is `i64::MAX`).
    next_offset: i64,
    /// Wall times below this are second-pass fold repeats, suppressed by `fold = once`.
    floor: i64,
}

impl Segment {
    /// A segment with this offset, ending at `next` (a transition and the
    /// offset it starts) or never.
    fn until(offset: i64, next: Option<(i64, i64)>, floor: i64) -> Segment {
        let (end, next_offset) = next.unwrap_or((i64::MAX, offset));
        Segment {
            offset,
            end,
            next_offset,
            floor,
        }
    }

    /// The instant showing wall time `wall` in this segment, if it lies here
    /// and is not a suppressed second pass.
    #[inline]
    pub(crate) fn instant_of(&self, wall: i64) -> Option<i64> {
        let at = wall - self.offset;
        (at < self.end && wall >= self.floor).then_some(at)
    }
}

/// Memo of one wall-time search: no match in `[from, found)`.
pub(crate) struct Memo {
    pub(crate) from: i64,
    pub(crate) found: Option<(i64, Civil)>,
}

/// A fire found by [`ZoneSearch::next_after`]: its instant, and the wall time
/// that matched (absent for a fire shifted to the end of a DST gap).
pub(crate) struct Fire {
    pub(crate) at: i64,
    pub(crate) wall: Option<Civil>,
}

pub(crate) struct ZoneSearch<'a> {
    pub(crate) fields: &'a Fields,
    pub(crate) fixed: bool,
    pub(crate) policy: DstPolicy,
    pub(crate) tz: &'a TimeZone,
}

impl ZoneSearch<'_> {
    /// First matching wall time at or after `from` (wall seconds); `civil`,
    /// when given, is the same instant as a civil time and saves a conversion.
    fn find(
        &self,
        memo: &mut Option<Memo>,
        cache: &mut MonthCache,
        from: i64,
        civil: Option<Civil>,
    ) -> Option<(i64, Civil)> {
        if let Some(m) = memo
            && m.from <= from
            && m.found.is_none_or(|(f, _)| f >= from)
        {
            return m.found;
        }
        let civil = civil.unwrap_or_else(|| Civil::from_wall_seconds(from));
        let found = self
            .fields
            .next_match(civil, cache)
            .map(|(c, wall)| (wall, c));
        *memo = Some(Memo { from, found });
        found
    }

    /// The segment containing the instant `t + 1` as seen from the instant
    /// `t` whose offset is `offset`.
    pub(crate) fn segment_after(&self, t: i64, offset: i64) -> Segment {
        let mut floor = i64::MIN;
        if self.fixed && self.policy.fold == Fold::Once {
            // One lookup answers both questions in the common case: the first
            // transition after `t + 1 - MAX_FOLD` lies beyond `t`, so no recent
            // fall-back can hide a second pass, and it is the segment's end.
            let window = next_transition(self.tz, t + 1 - MAX_FOLD_SECONDS);
            match window {
                Some((at, _)) if at <= t => {
                    if let Some((at, after)) = previous_transition(self.tz, t + 1) {
                        let before = offset_at(self.tz, at - 1);
                        if before > after {
                            floor = at + before;
                        }
                    }
                }
                _ => return Segment::until(offset, window, floor),
            }
        }
        Segment::until(offset, next_transition(self.tz, t), floor)
    }

    /// An instant `J > at` such that nothing fires in `[at, J)`, if the
    /// next match is far enough away for one to exist.
    ///
    /// Offsets stay below `MAX_OFFSET_SECONDS` in size, so every instant from
    /// `at` on shows a wall time of at least `at - MAX`. Let `W` be the first
    /// match at or after that wall time. An instant `t < W - MAX` shows a wall
    /// time in `[at - MAX, W)`, which holds no match; and a gap-shifted fire at
    /// a transition `T < W - MAX` would need a match among the skipped wall
    /// times `[T + before, T + after)`, also inside `[at - MAX, W)`. So
    /// `J = W - MAX` is safe.
    fn jump_target(&self, memo: &mut Option<Memo>, cache: &mut MonthCache, at: i64) -> Option<i64> {
        let (wall, _) = self.find(memo, cache, at - MAX_OFFSET_SECONDS, None)?;
        let target = wall - MAX_OFFSET_SECONDS;
        (target > at).then_some(target)
    }

    /// The first firing instant strictly after the instant `t` (epoch
    /// seconds), given the segment that `t + 1` lies in.
    ///
    /// `first`, when given, is the wall time of `t + 1` as a civil time
    /// (possibly with second = 60: the search carries it); `known`, a search
    /// the caller already made.
    pub(crate) fn next_after(
        &self,
        t: i64,
        seg: &mut Segment,
        first: Option<Civil>,
        cache: &mut MonthCache,
        known: Option<Memo>,
    ) -> Option<Fire> {
        let mut memo = known;
        let mut start = t + 1;
        let mut civil = first;
        loop {
            let wall = start + seg.offset;
            let (wall_from, civil_from) = if wall >= seg.floor {
                (wall, civil.take())
            } else {
                (seg.floor, None)
            };
            let found = self.find(&mut memo, cache, wall_from, civil_from);
            if let Some((wall, civil)) = found
                && wall - seg.offset < seg.end
            {
                return Some(Fire {
                    at: wall - seg.offset,
                    wall: Some(civil),
                });
            }
            if seg.end == i64::MAX {
                return None;
            }
            let at = seg.end;
            let new_offset = seg.next_offset;
            if found.is_none()
                && self
                    .find(&mut memo, cache, at - MAX_OFFSET_SECONDS, None)
                    .is_none()
            {
                // No instant from `at` on shows a wall time below `at - MAX`,
                // and no wall time from there on matches: the schedule is over.
                return None;
            }
            // A match far beyond this segment: jump instead of walking every
            // transition in between (see `jump_target`).
            if let Some((wall, _)) = found
                && wall - at > 3 * MAX_OFFSET_SECONDS
                && let Some(target) = self.jump_target(&mut memo, cache, at)
            {
                *seg = self.segment_after(target - 1, offset_at(self.tz, target - 1));
                start = target;
                continue;
            }
            let old_offset = seg.offset;
            *seg = Segment::until(new_offset, next_transition(self.tz, at), i64::MIN);
            if new_offset > old_offset {
                // Spring forward: wall times [at + old, at + new) never happen.
                if self.fixed
                    && self.policy.gap == Gap::Shift
                    && let Some((wall, _)) = self.find(&mut memo, cache, at + old_offset, None)
                    && wall < at + new_offset
                {
                    return Some(Fire { at, wall: None });
                }
            } else if new_offset < old_offset && self.fixed && self.policy.fold == Fold::Once {
                // Fall back: wall times [at + new, at + old) happen a second time.
                seg.floor = at + old_offset;
            }
            start = at;
        }
    }
}

pub(crate) fn offset_at(tz: &TimeZone, t: i64) -> i64 {
    match Timestamp::from_second(t) {
        Ok(ts) => i64::from(tz.to_offset(ts).seconds()),
        Err(_) => 0,
    }
}

/// The first transition strictly after `t`: its instant and the offset it starts.
fn next_transition(tz: &TimeZone, t: i64) -> Option<(i64, i64)> {
    let ts = Timestamp::from_second(t).ok()?;
    let tr = tz.following(ts).next()?;
    Some((tr.timestamp().as_second(), i64::from(tr.offset().seconds())))
}

/// The last transition strictly before `t`: its instant and the offset it starts.
fn previous_transition(tz: &TimeZone, t: i64) -> Option<(i64, i64)> {
    let ts = Timestamp::from_second(t).ok()?;
    let tr = tz.preceding(ts).next()?;
    Some((tr.timestamp().as_second(), i64::from(tr.offset().seconds())))
}

/// Whole epoch seconds at or below the instant.
pub(crate) fn floor_second(zdt: &ZonedDateTime) -> i64 {
    let ts = zdt.timestamp();
    let s = ts.as_second();
    if ts.subsec_nanosecond() < 0 { s - 1 } else { s }
}

pub(crate) fn to_zoned(t: i64, tz: &TimeZone) -> Option<ZonedDateTime> {
    Timestamp::from_second(t)
        .ok()
        .map(|ts| ts.to_zoned_datetime(tz.clone()))
}

/// The wall time one second after `zdt`'s floored second, as a civil time.
/// The second may read 60; the search carries it into the minute.
pub(crate) fn civil_after(zdt: &ZonedDateTime) -> Civil {
    // Civil times are floored already: 1969-12-31T23:59:59.5 shows second 59.
    let dt = zdt.datetime();
    let second = dt.second() as u32 + 1;
    Civil {
        year: i32::from(dt.year()),
        month: dt.month() as u32,
        day: dt.day() as u32,
        hour: dt.hour() as u32,
        minute: dt.minute() as u32,
        second,
    }
}
