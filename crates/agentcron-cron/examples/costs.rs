//! Quick cost breakdown of the pieces of a New York `next_after` (dev aid).
use std::hint::black_box;
use std::time::Instant;

fn time<R>(label: &str, n: u32, mut f: impl FnMut(u32) -> R) {
    let t = Instant::now();
    for i in 0..n {
        black_box(f(i));
    }
    println!(
        "{label:40} {:7.1} ns",
        t.elapsed().as_nanos() as f64 / f64::from(n)
    );
}

fn main() {
    let tz = jiff::tz::TimeZone::get("America/New_York").expect("zone");
    let base = 1_767_225_600i64;
    let ts = |i: u32| jiff::Timestamp::from_second(base + i64::from(i % 4096) * 7_717).expect("ts");
    let n = 5_000_000;
    let starts0: Vec<_> = (0..1)
        .map(|i| ts(i).to_zoned_datetime(tz.clone()))
        .collect();
    let start = &starts0[0];
    let steps = 10_000_000;
    let five = agentcron_cron::Schedule::parse("*/5 * * * *").expect("valid");
    let t = Instant::now();
    let count = five.timestamps_after(start).take(steps).count();
    println!(
        "timestamps_after */5 NY step {:.1} ns",
        t.elapsed().as_nanos() as f64 / count as f64
    );
    let t = Instant::now();
    let count = five.iter_after(&starts0[0]).take(steps).count();
    println!(
        "iter_after */5 NY step {:.1} ns",
        t.elapsed().as_nanos() as f64 / count as f64
    );
    if std::env::args().any(|a| a == "iter") {
        return;
    }

    time("to_offset", n, |i| tz.to_offset(ts(i)));
    time("following.next", n, |i| {
        tz.following(ts(i)).next().map(|t| t.timestamp())
    });
    time("preceding.next", n, |i| {
        tz.preceding(ts(i)).next().map(|t| t.timestamp())
    });
    time("to_zoned_datetime", n, |i| {
        ts(i).to_zoned_datetime(tz.clone())
    });
    let dts: Vec<jiff::civil::DateTime> = (0..4096)
        .map(|i| ts(i).to_zoned_datetime(tz.clone()).datetime())
        .collect();
    time("civil DateTime::new", n, |i| {
        let d = dts[(i % 4096) as usize];
        jiff::civil::DateTime::new(
            d.year(),
            d.month(),
            d.day(),
            d.hour(),
            d.minute(),
            d.second(),
            0,
        )
    });
    time("civil to_zoned_datetime", n, |i| {
        dts[(i % 4096) as usize].to_zoned_datetime(tz.clone())
    });
    let utc = jiff::tz::TimeZone::UTC;
    time("to_zoned_datetime UTC", n, |i| {
        ts(i).to_zoned_datetime(utc.clone())
    });
    let s = agentcron_cron::Schedule::parse("0 9 * * 1-5").expect("valid");
    let starts: Vec<_> = (0..4096)
        .map(|i| ts(i).to_zoned_datetime(tz.clone()))
        .collect();
    time("next_after 0 9 * * 1-5 NY", n, |i| {
        s.next_after(&starts[(i % 4096) as usize])
    });
    let ustarts: Vec<_> = (0..4096)
        .map(|i| ts(i).to_zoned_datetime(utc.clone()))
        .collect();
    let n = if std::env::args().any(|a| a == "long") {
        50_000_000
    } else {
        n
    };
    time("next_after 0 9 * * 1-5 UTC", n, |i| {
        s.next_after(&ustarts[(i % 4096) as usize])
    });
}

#[allow(dead_code)]
fn utc_only() {}
