//! Durations as people write them in task definitions: `500ms`, `90s`,
//! `5m`, `1h30m`, `2d`. Millisecond precision; serialized in the same form.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-negative duration with millisecond precision, written `1h30m`.
///
/// ```
/// use agentcron::HumanDuration;
/// let d: HumanDuration = "1h30m".parse()?;
/// assert_eq!(d.as_millis(), 5_400_000);
/// assert_eq!(d.to_string(), "1h30m");
/// # Ok::<(), agentcron::DurationError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HumanDuration {
    millis: u64,
}

/// Why a duration string was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration `{text}`: {reason}")]
pub struct DurationError {
    text: String,
    reason: &'static str,
}

const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

impl HumanDuration {
    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        HumanDuration { millis }
    }

    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        HumanDuration {
            millis: secs * 1000,
        }
    }

    /// The length in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// As a standard library duration.
    pub const fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.millis)
    }
}

impl FromStr for HumanDuration {
    type Err = DurationError;

    fn from_str(text: &str) -> Result<Self, DurationError> {
        let err = |reason| DurationError {
            text: text.to_string(),
            reason,
        };
        let mut rest = text.trim();
        if rest.is_empty() {
            return Err(err("empty (write e.g. 90s, 5m or 1h30m)"));
        }
        let mut total: u64 = 0;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(err("expected a number (write e.g. 90s, 5m or 1h30m)"));
            }
            let n: u64 = rest[..digits]
                .parse()
                .map_err(|_| err("number too large"))?;
            rest = &rest[digits..];
            let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            let unit = &rest[..unit_len];
            let Some(&(_, size)) = UNITS.iter().find(|(u, _)| *u == unit) else {
                return Err(err(if unit.is_empty() {
                    "every number needs a unit: d, h, m, s or ms"
                } else {
                    "unknown unit (use d, h, m, s or ms)"
                }));
            };
            rest = &rest[unit_len..];
            total = n
                .checked_mul(size)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(|| err("too large"))?;
        }
        Ok(HumanDuration { millis: total })
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.millis == 0 {
            return f.write_str("0s");
        }
        let mut rest = self.millis;
        for (unit, size) in UNITS {
            if rest >= size {
                write!(f, "{}{unit}", rest / size)?;
                rest %= size;
            }
        }
        Ok(())
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::HumanDuration;

    #[test]
    fn parses_and_prints_canonically() {
        for (text, millis, canonical) in [
            ("90s", 90_000, "1m30s"),
            ("5m", 300_000, "5m"),
            ("1h30m", 5_400_000, "1h30m"),
            ("500ms", 500, "500ms"),
            ("2d", 172_800_000, "2d"),
            ("1m500ms", 60_500, "1m500ms"),
            ("0s", 0, "0s"),
        ] {
            let d: HumanDuration = text.parse().unwrap();
            assert_eq!(d.as_millis(), millis, "{text}");
            assert_eq!(d.to_string(), canonical);
            assert_eq!(canonical.parse::<HumanDuration>().unwrap(), d);
        }
    }

    #[test]
    fn rejects_with_reasons() {
        for (text, message) in [
            (
                "",
                "invalid duration ``: empty (write e.g. 90s, 5m or 1h30m)",
            ),
            (
                "15",
                "invalid duration `15`: every number needs a unit: d, h, m, s or ms",
            ),
            (
                "5x",
                "invalid duration `5x`: unknown unit (use d, h, m, s or ms)",
            ),
            (
                "m5",
                "invalid duration `m5`: expected a number (write e.g. 90s, 5m or 1h30m)",
            ),
            (
                "-5s",
                "invalid duration `-5s`: expected a number (write e.g. 90s, 5m or 1h30m)",
            ),
        ] {
            assert_eq!(
                text.parse::<HumanDuration>().unwrap_err().to_string(),
                message
            );
        }
    }
}
