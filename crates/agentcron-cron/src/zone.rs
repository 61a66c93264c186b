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

use crate::fields::Fields;
use crate::{DstPolicy, Fold, Gap};

/// Offsets never exceed ±25:59:59 in jiff, so a fold is shorter than this and
/// a transition further back than this cannot hide a repeated wall time.
const MAX_FOLD_SECONDS: i64 = 2 * 26 * 3600;

/// The search state between two answers, kept by iterators.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    /// UTC offset (seconds) of the current segment.
    offset: i64,
    /// First instant (epoch seconds) of the next segment, `i64::MAX` if none.
    end: i64,
    /// Wall times below this are second-pass fold repeats, suppressed by `fold = once`.
    floor: i64,
}

/// Memo of one wall-time search: no match in `[from, found)`.
struct Memo {
    from: i64,
    found: Option<i64>,
}

pub(crate) struct ZoneSearch<'a> {
    pub(crate) fields: &'a Fields,
    pub(crate) fixed: bool,
    pub(crate) policy: DstPolicy,
    pub(crate) tz: &'a TimeZone,
}

impl ZoneSearch<'_> {
    fn find(&self, memo: &mut Option<Memo>, from: i64) -> Option<i64> {
        if let Some(m) = memo {
            if m.from <= from && m.found.is_none_or(|f| f >= from) {
                return m.found;
            }
        }
        let found = self.fields.next_match_wall(from);
        *memo = Some(Memo { from, found });
        found
    }

    /// The segment containing the instant `t + 1` as seen from the instant
    /// `t` whose offset is `offset`.
    pub(crate) fn segment_after(&self, t: i64, offset: i64) -> Segment {
        let end = next_transition(self.tz, t).map_or(i64::MAX, |(at, _)| at);
        let mut floor = i64::MIN;
        if self.fixed && self.policy.fold == Fold::Once {
            if let Some((at, after)) = previous_transition(self.tz, t + 1) {
                // Only a recent fall-back can leave us inside a second pass.
                if t + 1 - at < MAX_FOLD_SECONDS {
                    let before = offset_at(self.tz, at - 1);
                    if before > after {
                        floor = at + before;
                    }
                }
            }
        }
        Segment { offset, end, floor }
    }

    /// The first firing instant strictly after the instant `t` (epoch
    /// seconds), given the segment that `t + 1` lies in.
    pub(crate) fn next_after(&self, t: i64, seg: &mut Segment) -> Option<i64> {
        let mut memo = None;
        let mut start = t + 1;
        loop {
            let wall_from = (start + seg.offset).max(seg.floor);
            let found = self.find(&mut memo, wall_from);
            if let Some(wall) = found {
                if wall - seg.offset < seg.end {
                    return Some(wall - seg.offset);
                }
            }
            if seg.end == i64::MAX {
                return None;
            }
            let at = seg.end;
            let new_offset = offset_at(self.tz, at);
            if found.is_none() && new_offset >= seg.offset {
                // No wall time matches from here on, and wall time never goes back.
                return None;
            }
            let old_offset = seg.offset;
            let end = next_transition(self.tz, at).map_or(i64::MAX, |(next, _)| next);
            *seg = Segment {
                offset: new_offset,
                end,
                floor: i64::MIN,
            };
            if new_offset > old_offset {
                // Spring forward: wall times [at + old, at + new) never happen.
                if self.fixed && self.policy.gap == Gap::Shift {
                    if let Some(wall) = self.find(&mut memo, at + old_offset) {
                        if wall < at + new_offset {
                            return Some(at);
                        }
                    }
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
