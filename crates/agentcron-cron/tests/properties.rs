//! Property tests: for random expressions of the whole dialect and random
//! start instants, `next_after` is strictly later, matches, and nothing in
//! between matches (checked by brute force against a reference matcher that
//! shares no code with the engine); iterators strictly increase and agree
//! with chained `next_after`; and in a DST zone the fires equal a brute-force
//! scan that applies the documented policy instant by instant.

mod common;

use agentcron_cron::{DstPolicy, Fold, Gap, Schedule};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{Timestamp, ToSpan, ZonedDateTime};
use proptest::prelude::*;

fn zoned(secs: i64, nanos: i32, tz: &TimeZone) -> ZonedDateTime {
    Timestamp::new(secs, nanos)
        .expect("in range")
        .to_zoned_datetime(tz.clone())
}

/// The step the brute force may take: one second when a seconds field
/// exists, otherwise a minute (fires are on whole minutes).
fn step_of(e: &common::Expr) -> i64 {
    if e.second.is_some() { 1 } else { 60 }
}

/// First instant at or after `from` on the step grid.
fn align(from: i64, step: i64) -> i64 {
    from.div_euclid(step) * step + if from.rem_euclid(step) == 0 { 0 } else { step }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn next_after_is_the_first_match_in_utc(e in common::expr(), (secs, nanos) in common::instant()) {
        let text = e.render();
        let Ok(s) = Schedule::parse(&text) else {
            // Only "can never fire" may be rejected; make sure that is why.
            let err = Schedule::parse(&text).unwrap_err().to_string();
            prop_assert!(err.contains("never fire"), "{text}: {err}");
            return Ok(());
        };
        let tz = TimeZone::UTC;
        let start = zoned(secs, nanos, &tz);
        let step = step_of(&e);
        // Window the brute force scans: a day of seconds, or 40 days of minutes.
        let window = if step == 1 { 86_400 } else { 40 * 86_400 };
        let next = s.next_after(&start);
        if let Some(next) = &next {
            prop_assert!(next.timestamp() > start.timestamp(), "{text}: {next} not after {start}");
            prop_assert!(e.matches(next.datetime()), "{text}: {next} does not match");
            prop_assert!(s.matches(next));
        }
        let limit = next.as_ref().map_or(secs + window, |n| n.timestamp().as_second().min(secs + window));
        let mut t = align(secs + 1, step);
        while t < limit {
            let z = zoned(t, 0, &tz);
            prop_assert!(!e.matches(z.datetime()), "{text}: {z} matches but next_after({start}) = {next:?}");
            t += step;
        }
    }

    #[test]
    fn iterators_increase_and_agree(e in common::expr(), (secs, nanos) in common::instant(), zone in prop::sample::select(vec!["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"])) {
        let Ok(s) = Schedule::parse(&e.render()) else { return Ok(()) };
        let tz = TimeZone::get(zone).expect("zone");
        let start = zoned(secs, nanos, &tz);
        let fires: Vec<ZonedDateTime> = s.iter_after(&start).take(20).collect();
        let stamps: Vec<Timestamp> = s.timestamps_after(&start).take(20).collect();
        prop_assert_eq!(fires.iter().map(|z| z.timestamp()).collect::<Vec<_>>(), stamps);
        let mut prev = start.clone();
        for f in &fires {
            prop_assert!(f.timestamp() > prev.timestamp());
            prop_assert_eq!(Some(f.clone()), s.next_after(&prev));
            prev = f.clone();
        }
    }
}

/// The documented DST semantics, applied instant by instant: does the
/// schedule fire at instant `t` (epoch seconds) in `tz`?
fn fires_at(e: &common::Expr, policy: DstPolicy, tz: &TimeZone, t: i64) -> bool {
    let z = zoned(t, 0, tz);
    let wall = z.datetime();
    if e.matches(wall) {
        if !e.fixed() || policy.fold == Fold::Twice {
            return true;
        }
        // Fixed time, fold = once: not in the second pass of a fold.
        match tz.to_ambiguous_timestamp(wall).offset() {
            AmbiguousOffset::Fold { after, .. } if z.offset() == after => {}
            _ => return true,
        }
    }
    // Fixed time, gap = shift: a spring-forward transition at exactly `t`
    // whose skipped wall times include a match fires at `t`.
    if e.fixed() && policy.gap == Gap::Shift {
        let before = zoned(t - 1, 0, tz).offset();
        if before.seconds() < z.offset().seconds() {
            let gap_start = wall - (z.offset().seconds() - before.seconds()).seconds();
            let mut w = gap_start;
            while w < wall {
                if e.matches(w) {
                    return true;
                }
                w += 1.second();
            }
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Around real transitions, in zones with 1-hour and 30-minute shifts.
    #[test]
    fn dst_fires_equal_brute_force(
        e in prop_oneof![
            common::expr().prop_filter("minute resolution", |e| e.second.is_none() && e.year.is_none()),
            common::near_transition_expr(),
        ],
        zone_and_transition in prop::sample::select(vec![
            ("America/New_York", 1_772_953_200i64), // 2026-03-08 07:00Z spring forward
            ("America/New_York", 1_793_512_800),    // 2026-11-01 06:00Z fall back
            ("Europe/London", 1_774_746_000),       // 2026-03-29 01:00Z
            ("Europe/London", 1_792_890_000),       // 2026-10-25 01:00Z
            ("Australia/Lord_Howe", 1_775_316_600), // 2026-04-04 15:00Z fall back 30 min
            ("Australia/Lord_Howe", 1_791_041_400), // 2026-10-03 15:30Z spring forward 30 min
        ]),
        before in 0i64..(6 * 3600),
        gap in prop::sample::select(vec![Gap::Shift, Gap::Skip]),
        fold in prop::sample::select(vec![Fold::Once, Fold::Twice]),
    ) {
        let (zone, transition) = zone_and_transition;
        let policy = DstPolicy { gap, fold };
        let Ok(s) = Schedule::builder().dst(policy).parse(&e.render()) else { return Ok(()) };
        let tz = TimeZone::get(zone).expect("zone");
        let start = transition - before;
        // Brute force over the next 12 hours, minute by minute.
        let expected: Vec<i64> = (1..=(12 * 60))
            .map(|m| align(start + 1, 60) + (m - 1) * 60)
            .filter(|&t| fires_at(&e, policy, &tz, t))
            .collect();
        let end = start + 12 * 3600;
        let got: Vec<i64> = s
            .timestamps_after(&zoned(start, 0, &tz))
            .map(|t| t.as_second())
            .take_while(|&t| t <= end)
            .collect();
        prop_assert_eq!(got, expected, "{} in {} from {}", e.render(), zone, start);
    }
}

/// The first fire strictly after `start` by enumerating candidate wall times
/// day by day and resolving each with jiff's own gap/fold disambiguation —
/// an algorithm independent of the engine's segment walk — up to `days` days.
fn first_fire_by_wall_times(
    e: &common::Expr,
    policy: DstPolicy,
    tz: &TimeZone,
    start: i64,
    days: i64,
) -> Option<i64> {
    let hours: Vec<i8> = (0..24)
        .filter(|h| {
            e.hour
                .items
                .iter()
                .any(|i| matches!(i, common::Item::Range { start, .. } if *start == *h as u32))
        })
        .collect();
    let minutes: Vec<i8> = (0..60)
        .filter(|m| {
            e.minute
                .items
                .iter()
                .any(|i| matches!(i, common::Item::Range { start, .. } if *start == *m as u32))
        })
        .collect();
    let first_day = zoned(start, 0, tz).date().yesterday().expect("in range");
    let mut best: Option<i64> = None;
    for d in 0..days {
        let date = first_day + d.days();
        for &h in &hours {
            for &m in &minutes {
                let wall = date.at(h, m, 0, 0);
                if !e.matches(wall) {
                    continue;
                }
                let candidates: Vec<i64> = match tz.to_ambiguous_timestamp(wall).offset() {
                    AmbiguousOffset::Unambiguous { offset } => {
                        vec![offset.to_timestamp(wall).expect("ts").as_second()]
                    }
                    AmbiguousOffset::Fold { before, after } => {
                        let first = before.to_timestamp(wall).expect("ts").as_second();
                        let second = after.to_timestamp(wall).expect("ts").as_second();
                        if policy.fold == Fold::Once {
                            vec![first]
                        } else {
                            vec![first, second]
                        }
                    }
                    AmbiguousOffset::Gap { before, .. } if policy.gap == Gap::Shift => {
                        // The transition instant: the last one at or before this wall time read in the old offset.
                        let late = before.to_timestamp(wall).expect("ts");
                        let tr = tz
                            .preceding(late + 1.second())
                            .next()
                            .expect("a transition");
                        vec![tr.timestamp().as_second()]
                    }
                    AmbiguousOffset::Gap { .. } => vec![],
                };
                for c in candidates.into_iter().filter(|&c| c > start) {
                    best = Some(best.map_or(c, |b| b.min(c)));
                }
            }
        }
        // Candidates of later days are later than this day's by more than any fold.
        if let Some(b) = best
            && b < zoned(start, 0, tz).timestamp().as_second() + (d - 2) * 86_400
        {
            break;
        }
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Rare fixed-time schedules in DST zones, over years: exercises the
    /// search's long walks and jumps across many transitions.
    #[test]
    fn far_fires_equal_wall_time_enumeration(
        e in common::fixed_rare_expr(),
        zone in prop::sample::select(vec!["America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Apia", "America/Sao_Paulo"]),
        secs in 946_684_800i64..1_893_456_000, // 2000 to 2030
        gap in prop::sample::select(vec![Gap::Shift, Gap::Skip]),
        fold in prop::sample::select(vec![Fold::Once, Fold::Twice]),
    ) {
        let policy = DstPolicy { gap, fold };
        let Ok(s) = Schedule::builder().dst(policy).parse(&e.render()) else { return Ok(()) };
        let tz = TimeZone::get(zone).expect("zone");
        let days = 3 * 366;
        let expected = first_fire_by_wall_times(&e, policy, &tz, secs, days);
        let got = s.next_after(&zoned(secs, 0, &tz)).map(|z| z.timestamp().as_second());
        match expected {
            Some(x) => prop_assert_eq!(got, Some(x), "{} in {} from {}", e.render(), zone, secs),
            // Nothing within three years: the engine's answer, if any, lies beyond.
            None => prop_assert!(got.is_none_or(|g| g > secs + (days - 2) * 86_400), "{} in {} from {}: {:?}", e.render(), zone, secs, got),
        }
    }
}
