//! Fuzzes the parser and the search: any input must parse or fail cleanly,
//! and a parsed schedule's fires must be strictly increasing, strictly after
//! the start, identical whether iterated or chained, and describable.
#![no_main]

use agentcron_cron::{DstPolicy, Fold, Gap, Lang, Schedule};
use libfuzzer_sys::fuzz_target;

const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "America/Sao_Paulo",
    "Asia/Kathmandu",
    "Pacific/Chatham",
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 10 {
        return;
    }
    let secs = i64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    // Keep starts inside jiff's range: years -9999..=9999.
    let secs = secs.rem_euclid(2 * 253_402_300_799) - 253_402_300_799;
    let zone = ZONES[usize::from(data[8]) % ZONES.len()];
    let policy = DstPolicy {
        gap: if data[9] & 1 == 0 { Gap::Shift } else { Gap::Skip },
        fold: if data[9] & 2 == 0 { Fold::Once } else { Fold::Twice },
    };
    let Ok(text) = std::str::from_utf8(&data[10..]) else {
        return;
    };
    let Ok(schedule) = Schedule::builder()
        .hash_key("fuzz")
        .dst(policy)
        .parse(text)
    else {
        return;
    };
    let _ = schedule.describe(Lang::En);
    let _ = schedule.describe(Lang::Zh);
    let tz = jiff::tz::TimeZone::get(zone).expect("zone in tzdb");
    let Ok(ts) = jiff::Timestamp::from_second(secs) else {
        return;
    };
    let start = ts.to_zoned_datetime(tz);
    let mut prev = start.clone();
    for fire in schedule.iter_after(&start).take(4) {
        assert!(fire.timestamp() > prev.timestamp(), "{text}: {fire} after {prev}");
        assert_eq!(schedule.next_after(&prev).as_ref(), Some(&fire), "{text} from {prev}");
        prev = fire;
    }
});
