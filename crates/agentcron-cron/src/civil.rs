//! Proleptic Gregorian calendar arithmetic on plain integers.
//!
//! The search loop runs millions of times per second, so it works on local
//! "wall seconds" (seconds since 1970-01-01T00:00:00 in local time) and on a
//! small [`Civil`] struct instead of jiff values; jiff is only consulted for
//! offsets and transitions (see `zone.rs`).

/// Days from 1970-01-01 to the given date (Howard Hinnant's algorithm).
#[inline]
pub(crate) fn days_from_civil(year: i32, month: u32, day: u32) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count from 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month, day)
}

/// Day of the week, 0 = Sunday … 6 = Saturday.
pub(crate) fn weekday_from_days(days: i64) -> u32 {
    // 1970-01-01 was a Thursday.
    (days + 4).rem_euclid(7) as u32
}

pub(crate) fn is_leap(year: i32) -> bool {
    year & 3 == 0 && (year % 100 != 0 || year % 400 == 0)
}

#[inline]
pub(crate) fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A local wall-clock time with one-second resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Civil {
    pub(crate) year: i32,
    pub(crate) month: u32,
    pub(crate) day: u32,
    pub(crate) hour: u32,
    pub(crate) minute: u32,
    pub(crate) second: u32,
}

impl Civil {
    pub(crate) fn from_wall_seconds(secs: i64) -> Civil {
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: sod / 3600,
            minute: sod / 60 % 60,
            second: sod % 60,
        }
    }

    #[cfg(test)]
    pub(crate) fn to_wall_seconds(self) -> i64 {
        days_from_civil(self.year, self.month, self.day) * 86_400
            + i64::from(self.hour * 3600 + self.minute * 60 + self.second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_days_across_four_centuries() {
        for days in (-800_000..3_000_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
            assert!(d >= 1 && d <= days_in_month(y, m));
        }
    }

    #[test]
    fn wall_seconds_round_trip() {
        for secs in (-5_000_000_000i64..260_000_000_000).step_by(7_777_777) {
            let c = Civil::from_wall_seconds(secs);
            assert_eq!(c.to_wall_seconds(), secs, "{c:?}");
            assert!(c.hour < 24 && c.minute < 60 && c.second < 60);
        }
    }

    #[test]
    fn agrees_with_jiff() {
        for days in (-200_000..2_900_000).step_by(1013) {
            let (y, m, d) = civil_from_days(days);
            let date = jiff::civil::Date::new(y as i16, m as i8, d as i8).expect("valid date");
            assert_eq!(
                date.weekday().to_sunday_zero_offset() as u32,
                weekday_from_days(days)
            );
            assert_eq!(date.days_in_month() as u32, days_in_month(y, m));
        }
    }
}
