//! DST behaviour of the default policy (cron(8)'s) and its alternatives, on
//! real zones: America/New_York, Europe/London, Australia/Lord_Howe (a
//! 30-minute shift), and zones whose rules changed (Pacific/Apia skipped a
//! whole day in 2011; America/Sao_Paulo dropped DST in 2019).

use agentcron_cron::{DstPolicy, Fold, Gap, Schedule};
use jiff::ZonedDateTime;

fn zdt(s: &str) -> ZonedDateTime {
    s.parse().expect("valid zoned datetime")
}

/// The next `n` fire times after `start`, as RFC 3339 with offset.
fn fires(s: &Schedule, start: &str, n: usize) -> Vec<String> {
    let start = zdt(start);
    let iterated: Vec<String> = s
        .iter_after(&start)
        .take(n)
        .map(|z| z.timestamp().display_with_offset(z.offset()).to_string())
        .collect();
    // The stateless call chained must agree with the iterator, step by step.
    let mut chained = Vec::new();
    let mut cur = start.clone();
    for _ in 0..n {
        let Some(next) = s.next_after(&cur) else {
            break;
        };
        chained.push(
            next.timestamp()
                .display_with_offset(next.offset())
                .to_string(),
        );
        cur = next;
    }
    assert_eq!(
        iterated, chained,
        "iterator and next_after disagree for {s}"
    );
    let stamps: Vec<jiff::Timestamp> = s.timestamps_after(&start).take(n).collect();
    let from_iter: Vec<jiff::Timestamp> = s
        .iter_after(&start)
        .take(n)
        .map(|z| z.timestamp())
        .collect();
    assert_eq!(
        stamps, from_iter,
        "timestamps_after and iter_after disagree for {s}"
    );
    iterated
}

fn with(expr: &str, gap: Gap, fold: Fold) -> Schedule {
    Schedule::builder()
        .dst(DstPolicy { gap, fold })
        .parse(expr)
        .expect("valid expression")
}

fn default(expr: &str) -> Schedule {
    Schedule::parse(expr).expect("valid expression")
}

#[test]
fn new_york_spring_forward_fixed_time_shifts_to_end_of_gap() {
    assert_eq!(
        fires(
            &default("30 2 * * *"),
            "2026-03-07T00:00[America/New_York]",
            3
        ),
        [
            "2026-03-07T02:30:00-05:00",
            "2026-03-08T03:00:00-04:00",
            "2026-03-09T02:30:00-04:00"
        ]
    );
}

#[test]
fn new_york_spring_forward_skip_policy_drops_the_day() {
    assert_eq!(
        fires(
            &with("30 2 * * *", Gap::Skip, Fold::Once),
            "2026-03-07T00:00[America/New_York]",
            2
        ),
        ["2026-03-07T02:30:00-05:00", "2026-03-09T02:30:00-04:00"]
    );
}

#[test]
fn new_york_fall_back_fixed_time_fires_once_at_first_occurrence() {
    assert_eq!(
        fires(
            &default("30 1 * * *"),
            "2026-10-31T00:00[America/New_York]",
            3
        ),
        [
            "2026-10-31T01:30:00-04:00",
            "2026-11-01T01:30:00-04:00",
            "2026-11-02T01:30:00-05:00"
        ]
    );
}

#[test]
fn new_york_fall_back_twice_policy_fires_both_passes() {
    assert_eq!(
        fires(
            &with("30 1 * * *", Gap::Shift, Fold::Twice),
            "2026-10-31T12:00[America/New_York]",
            3
        ),
        [
            "2026-11-01T01:30:00-04:00",
            "2026-11-01T01:30:00-05:00",
            "2026-11-02T01:30:00-05:00"
        ]
    );
}

#[test]
fn fold_once_holds_when_starting_inside_the_second_pass() {
    // 01:10 EST is in the repeated hour; 01:30 already fired at 01:30 EDT.
    let start = "2026-11-01T01:10:00-05:00[America/New_York]";
    assert_eq!(
        fires(&default("30 1 * * *"), start, 1),
        ["2026-11-02T01:30:00-05:00"]
    );
    assert_eq!(
        fires(&with("30 1 * * *", Gap::Shift, Fold::Twice), start, 1),
        ["2026-11-01T01:30:00-05:00"]
    );
}

#[test]
fn wildcard_jobs_fire_at_every_real_instant_in_the_fold() {
    // Every 30 minutes from 00:30 EDT: 01:00 and 01:30 happen twice.
    assert_eq!(
        fires(
            &default("*/30 * * * *"),
            "2026-11-01T00:15[America/New_York]",
            6
        ),
        [
            "2026-11-01T00:30:00-04:00",
            "2026-11-01T01:00:00-04:00",
            "2026-11-01T01:30:00-04:00",
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T01:30:00-05:00",
            "2026-11-01T02:00:00-05:00",
        ]
    );
}

#[test]
fn wildcard_jobs_skip_wall_times_that_do_not_exist() {
    // `*/30 2 * * *` has a wildcard minute: 02:xx does not exist on 2026-03-08.
    assert_eq!(
        fires(
            &default("*/30 2 * * *"),
            "2026-03-07T12:00[America/New_York]",
            4
        ),
        [
            "2026-03-09T02:00:00-04:00",
            "2026-03-09T02:30:00-04:00",
            "2026-03-10T02:00:00-04:00",
            "2026-03-10T02:30:00-04:00",
        ]
    );
    // And the hour after the gap fires once per real instant.
    assert_eq!(
        fires(
            &default("0 * * * *"),
            "2026-03-08T00:30[America/New_York]",
            3
        ),
        [
            "2026-03-08T01:00:00-05:00",
            "2026-03-08T03:00:00-04:00",
            "2026-03-08T04:00:00-04:00"
        ]
    );
}

#[test]
fn shifted_fire_is_not_repeated_when_the_gap_end_also_matches() {
    // 02:00 shifts to 03:00 EDT, which is also a fire time: one fire.
    assert_eq!(
        fires(
            &default("0 2,3 * * *"),
            "2026-03-08T00:00[America/New_York]",
            3
        ),
        [
            "2026-03-08T03:00:00-04:00",
            "2026-03-09T02:00:00-04:00",
            "2026-03-09T03:00:00-04:00"
        ]
    );
}

#[test]
fn london_gap_and_fold() {
    // BST starts 2026-03-29 01:00 GMT -> 02:00 BST; ends 2026-10-25 02:00 BST -> 01:00 GMT.
    assert_eq!(
        fires(&default("15 1 * * *"), "2026-03-28T12:00[Europe/London]", 2),
        ["2026-03-29T02:00:00+01:00", "2026-03-30T01:15:00+01:00"]
    );
    assert_eq!(
        fires(&default("15 1 * * *"), "2026-10-24T12:00[Europe/London]", 2),
        ["2026-10-25T01:15:00+01:00", "2026-10-26T01:15:00+00:00"]
    );
    assert_eq!(
        fires(
            &default("0,30 * * * *"),
            "2026-10-25T00:45[Europe/London]",
            5
        ),
        [
            "2026-10-25T01:00:00+01:00",
            "2026-10-25T01:30:00+01:00",
            "2026-10-25T01:00:00+00:00",
            "2026-10-25T01:30:00+00:00",
            "2026-10-25T02:00:00+00:00",
        ]
    );
}

#[test]
fn lord_howe_half_hour_shift() {
    // Lord Howe: +10:30 standard, +11:00 summer. 2026-10-04 02:00 -> 02:30; 2026-04-05 02:00 -> 01:30.
    assert_eq!(
        fires(
            &default("15 2 * * *"),
            "2026-10-03T12:00[Australia/Lord_Howe]",
            2
        ),
        ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"]
    );
    assert_eq!(
        fires(
            &default("45 1 * * *"),
            "2026-04-04T12:00[Australia/Lord_Howe]",
            2
        ),
        ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"]
    );
    assert_eq!(
        fires(
            &default("*/15 1 * * *"),
            "2026-04-05T01:40[Australia/Lord_Howe]",
            4
        ),
        [
            "2026-04-05T01:45:00+11:00",
            "2026-04-05T01:30:00+10:30",
            "2026-04-05T01:45:00+10:30",
            "2026-04-06T01:00:00+10:30",
        ]
    );
}

#[test]
fn apia_skipped_a_whole_day_in_2011() {
    // Samoa jumped from 2011-12-29T23:59:59-10:00 to 2011-12-31T00:00:00+14:00.
    assert_eq!(
        fires(&default("0 12 * * *"), "2011-12-29T00:00[Pacific/Apia]", 3),
        [
            "2011-12-29T12:00:00-10:00",
            "2011-12-31T00:00:00+14:00",
            "2011-12-31T12:00:00+14:00"
        ]
    );
    assert_eq!(
        fires(
            &with("0 12 * * *", Gap::Skip, Fold::Once),
            "2011-12-29T00:00[Pacific/Apia]",
            2
        ),
        ["2011-12-29T12:00:00-10:00", "2011-12-31T12:00:00+14:00"]
    );
    // A job on the 30th alone never sees that date in 2011.
    assert_eq!(
        fires(
            &with("0 12 30 12 *", Gap::Skip, Fold::Once),
            "2011-12-01T00:00[Pacific/Apia]",
            1
        ),
        ["2012-12-30T12:00:00+14:00"]
    );
}

#[test]
fn sao_paulo_before_and_after_dst_was_abolished() {
    // 2018-11-04 00:00 -> 01:00 was Brazil's last spring-forward; from 2019 there is none.
    assert_eq!(
        fires(
            &default("30 0 * * *"),
            "2018-11-03T12:00[America/Sao_Paulo]",
            2
        ),
        ["2018-11-04T01:00:00-02:00", "2018-11-05T00:30:00-02:00"]
    );
    assert_eq!(
        fires(
            &default("30 0 * * *"),
            "2019-11-02T12:00[America/Sao_Paulo]",
            2
        ),
        ["2019-11-03T00:30:00-03:00", "2019-11-04T00:30:00-03:00"]
    );
}

#[test]
fn utc_and_fixed_offsets_have_no_transitions() {
    assert_eq!(
        fires(&default("0 0 29 2 *"), "2026-01-01T00:00[UTC]", 2),
        ["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]
    );
    assert_eq!(
        fires(&default("0 9 * * 1-5"), "2026-11-27T10:00+08:00[+08:00]", 2),
        ["2026-11-30T09:00:00+08:00", "2026-12-01T09:00:00+08:00"]
    );
}

#[test]
fn yearly_job_across_many_transitions() {
    assert_eq!(
        fires(
            &default("0 0 29 2 *"),
            "2026-03-01T00:00[America/New_York]",
            2
        ),
        ["2028-02-29T00:00:00-05:00", "2032-02-29T00:00:00-05:00"]
    );
}
