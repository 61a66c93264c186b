//! `agentcron cron next` and `agentcron cron explain`.

use std::io::Write;

use agentcron_cron::{Fold, Gap, Lang, Schedule};
use anyhow::Context as _;
use clap::Subcommand;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};

use crate::UsageError;

#[derive(Debug, Subcommand)]
pub(crate) enum CronCommand {
    /// Print the next fire times of an expression, one RFC 3339 timestamp per line.
    Next {
        /// The cron expression, e.g. "0 9 * * 1-5" or "@every 90s".
        expression: String,
        /// IANA time zone the expression is read in (default: the system zone).
        #[arg(long, value_name = "ZONE")]
        tz: Option<String>,
        /// Start instant, exclusive: RFC 3339 ("2026-03-07T00:00:00-05:00"), or a
        /// local date-time read in --tz ("2026-03-07T00:00"). Default: now.
        #[arg(long, value_name = "RFC3339")]
        after: Option<String>,
        /// How many fire times to print.
        #[arg(long, default_value_t = 5, value_name = "N")]
        count: usize,
        /// Fixed-time jobs in a spring-forward gap: shift to the gap's end, or skip.
        #[arg(long, default_value = "shift", value_name = "shift|skip")]
        dst_gap: Gap,
        /// Fixed-time jobs in a fall-back fold: fire once (first pass), or twice.
        #[arg(long, default_value = "once", value_name = "once|twice")]
        dst_fold: Fold,
        /// Key for `H` fields (agentcron uses the task id).
        #[arg(long, value_name = "KEY")]
        hash_key: Option<String>,
        /// Print {"expression", "timezone", "description", "next": [...]}.
        #[arg(long)]
        json: bool,
    },
    /// Describe an expression in words.
    Explain {
        /// The cron expression.
        expression: String,
        /// Language of the description.
        #[arg(long, default_value = "en", value_name = "en|zh")]
        lang: Lang,
    },
}

pub(crate) fn run(cmd: CronCommand, out: &mut impl Write) -> anyhow::Result<()> {
    match cmd {
        CronCommand::Next {
            expression,
            tz,
            after,
            count,
            dst_gap,
            dst_fold,
            hash_key,
            json,
        } => {
            let mut builder = Schedule::builder().dst_gap(dst_gap).dst_fold(dst_fold);
            if let Some(key) = hash_key {
                builder = builder.hash_key(key);
            }
            let schedule = builder
                .parse(&expression)
                .map_err(|e| UsageError(format!("invalid cron expression `{expression}`: {e}")))?;
            let (tz, zone_name) = zone(tz.as_deref())?;
            let start = start_instant(after.as_deref(), &tz)?;
            let fires: Vec<String> = schedule
                .iter_after(&start)
                .take(count)
                .map(|z| rfc3339(&z))
                .collect();
            if json {
                let doc = NextJson {
                    description: schedule.describe(Lang::En),
                    expression: &expression,
                    timezone: &zone_name,
                    next: &fires,
                };
                let text = serde_json::to_string(&doc).context("encoding JSON")?;
                writeln!(out, "{text}").context("writing to stdout")?;
            } else {
                for fire in &fires {
                    writeln!(out, "{fire}").context("writing to stdout")?;
                }
            }
            Ok(())
        }
        CronCommand::Explain { expression, lang } => {
            // `H` only picks a value; any key describes the shape the same way.
            let schedule = Schedule::builder()
                .hash_key("explain")
                .parse(&expression)
                .map_err(|e| UsageError(format!("invalid cron expression `{expression}`: {e}")))?;
            writeln!(out, "{}", schedule.describe(lang)).context("writing to stdout")?;
            Ok(())
        }
    }
}

/// `cron next --json`, keys in this order.
#[derive(serde::Serialize)]
struct NextJson<'a> {
    expression: &'a str,
    timezone: &'a str,
    description: String,
    next: &'a [String],
}

/// The zone and the name to report for it.
fn zone(name: Option<&str>) -> anyhow::Result<(TimeZone, String)> {
    match name {
        Some(name) => {
            let tz = TimeZone::get(name)
                .map_err(|e| UsageError(format!("unknown time zone `{name}`: {e}")))?;
            Ok((tz, name.to_string()))
        }
        None => {
            let tz = TimeZone::system();
            let name = tz.iana_name().unwrap_or("UTC").to_string();
            Ok((tz, name))
        }
    }
}

fn start_instant(after: Option<&str>, tz: &TimeZone) -> anyhow::Result<ZonedDateTime> {
    let Some(text) = after else {
        return Ok(Timestamp::now().to_zoned_datetime(tz.clone()));
    };
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(ts.to_zoned_datetime(tz.clone()));
    }
    let civil: jiff::civil::DateTime = text.parse().map_err(|_| {
        UsageError(format!(
            "invalid --after `{text}`: expected RFC 3339 (2026-03-07T00:00:00-05:00) or a local date-time (2026-03-07T00:00)"
        ))
    })?;
    civil
        .to_zoned_datetime(tz.clone())
        .map_err(|e| UsageError(format!("invalid --after `{text}`: {e}")).into())
}

/// RFC 3339 with the zone's offset at that instant: `2026-03-08T03:00:00-04:00`.
fn rfc3339(z: &ZonedDateTime) -> String {
    z.timestamp().display_with_offset(z.offset()).to_string()
}
