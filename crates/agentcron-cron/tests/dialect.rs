//! The dialect, case by case: what parses, what it means, and what is
//! rejected with which message.

use agentcron_cron::{Field, Schedule};
use jiff::ZonedDateTime;

fn utc(s: &str) -> ZonedDateTime {
    format!("{s}[UTC]").parse().expect("valid datetime")
}

/// The next `n` fire times after `start` (UTC), as `YYYY-MM-DDTHH:MM:SS`.
fn next(expr: &str, start: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    s.iter_after(&utc(start))
        .take(n)
        .map(|z| z.datetime().to_string())
        .collect()
}

fn err(expr: &str) -> String {
    match Schedule::parse(expr) {
        Ok(_) => panic!("{expr} should be rejected"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn five_six_and_seven_fields() {
    assert_eq!(
        next("*/15 * * * *", "2026-01-01T00:00:00", 2),
        ["2026-01-01T00:15:00", "2026-01-01T00:30:00"]
    );
    assert_eq!(
        next("*/20 * * * * *", "2026-01-01T00:00:00", 2),
        ["2026-01-01T00:00:20", "2026-01-01T00:00:40"]
    );
    assert_eq!(
        next("0 0 12 1 1 * 2030-2031", "2026-01-01T00:00:00", 3),
        ["2030-01-01T12:00:00", "2031-01-01T12:00:00"]
    );
    assert_eq!(
        next("0 0 0 1 1 * 9999", "2026-01-01T00:00:00", 1),
        ["9999-01-01T00:00:00"]
    );
    assert_eq!(err("* * * *"), "expected 5, 6 or 7 fields, found 4");
    assert_eq!(err("* * * * * * * *"), "expected 5, 6 or 7 fields, found 8");
}

#[test]
fn lists_ranges_steps_and_names() {
    assert_eq!(
        next("5/15 * * * *", "2026-01-01T00:00:00", 4),
        [
            "2026-01-01T00:05:00",
            "2026-01-01T00:20:00",
            "2026-01-01T00:35:00",
            "2026-01-01T00:50:00"
        ]
    );
    assert_eq!(
        next("1-30/10 0 * * *", "2026-01-01T00:00:00", 3),
        [
            "2026-01-01T00:01:00",
            "2026-01-01T00:11:00",
            "2026-01-01T00:21:00"
        ]
    );
    assert_eq!(
        next("0 0 1 jan,Jul *", "2026-02-01T00:00:00", 2),
        ["2026-07-01T00:00:00", "2027-01-01T00:00:00"]
    );
    // 2026-01-03 is a Saturday; 0 and 7 are both Sunday.
    assert_eq!(
        next("0 0 * * 0", "2026-01-01T00:00:00", 1),
        ["2026-01-04T00:00:00"]
    );
    assert_eq!(
        next("0 0 * * 7", "2026-01-01T00:00:00", 1),
        ["2026-01-04T00:00:00"]
    );
    assert_eq!(
        next("0 0 * * sat-sun", "2026-01-01T00:00:00", 2),
        ["2026-01-03T00:00:00", "2026-01-04T00:00:00"]
    );
    assert_eq!(
        next("0 0 * * FRI-SUN", "2026-01-01T00:00:00", 3),
        [
            "2026-01-02T00:00:00",
            "2026-01-03T00:00:00",
            "2026-01-04T00:00:00"
        ]
    );
    assert_eq!(
        next("0 0 ? * MON", "2026-01-01T00:00:00", 1),
        ["2026-01-05T00:00:00"]
    );
}

#[test]
fn last_nearest_and_nth_days() {
    assert_eq!(
        next("0 0 L * *", "2026-01-31T00:00:00", 3),
        [
            "2026-02-28T00:00:00",
            "2026-03-31T00:00:00",
            "2026-04-30T00:00:00"
        ]
    );
    assert_eq!(
        next("0 0 L-3 * *", "2026-02-01T00:00:00", 2),
        ["2026-02-25T00:00:00", "2026-03-28T00:00:00"]
    );
    // 2026-05-31 is a Sunday: the last weekday is Friday the 29th.
    assert_eq!(
        next("0 0 LW 5 *", "2026-01-01T00:00:00", 1),
        ["2026-05-29T00:00:00"]
    );
    // 2026-08-15 is a Saturday: nearest weekday Friday the 14th.
    assert_eq!(
        next("0 0 15W 8 *", "2026-01-01T00:00:00", 1),
        ["2026-08-14T00:00:00"]
    );
    // 2026-08-01 is a Saturday: 1W never leaves the month, so Monday the 3rd.
    assert_eq!(
        next("0 0 1W 8 *", "2026-01-01T00:00:00", 1),
        ["2026-08-03T00:00:00"]
    );
    // 2026-05-31 is a Sunday: 31W is Friday the 29th.
    assert_eq!(
        next("0 0 31W 5 *", "2026-01-01T00:00:00", 1),
        ["2026-05-29T00:00:00"]
    );
    assert_eq!(
        next("0 0 * * 5L", "2026-01-01T00:00:00", 2),
        ["2026-01-30T00:00:00", "2026-02-27T00:00:00"]
    );
    assert_eq!(
        next("0 0 * * FRIL", "2026-01-01T00:00:00", 1),
        ["2026-01-30T00:00:00"]
    );
    assert_eq!(
        next("0 0 * * FRI#2", "2026-01-01T00:00:00", 2),
        ["2026-01-09T00:00:00", "2026-02-13T00:00:00"]
    );
    // A fifth Monday exists only in some months.
    assert_eq!(
        next("0 0 * * 1#5", "2026-01-01T00:00:00", 2),
        ["2026-03-30T00:00:00", "2026-06-29T00:00:00"]
    );
}

#[test]
fn vixie_day_rule() {
    // Both restricted: either matches (the 13th, or any Friday).
    assert_eq!(
        next("0 0 13 * 5", "2026-02-01T00:00:00", 3),
        [
            "2026-02-06T00:00:00",
            "2026-02-13T00:00:00",
            "2026-02-20T00:00:00"
        ]
    );
    // Day-of-month starts with `*`: both must match (odd days that are Mondays).
    assert_eq!(
        next("0 0 */2 * 1", "2026-01-01T00:00:00", 2),
        ["2026-01-05T00:00:00", "2026-01-19T00:00:00"]
    );
    // `?` counts as `*`.
    assert_eq!(
        next("0 0 13 * ?", "2026-02-01T00:00:00", 1),
        ["2026-02-13T00:00:00"]
    );
}

#[test]
fn macros() {
    let same = |a: &str, b: &str| {
        assert_eq!(
            next(a, "2026-03-15T10:30:00", 3),
            next(b, "2026-03-15T10:30:00", 3),
            "{a} vs {b}"
        )
    };
    same("@yearly", "0 0 1 1 *");
    same("@annually", "0 0 1 1 *");
    same("@monthly", "0 0 1 * *");
    same("@weekly", "0 0 * * 0");
    same("@daily", "0 0 * * *");
    same("@midnight", "0 0 * * *");
    same("@hourly", "0 * * * *");
    assert!(err("@reboot").contains("not supported"));
    assert!(err("@fortnightly").starts_with("unknown macro `@fortnightly`"));
    assert_eq!(err("@daily 5"), "@daily takes no arguments (column 1)");
}

#[test]
fn every_is_epoch_aligned_unless_anchored() {
    assert_eq!(
        next("@every 90s", "2026-01-01T00:00:00", 2),
        ["2026-01-01T00:01:30", "2026-01-01T00:03:00"]
    );
    assert_eq!(
        next("@every 1h30m", "2026-01-01T00:00:00", 2),
        ["2026-01-01T01:30:00", "2026-01-01T03:00:00"]
    );
    // 2026-01-01T00:00Z is epoch second 1767225600 = 1178150.4 x 1500: the grid continues at 00:15.
    assert_eq!(
        next("@every 25m", "2026-01-01T00:00:00", 1),
        ["2026-01-01T00:15:00"]
    );
    let anchored = Schedule::builder()
        .anchor("2026-01-01T00:00:07Z".parse().expect("ts"))
        .parse("@every 25m")
        .expect("valid");
    let fires: Vec<String> = anchored
        .iter_after(&utc("2026-01-01T00:00:00"))
        .take(2)
        .map(|z| z.datetime().to_string())
        .collect();
    assert_eq!(fires, ["2026-01-01T00:00:07", "2026-01-01T00:25:07"]);
    assert_eq!(anchored.interval_seconds(), Some(1500));
    // Sub-second starts: strictly after, still on the grid.
    let s = Schedule::parse("@every 10s").expect("valid");
    let next = s
        .next_after(&"2026-01-01T00:00:10.5[UTC]".parse().expect("zdt"))
        .expect("fires");
    assert_eq!(next.datetime().to_string(), "2026-01-01T00:00:20");
    assert!(err("@every").contains("needs a duration"));
    assert_eq!(
        err("@every 10x"),
        "invalid duration `10x`: unexpected `x` (use units d, h, m, s as in `1h30m`) (column 8)"
    );
    assert!(err("@every 0s").contains("at least 1s"));
    assert!(err("@every 15").contains("needs a unit"));
}

#[test]
fn hash_spreads_tasks_and_is_stable() {
    assert!(err("H 9 * * *").starts_with("minute field: `H` needs a hash key"));
    let with_key = |key: &str, expr: &str| {
        Schedule::builder()
            .hash_key(key)
            .parse(expr)
            .expect("valid")
    };
    let minute_of = |s: &Schedule| {
        s.next_after(&utc("2026-01-01T00:00:00"))
            .expect("fires")
            .minute()
    };
    // Stable for one key, spread across keys.
    let a = with_key("task-a", "H 9 * * *");
    assert_eq!(minute_of(&a), minute_of(&with_key("task-a", "H 9 * * *")));
    let minutes: std::collections::BTreeSet<i8> = (0..200)
        .map(|i| minute_of(&with_key(&format!("task-{i}"), "H 9 * * *")))
        .collect();
    assert!(
        minutes.len() > 40,
        "only {} distinct minutes",
        minutes.len()
    );
    // The value is pinned across releases: changing the hash would move every H task.
    assert_eq!(
        minute_of(&with_key(
            "0193a4f2-0000-7000-8000-000000000001",
            "H 9 * * *"
        )),
        PINNED_MINUTE
    );
    // H/15 fires every 15 minutes from an offset below 15; H(0-29)/10 stays in 0-29.
    for i in 0..50 {
        let s = with_key(&format!("k{i}"), "H/15 * * * *");
        let fires: Vec<i8> = s
            .iter_after(&utc("2026-01-01T00:00:00"))
            .take(4)
            .map(|z| z.minute())
            .collect();
        let distinct: std::collections::BTreeSet<i8> = fires.iter().copied().collect();
        assert!(
            distinct.len() == 4 && fires.iter().all(|m| m % 15 == fires[0] % 15),
            "{fires:?}"
        );
        let s = with_key(&format!("k{i}"), "H(0-29)/10 * * * *");
        let fires: Vec<i8> = s
            .iter_after(&utc("2026-01-01T00:00:00"))
            .take(6)
            .map(|z| z.minute())
            .collect();
        assert!(
            fires.iter().all(|m| *m < 30) && fires[1] - fires[0] == 10,
            "{fires:?}"
        );
        let s = with_key(&format!("k{i}"), "0 0 H * *");
        let day = s
            .next_after(&utc("2026-01-01T00:00:00"))
            .expect("fires")
            .day();
        assert!(
            (1..=28).contains(&day),
            "H in day-of-month stays in 1-28, got {day}"
        );
    }
    let year = Schedule::builder()
        .hash_key("k")
        .parse("0 0 0 1 1 * H")
        .unwrap_err();
    assert_eq!(
        year.to_string(),
        "year field: `H` is not supported in the year field (column 13)"
    );
}

/// The minute `H 9 * * *` picks for the pinned key (see the test above).
const PINNED_MINUTE: i8 = 30;

#[test]
fn errors_name_field_reason_and_column() {
    assert_eq!(
        err("0 25 * * *"),
        "hour field: 25 is out of range 0-23 (column 3)"
    );
    assert_eq!(
        err("0 0 32 * *"),
        "day-of-month field: 32 is out of range 1-31 (column 5)"
    );
    assert_eq!(
        err("0 0 * 13 *"),
        "month field: 13 is out of range 1-12 (column 7)"
    );
    assert_eq!(
        err("0 0 * * 8"),
        "day-of-week field: 8 is out of range 0-7 (column 9)"
    );
    assert_eq!(
        err("0 0 * * FOO"),
        "day-of-week field: `FOO` is not a valid value (expected 0-7 or SUN-SAT) (column 9)"
    );
    assert_eq!(
        err("*/0 * * * *"),
        "minute field: step must be at least 1 (column 3)"
    );
    assert_eq!(
        err("0 10-5 * * *"),
        "hour field: range 10-5 runs backwards (start is greater than end) (column 3)"
    );
    assert_eq!(
        err("0,,5 * * * *"),
        "minute field: empty list element (column 3)"
    );
    assert_eq!(
        err("0 0 L * L"),
        "day-of-week field: `L` alone is ambiguous in day-of-week; write e.g. `5L` or `FRIL` for the last Friday (column 9)"
    );
    assert_eq!(
        err("0 L * * *"),
        "hour field: `L`, `W` and `#` are only allowed in day-of-month and day-of-week (column 3)"
    );
    assert_eq!(
        err("0 0 * * MON#6"),
        "day-of-week field: #6: the occurrence must be 1-5 (column 13)"
    );
    assert_eq!(
        err("? * * * *"),
        "minute field: `?` is only allowed in day-of-month and day-of-week (column 1)"
    );
    assert_eq!(
        err("0 0 0 1 1 * 1969"),
        "year field: 1969 is out of range 1970-9999 (column 13)"
    );
    assert_eq!(err(""), "the expression is empty");
    assert_eq!(
        err("0 9 * * * 2027"),
        "day-of-week field: 2027 is out of range 0-7; 6 fields start with seconds; a year needs 7 fields (sec min hour dom mon dow year) (column 11)"
    );
    let e = Schedule::parse("  0 25 * * *").unwrap_err();
    assert_eq!((e.field(), e.column()), (Some(Field::Hour), Some(5)));
}

#[test]
fn expressions_that_can_never_fire_are_rejected() {
    assert_eq!(
        err("0 0 30 2 *"),
        "the expression can never fire: February has at most 29 days"
    );
    assert_eq!(
        err("0 0 31 4,6 *"),
        "the expression can never fire: April, June have at most 30 days"
    );
    assert_eq!(
        err("0 0 0 29 2 * 2027"),
        "the expression can never fire: no date between 1970 and 9999 matches all its fields"
    );
    // Possible only in leap years, or through the other day field: accepted.
    assert!(Schedule::parse("0 0 29 2 *").is_ok());
    assert!(Schedule::parse("0 0 30 2 MON").is_ok());
}

#[test]
fn schedules_that_end_return_none() {
    let s = Schedule::parse("0 0 0 1 1 * 2030").expect("valid");
    assert_eq!(s.next_after(&utc("2030-06-01T00:00:00")), None);
    assert_eq!(s.iter_after(&utc("2029-06-01T00:00:00")).count(), 1);
    let s = Schedule::parse("0 0 1 1 *").expect("valid");
    assert_eq!(s.next_after(&utc("9999-06-01T00:00:00")), None);
}

#[test]
fn next_after_is_strict_and_sub_second_safe() {
    let s = Schedule::parse("* * * * * *").expect("valid");
    let at = s.next_after(&utc("2026-01-01T00:00:00")).expect("fires");
    assert_eq!(at.datetime().to_string(), "2026-01-01T00:00:01");
    let at = s
        .next_after(&utc("2026-01-01T00:00:00.999999999"))
        .expect("fires");
    assert_eq!(at.datetime().to_string(), "2026-01-01T00:00:01");
    // Before 1970, sub-second instants floor correctly.
    let at = s.next_after(&utc("1969-12-31T23:59:59.5")).expect("fires");
    assert_eq!(at.datetime().to_string(), "1970-01-01T00:00:00");
}
