//! ns per next fire time: agentcron-cron beside croner 4 and cron 0.17 on the
//! same expressions, start instants and zones (UTC and America/New_York).
//!
//! Run: `cargo bench -p agentcron-cron --bench next_after`
//!
//! Stateless calls cycle through 64 start instants spread over 2026 so no
//! single code path is favoured. Iterator benches take 1,000 steps from a
//! fresh iterator per sample (the reported time is per step).

use std::hint::black_box;
use std::str::FromStr;

use chrono::TimeZone as _;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// (label, agentcron/croner expression, the same for the `cron` crate).
/// `cron` wants seconds first and numbers weekdays 1 = Sunday, so it gets
/// names; it has no `L`, so that row is skipped for it.
const CASES: &[(&str, &str, Option<&str>)] = &[
    ("*/5 * * * *", "*/5 * * * *", Some("0 */5 * * * *")),
    ("0 9 * * 1-5", "0 9 * * 1-5", Some("0 0 9 * * MON-FRI")),
    ("0 0 L * *", "0 0 L * *", None),
    ("0 0 29 2 *", "0 0 29 2 *", Some("0 0 0 29 2 *")),
    (
        "15,45 */2 1-15 * MON-FRI",
        "15,45 */2 1-15 * MON-FRI",
        Some("0 15,45 */2 1-15 * MON-FRI"),
    ),
    ("0 30 2 * * *", "0 30 2 * * *", Some("0 30 2 * * *")),
];

const ZONES: &[&str] = &["UTC", "America/New_York"];
const STEPS: usize = 1000;

fn starts_epoch() -> Vec<i64> {
    // 2026-01-01T00:00:00Z plus 64 irregular offsets across the year.
    (0..64)
        .map(|i| 1_767_225_600 + i * 492_113 + (i * i * 7_919) % 86_400)
        .collect()
}

fn bench(c: &mut Criterion) {
    let epochs = starts_epoch();
    for &(label, expr, cron_expr) in CASES {
        let mut group = c.benchmark_group(format!("next_after/{label}"));
        for &zone in ZONES {
            let tz = jiff::tz::TimeZone::get(zone).expect("zone in tzdb");
            let ours = agentcron_cron::Schedule::parse(expr).expect("valid");
            let starts: Vec<jiff::ZonedDateTime> = epochs
                .iter()
                .map(|&s| {
                    jiff::Timestamp::from_second(s)
                        .expect("ts")
                        .to_zoned_datetime(tz.clone())
                })
                .collect();
            group.bench_function(BenchmarkId::new("agentcron", zone), |b| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % starts.len();
                    black_box(ours.next_after(black_box(&starts[i])))
                })
            });

            let ctz = chrono_tz::Tz::from_str(zone).expect("zone in chrono-tz");
            let cstarts: Vec<chrono::DateTime<chrono_tz::Tz>> = epochs
                .iter()
                .map(|&s| ctz.timestamp_opt(s, 0).single().expect("valid"))
                .collect();
            let croner = croner::parser::CronParser::builder()
                .seconds(croner::parser::Seconds::Optional)
                .build()
                .parse(expr)
                .expect("croner parses");
            group.bench_function(BenchmarkId::new("croner", zone), |b| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % cstarts.len();
                    black_box(
                        croner
                            .find_next_occurrence(black_box(&cstarts[i]), false)
                            .ok(),
                    )
                })
            });
            if let Some(cron_expr) = cron_expr {
                let cron = cron::Schedule::from_str(cron_expr).expect("cron parses");
                group.bench_function(BenchmarkId::new("cron", zone), |b| {
                    let mut i = 0;
                    b.iter(|| {
                        i = (i + 1) % cstarts.len();
                        black_box(cron.after(black_box(&cstarts[i])).next())
                    })
                });
            }
        }
        group.finish();

        let mut group = c.benchmark_group(format!("iter_step/{label}"));
        group.throughput(Throughput::Elements(STEPS as u64));
        let tz = jiff::tz::TimeZone::get("America/New_York").expect("zone");
        let ours = agentcron_cron::Schedule::parse(expr).expect("valid");
        let start = jiff::Timestamp::from_second(epochs[0])
            .expect("ts")
            .to_zoned_datetime(tz);
        group.bench_function("agentcron/America/New_York", |b| {
            b.iter(|| {
                for z in ours.iter_after(black_box(&start)).take(STEPS) {
                    black_box(z);
                }
            })
        });
        group.bench_function("agentcron-timestamps/America/New_York", |b| {
            b.iter(|| {
                for t in ours.timestamps_after(black_box(&start)).take(STEPS) {
                    black_box(t);
                }
            })
        });
        let ctz = chrono_tz::Tz::from_str("America/New_York").expect("zone");
        let cstart = ctz.timestamp_opt(epochs[0], 0).single().expect("valid");
        let croner = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(expr)
            .expect("croner parses");
        group.bench_function("croner/America/New_York", |b| {
            b.iter(|| {
                for z in croner.iter_after(black_box(cstart)).take(STEPS) {
                    black_box(z);
                }
            })
        });
        if let Some(cron_expr) = cron_expr {
            let cron = cron::Schedule::from_str(cron_expr).expect("cron parses");
            group.bench_function("cron/America/New_York", |b| {
                b.iter(|| {
                    for z in cron.after(black_box(&cstart)).take(STEPS) {
                        black_box(z);
                    }
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_millis(1200))
        .sample_size(30);
    targets = bench
}
criterion_main!(benches);
