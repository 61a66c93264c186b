//! The `agentcron` binary, run as a child process.

use std::process::{Command, Output};

fn agentcron(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(args)
        .env("TZ", "UTC")
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8")
}

#[test]
fn next_prints_rfc3339_with_offsets_across_dst() {
    let o = agentcron(&[
        "cron",
        "next",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T00:00",
        "--count",
        "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "2026-03-07T02:30:00-05:00\n2026-03-08T03:00:00-04:00\n2026-03-09T02:30:00-04:00\n"
    );
    let o = agentcron(&[
        "cron",
        "next",
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-10-31T00:00:00-04:00",
        "--count",
        "3",
    ]);
    assert_eq!(
        stdout(&o),
        "2026-10-31T01:30:00-04:00\n2026-11-01T01:30:00-04:00\n2026-11-02T01:30:00-05:00\n"
    );
}

#[test]
fn next_honours_dst_policy_flags_and_hash_key() {
    let o = agentcron(&[
        "cron",
        "next",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T12:00",
        "--count",
        "1",
        "--dst-gap",
        "skip",
    ]);
    assert_eq!(stdout(&o), "2026-03-09T02:30:00-04:00\n");
    let o = agentcron(&[
        "cron",
        "next",
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-10-31T12:00",
        "--count",
        "2",
        "--dst-fold",
        "twice",
    ]);
    assert_eq!(
        stdout(&o),
        "2026-11-01T01:30:00-04:00\n2026-11-01T01:30:00-05:00\n"
    );
    let hashed = || {
        agentcron(&[
            "cron",
            "next",
            "H 9 * * *",
            "--tz",
            "UTC",
            "--after",
            "2026-01-01T00:00:00Z",
            "--count",
            "1",
            "--hash-key",
            "task-1",
        ])
    };
    let (a, b) = (hashed(), hashed());
    assert!(a.status.success());
    assert_eq!(stdout(&a), stdout(&b));
    assert!(stdout(&a).starts_with("2026-01-01T09:"));
}

#[test]
fn next_defaults_to_five_fires_after_now_in_the_system_zone() {
    let o = agentcron(&["cron", "next", "* * * * *"]);
    assert!(o.status.success());
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 5);
    let now = jiff::Timestamp::now();
    let first: jiff::Timestamp = lines[0].parse().expect("RFC 3339");
    assert!(
        first > now - jiff::SignedDuration::from_secs(1)
            && first <= now + jiff::SignedDuration::from_secs(61)
    );
    assert!(
        lines[0].ends_with("+00:00"),
        "TZ=UTC is the system zone here: {}",
        lines[0]
    );
}

#[test]
fn next_json() {
    let o = agentcron(&[
        "cron",
        "next",
        "0 9 * * 1-5",
        "--tz",
        "Asia/Shanghai",
        "--after",
        "2026-11-27T10:00:00+08:00",
        "--count",
        "2",
        "--json",
    ]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "{\"expression\":\"0 9 * * 1-5\",\"timezone\":\"Asia/Shanghai\",\"description\":\"At 09:00, Monday through Friday\",\"next\":[\"2026-11-30T09:00:00+08:00\",\"2026-12-01T09:00:00+08:00\"]}\n"
    );
}

#[test]
fn explain_in_english_and_chinese() {
    let o = agentcron(&["cron", "explain", "0 9 * * 1-5"]);
    assert_eq!(stdout(&o), "At 09:00, Monday through Friday\n");
    let o = agentcron(&["cron", "explain", "0 9 * * 1-5", "--lang", "zh"]);
    assert_eq!(stdout(&o), "周一至周五 09:00\n");
}

#[test]
fn bad_input_exits_2_with_one_line() {
    for (args, expected) in [
        (
            vec!["cron", "next", "0 25 * * *"],
            "agentcron: invalid cron expression `0 25 * * *`: hour field: 25 is out of range 0-23 (column 3)\n",
        ),
        (
            vec!["cron", "next", "* * * * *", "--tz", "Mars/Base"],
            "agentcron: unknown time zone `Mars/Base`: failed to find time zone `Mars/Base` in time zone database\n",
        ),
        (
            vec!["cron", "explain", "0 0 30 2 *"],
            "agentcron: invalid cron expression `0 0 30 2 *`: the expression can never fire: February has at most 29 days\n",
        ),
        (
            vec!["cron", "next", "* * * * *", "--after", "yesterday"],
            "agentcron: invalid --after `yesterday`: expected RFC 3339 (2026-03-07T00:00:00-05:00) or a local date-time (2026-03-07T00:00)\n",
        ),
    ] {
        let o = agentcron(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&o), expected);
        assert!(stdout(&o).is_empty());
    }
    // Bad flag values are clap's usage errors: also status 2.
    let o = agentcron(&["cron", "next", "* * * * *", "--dst-gap", "sideways"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown DST gap policy `sideways` (expected shift or skip)"),
        "{}",
        stderr(&o)
    );
}
