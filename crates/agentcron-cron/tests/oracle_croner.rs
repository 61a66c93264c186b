//! Oracle test: on random expressions of the dialect both engines share
//! (5 fields; numbers, ranges, steps, lists, names, `?`), agentcron-cron and
//! croner 4 agree on the next five fire times in UTC.
//!
//! `a/step` is written `a-max/step` for croner, which rejects the short form,
//! and `*` appears only alone in a field (croner rejects `0,*`).
//!
//! Intended differences, excluded here and covered by our own tests:
//! - Vixie day rule: a day field that *starts with* `*` but is restricted
//!   (`*/2`) makes cron(8) require both day fields to match; croner treats
//!   only a bare `*` that way and otherwise matches either field.
//! - DST policy: croner has none to choose, so the comparison runs in UTC
//!   (`tests/dst.rs` covers zones with transitions).

mod common;

use agentcron_cron::Schedule;
use chrono::TimeZone as _;
use proptest::prelude::*;

/// True when cron(8)'s rule and croner's rule can disagree on this expression.
fn vixie_difference(e: &common::Expr) -> bool {
    let dom = e.dom.render(common::Kind::Dom);
    let dow = e.dow.render(common::Kind::Dow);
    let bare = |f: &str| f == "*" || f == "?";
    let starred = |f: &str| f.starts_with('*');
    (starred(&dom) && !bare(&dom) && !bare(&dow)) || (starred(&dow) && !bare(&dow) && !bare(&dom))
}

/// croner rejects `*` inside a list (`0,*`); keep it to lone `*` fields.
fn stars_alone(e: &common::Expr) -> bool {
    [&e.minute, &e.hour, &e.dom, &e.month, &e.dow]
        .iter()
        .all(|f| {
            f.items.len() == 1
                || !f
                    .items
                    .iter()
                    .any(|i| matches!(i, common::Item::Star { .. }))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn agrees_with_croner_in_utc(
        e in common::shared_dialect_expr().prop_filter("croner: lone stars", stars_alone),
        (secs, _) in common::instant(),
    ) {
        prop_assume!(!vixie_difference(&e));
        let text = e.render();
        let ours = match Schedule::parse(&text) {
            Ok(s) => s,
            Err(err) => {
                // We reject only expressions that can never fire; croner then finds nothing.
                prop_assert!(err.to_string().contains("never fire"), "{text}: {err}");
                return Ok(());
            }
        };
        // croner spells `5/15` only as `5-59/15`.
        let their_text = e.without_open_steps().render();
        let theirs = croner::Cron::from_str(&their_text).map_err(|e| TestCaseError::fail(format!("croner rejects {their_text}: {e}")))?;
        let start = jiff::Timestamp::from_second(secs).expect("ts").to_zoned_datetime(jiff::tz::TimeZone::UTC);
        let ours: Vec<i64> = ours.iter_after(&start).take(5).map(|z| z.timestamp().as_second()).collect();
        let mut theirs_fires = Vec::new();
        let mut cur = chrono::Utc.timestamp_opt(secs, 0).single().expect("valid");
        for _ in 0..5 {
            match theirs.find_next_occurrence(&cur, false) {
                Ok(next) => {
                    theirs_fires.push(next.timestamp());
                    cur = next;
                }
                Err(_) => break,
            }
        }
        prop_assert_eq!(ours, theirs_fires, "{}", text);
    }
}

use std::str::FromStr as _;
