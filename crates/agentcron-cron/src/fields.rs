//! The compiled form of a cron expression: one bitmask per field plus the
//! day-of-month / day-of-week specials, and the search for the first local
//! wall time at or after a given one that matches them all.
//!
//! Nothing here knows about time zones: `zone.rs` maps local wall times to
//! instants and applies the DST policy.

use crate::civil::{Civil, days_from_civil, days_in_month, weekday_from_days};
use crate::parse::{CronExpr, FieldExpr, Item};

const FIRST_YEAR: i32 = 1970;
const LAST_YEAR: i32 = 9999;
const YEAR_WORDS: usize = ((LAST_YEAR - FIRST_YEAR) as usize) / 64 + 1;

/// Days 1, 8, 15, 22, 29 as bits: shifted by the first such day of a month it
/// gives every day of one weekday.
const WEEKLY: u32 = (1 << 1) | (1 << 8) | (1 << 15) | (1 << 22) | (1 << 29);

/// The last month the search looked at: its matching days and the day number
/// (since 1970-01-01) of its 1st. Iterators keep it between steps so that a
/// step within the same month does no calendar arithmetic.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MonthCache {
    year: i32,
    month: u32,
    days: u32,
    first: i64,
}

impl Default for MonthCache {
    fn default() -> Self {
        MonthCache {
            year: i32::MIN,
            month: 0,
            days: 0,
            first: 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fields {
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    days: u32,
    /// Bits 1..=12.
    months: u16,
    /// Bits 0..=6, Sunday = 0.
    weekdays: u8,
    /// `L-n` offsets as bits (bit n = `L-n`, bit 0 = `L`).
    last_day: u32,
    last_weekday: bool,
    /// Bits 1..=31: days given as `nW`.
    nearest_weekday: u32,
    /// Bits 0..=6: weekdays given as `nL`.
    last_of: u8,
    /// Per weekday, bits 1..=5: the occurrences given as `d#n`.
    nth: [u8; 7],
    /// `None` when the year field is `*`.
    years: Option<Box<[u64; YEAR_WORDS]>>,
    dom_star: bool,
    dow_star: bool,
    /// Matching days for each (month length 28..=31, weekday of the 1st):
    /// all a month's day mask depends on, so it is computed once at parse time.
    day_table: [[u32; 7]; 4],
}

fn range_bits(items: &[Item], min: u32, max: u32) -> u64 {
    let mut bits = 0u64;
    for item in items {
        let (start, end, step) = match *item {
            Item::Every { step } => (min, max, step),
            Item::Range { start, end, step } => (start, end, step),
            _ => continue,
        };
        let mut v = start;
        while v <= end {
            bits |= 1 << v;
            v += step;
        }
    }
    bits
}

impl Fields {
    pub(crate) fn compile(expr: &CronExpr) -> Fields {
        let dow = range_bits(&expr.dow.items, 0, 7);
        let mut f = Fields {
            seconds: range_bits(&expr.second.items, 0, 59),
            minutes: range_bits(&expr.minute.items, 0, 59),
            hours: range_bits(&expr.hour.items, 0, 23) as u32,
            days: range_bits(&expr.dom.items, 1, 31) as u32,
            months: range_bits(&expr.month.items, 1, 12) as u16,
            // 7 is Sunday too.
            weekdays: ((dow & 0x7f) | ((dow >> 7) & 1)) as u8,
            last_day: 0,
            last_weekday: false,
            nearest_weekday: 0,
            last_of: 0,
            nth: [0; 7],
            years: None,
            dom_star: expr.dom.star,
            dow_star: expr.dow.star,
            day_table: [[0; 7]; 4],
        };
        for item in &expr.dom.items {
            match *item {
                Item::LastDay { offset } => f.last_day |= 1 << offset,
                Item::LastWeekday => f.last_weekday = true,
                Item::NearestWeekday(d) => f.nearest_weekday |= 1 << d,
                _ => {}
            }
        }
        for item in &expr.dow.items {
            match *item {
                Item::LastOf(w) => f.last_of |= 1 << w,
                Item::Nth { weekday, nth } => f.nth[weekday as usize] |= 1 << nth,
                _ => {}
            }
        }
        if !expr.year.is_all() {
            f.years = Some(Box::new(year_bits(&expr.year)));
        }
        for dim in 28..=31u32 {
            for wd1 in 0..7u32 {
                f.day_table[(dim - 28) as usize][wd1 as usize] = f.compute_day_mask(dim, wd1);
            }
        }
        f
    }

    /// Does a local wall time match every field?
    pub(crate) fn matches(&self, c: Civil) -> bool {
        self.year_ok(c.year)
            && self.months >> c.month & 1 == 1
            && self.day_mask(c.year, c.month) >> c.day & 1 == 1
            && self.hours >> c.hour & 1 == 1
            && self.minutes >> c.minute & 1 == 1
            && self.seconds >> c.second & 1 == 1
    }

    fn year_ok(&self, year: i32) -> bool {
        match &self.years {
            None => true,
            Some(bits) => {
                (FIRST_YEAR..=LAST_YEAR).contains(&year) && {
                    let i = (year - FIRST_YEAR) as usize;
                    bits[i / 64] >> (i % 64) & 1 == 1
                }
            }
        }
    }

    /// The first allowed year at or after `year`.
    fn next_year(&self, year: i32) -> Option<i32> {
        let Some(bits) = &self.years else {
            return (year <= LAST_YEAR).then_some(year);
        };
        let mut i = (year.max(FIRST_YEAR) - FIRST_YEAR) as usize;
        while i / 64 < YEAR_WORDS {
            let word = bits[i / 64] >> (i % 64);
            if word != 0 {
                return Some(FIRST_YEAR + (i + word.trailing_zeros() as usize) as i32);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    /// The days (bits 1..=31) of the given month that match the day-of-month
    /// and day-of-week fields, combined by the Vixie rule: when either field
    /// starts with `*` (or `?`) a day must match both, otherwise either.
    pub(crate) fn day_mask(&self, year: i32, month: u32) -> u32 {
        let mut cache = MonthCache::default();
        self.month_days(year, month, &mut cache);
        cache.days
    }

    /// Fills `cache` for the given month unless it holds it already.
    #[inline]
    fn month_days(&self, year: i32, month: u32, cache: &mut MonthCache) {
        if cache.year == year && cache.month == month {
            return;
        }
        let first = days_from_civil(year, month, 1);
        let dim = days_in_month(year, month);
        let wd1 = weekday_from_days(first);
        *cache = MonthCache {
            year,
            month,
            days: self.day_table[(dim - 28) as usize][wd1 as usize],
            first,
        };
    }

    /// [`Fields::day_mask`] for a month of `dim` days whose 1st is weekday `wd1`.
    fn compute_day_mask(&self, dim: u32, wd1: u32) -> u32 {
        let valid = (u32::MAX >> (31 - dim)) & !1;
        let dom = self.dom_mask(dim, wd1) & valid;
        let dow = self.dow_mask(dim, wd1) & valid;
        if self.dom_star || self.dow_star {
            dom & dow
        } else {
            dom | dow
        }
    }

    fn dom_mask(&self, dim: u32, wd1: u32) -> u32 {
        let mut mask = self.days;
        let weekday_of = |d: u32| (wd1 + d - 1) % 7;
        let mut offsets = self.last_day;
        while offsets != 0 {
            let n = offsets.trailing_zeros();
            offsets &= offsets - 1;
            if n < dim {
                mask |= 1 << (dim - n);
            }
        }
        if self.last_weekday {
            let d = match weekday_of(dim) {
                6 => dim - 1,
                0 => dim - 2,
                _ => dim,
            };
            mask |= 1 << d;
        }
        let mut nearest = self.nearest_weekday;
        while nearest != 0 {
            let n = nearest.trailing_zeros();
            nearest &= nearest - 1;
            if n > dim {
                continue; // that day does not exist this month
            }
            let d = match weekday_of(n) {
                6 if n == 1 => 3,       // Saturday the 1st: Monday the 3rd
                6 => n - 1,             // Saturday: Friday before
                0 if n == dim => n - 2, // Sunday the last: Friday before
                0 => n + 1,             // Sunday: Monday after
                _ => n,
            };
            mask |= 1 << d;
        }
        mask
    }

    fn dow_mask(&self, dim: u32, wd1: u32) -> u32 {
        let mut mask = 0;
        // First day of the month that falls on weekday w.
        let first_of = |w: u32| (w + 7 - wd1) % 7 + 1;
        let mut weekdays = self.weekdays;
        while weekdays != 0 {
            let w = weekdays.trailing_zeros();
            weekdays &= weekdays - 1;
            mask |= WEEKLY << (first_of(w) - 1);
        }
        if self.last_of != 0 || self.nth.iter().any(|&n| n != 0) {
            for w in 0..7u32 {
                let first = first_of(w);
                if self.last_of >> w & 1 == 1 {
                    mask |= 1 << (first + 7 * ((dim - first) / 7));
                }
                let mut nth = self.nth[w as usize];
                while nth != 0 {
                    let n = nth.trailing_zeros();
                    nth &= nth - 1;
                    let d = first + 7 * (n - 1);
                    if d <= dim {
                        mask |= 1 << d;
                    }
                }
            }
        }
        mask
    }

    /// The first local wall time at or after `from` that matches, if any
    /// exists up to the end of year 9999, with its wall seconds.
    pub(crate) fn next_match(&self, from: Civil, cache: &mut MonthCache) -> Option<(Civil, i64)> {
        let Civil {
            mut year,
            mut month,
            mut day,
            mut hour,
            mut minute,
            mut second,
        } = from;
        'year: loop {
            let y = self.next_year(year)?;
            if y != year {
                (year, month, day, hour, minute, second) = (y, 1, 1, 0, 0, 0);
            }
            'month: loop {
                match next_bit(u64::from(self.months), month) {
                    None => {
                        (year, month, day, hour, minute, second) = (year + 1, 1, 1, 0, 0, 0);
                        continue 'year;
                    }
                    Some(m) if m != month => (month, day, hour, minute, second) = (m, 1, 0, 0, 0),
                    Some(_) => {}
                }
                self.month_days(year, month, cache);
                let days = cache.days;
                'day: loop {
                    match next_bit(u64::from(days), day) {
                        None => {
                            (month, day, hour, minute, second) = (month + 1, 1, 0, 0, 0);
                            continue 'month;
                        }
                        Some(d) if d != day => (day, hour, minute, second) = (d, 0, 0, 0),
                        Some(_) => {}
                    }
                    'hour: loop {
                        match next_bit(u64::from(self.hours), hour) {
                            None => {
                                (day, hour, minute, second) = (day + 1, 0, 0, 0);
                                continue 'day;
                            }
                            Some(h) if h != hour => (hour, minute, second) = (h, 0, 0),
                            Some(_) => {}
                        }
                        loop {
                            match next_bit(self.minutes, minute) {
                                None => {
                                    (hour, minute, second) = (hour + 1, 0, 0);
                                    continue 'hour;
                                }
                                Some(m) if m != minute => (minute, second) = (m, 0),
                                Some(_) => {}
                            }
                            match next_bit(self.seconds, second) {
                                None => (minute, second) = (minute + 1, 0),
                                Some(s) => {
                                    let wall = (cache.first + i64::from(day) - 1) * 86_400
                                        + i64::from(hour * 3600 + minute * 60 + s);
                                    let civil = Civil {
                                        year,
                                        month,
                                        day,
                                        hour,
                                        minute,
                                        second: s,
                                    };
                                    return Some((civil, wall));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn year_bits(field: &FieldExpr) -> [u64; YEAR_WORDS] {
    let mut bits = [0u64; YEAR_WORDS];
    for item in &field.items {
        let (start, end, step) = match *item {
            Item::Every { step } => (FIRST_YEAR as u32, LAST_YEAR as u32, step),
            Item::Range { start, end, step } => (start, end, step),
            _ => continue,
        };
        let mut v = start;
        while v <= end {
            let i = (v - FIRST_YEAR as u32) as usize;
            bits[i / 64] |= 1 << (i % 64);
            v += step;
        }
    }
    bits
}

/// The lowest set bit at or above `from`.
#[inline]
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask >> from;
    (rest != 0).then(|| from + rest.trailing_zeros())
}
