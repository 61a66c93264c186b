//! Text to syntax tree: fields, lists, ranges, steps, names, `L`/`W`/`#`,
//! `H` hashing and the `@` macros. Every error names the field and column.

use crate::error::{Field, ParseError};

/// One comma-separated element of a field, after `H` has been resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Item {
    /// `*`, `?` or `*/step`.
    Every { step: u32 },
    /// `n`, `a-b`, `a-b/step`, `a/step` (= `a-max/step`).
    Range { start: u32, end: u32, step: u32 },
    /// Day-of-month `L` (offset 0) or `L-offset`.
    LastDay { offset: u32 },
    /// Day-of-month `LW`: the last weekday (Mon–Fri) of the month.
    LastWeekday,
    /// Day-of-month `15W`: the weekday nearest that day, within the month.
    NearestWeekday(u32),
    /// Day-of-week `5L` / `FRIL`: the last such weekday of the month.
    LastOf(u32),
    /// Day-of-week `FRI#2`: the nth such weekday of the month.
    Nth { weekday: u32, nth: u32 },
}

/// One field of an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FieldExpr {
    pub(crate) field: Field,
    pub(crate) items: Vec<Item>,
    /// The field's text starts with `*` or `?` (the Vixie day rule and the
    /// DST "fixed time" test look at this).
    pub(crate) star: bool,
}

impl FieldExpr {
    fn every(field: Field) -> Self {
        FieldExpr {
            field,
            items: vec![Item::Every { step: 1 }],
            star: true,
        }
    }

    fn value(field: Field, v: u32) -> Self {
        FieldExpr {
            field,
            items: vec![Item::Range {
                start: v,
                end: v,
                step: 1,
            }],
            star: false,
        }
    }

    /// True when the field is exactly `*` (or `?`).
    pub(crate) fn is_all(&self) -> bool {
        self.items == [Item::Every { step: 1 }]
    }
}

/// A parsed cron expression: always seven fields, with defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CronExpr {
    pub(crate) second: FieldExpr,
    pub(crate) minute: FieldExpr,
    pub(crate) hour: FieldExpr,
    pub(crate) dom: FieldExpr,
    pub(crate) month: FieldExpr,
    pub(crate) dow: FieldExpr,
    pub(crate) year: FieldExpr,
}

/// What an expression says, before it is compiled into bitmasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expr {
    Cron(Box<CronExpr>),
    /// `@every <duration>`, in whole seconds.
    Every {
        seconds: i64,
    },
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

pub(crate) fn parse(text: &str, hash_key: Option<&str>) -> Result<Expr, ParseError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ParseError::new(None, None, "the expression is empty"));
    }
    if trimmed.starts_with('@') {
        let lead = text.len() - text.trim_start().len();
        return parse_macro(trimmed, column_of(text, lead), hash_key);
    }
    let tokens = tokenize(text);
    let fields: &[Field] = match tokens.len() {
        5 => &[
            Field::Minute,
            Field::Hour,
            Field::DayOfMonth,
            Field::Month,
            Field::DayOfWeek,
        ],
        6 => &[
            Field::Second,
            Field::Minute,
            Field::Hour,
            Field::DayOfMonth,
            Field::Month,
            Field::DayOfWeek,
        ],
        7 => &[
            Field::Second,
            Field::Minute,
            Field::Hour,
            Field::DayOfMonth,
            Field::Month,
            Field::DayOfWeek,
            Field::Year,
        ],
        n => {
            return Err(ParseError::new(
                None,
                None,
                format!("expected 5, 6 or 7 fields, found {n}"),
            ));
        }
    };
    let mut expr = CronExpr {
        second: FieldExpr::value(Field::Second, 0),
        minute: FieldExpr::every(Field::Minute),
        hour: FieldExpr::every(Field::Hour),
        dom: FieldExpr::every(Field::DayOfMonth),
        month: FieldExpr::every(Field::Month),
        dow: FieldExpr::every(Field::DayOfWeek),
        year: FieldExpr::every(Field::Year),
    };
    for (&field, &(col, tok)) in fields.iter().zip(&tokens) {
        let parsed = parse_field(field, tok, col, hash_key).map_err(|e| {
            // `0 9 * * * 2027`: six fields read as seconds-first, not as a year.
            let looks_like_year = tok.parse::<u32>().is_ok_and(|v| v >= 1970);
            if tokens.len() == 6 && field == Field::DayOfWeek && looks_like_year {
                e.with_hint(
                    "6 fields start with seconds; a year needs 7 fields (sec min hour dom mon dow year)",
                )
            } else {
                e
            }
        })?;
        match field {
            Field::Second => expr.second = parsed,
            Field::Minute => expr.minute = parsed,
            Field::Hour => expr.hour = parsed,
            Field::DayOfMonth => expr.dom = parsed,
            Field::Month => expr.month = parsed,
            Field::DayOfWeek => expr.dow = parsed,
            Field::Year => expr.year = parsed,
        }
    }
    Ok(Expr::Cron(Box::new(expr)))
}

/// Splits on white space, keeping each token's 1-based character column.
fn tokenize(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((column_of(text, s), &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((column_of(text, s), &text[s..]));
    }
    out
}

fn column_of(text: &str, byte: usize) -> usize {
    text[..byte].chars().count() + 1
}

fn parse_macro(text: &str, col: usize, hash_key: Option<&str>) -> Result<Expr, ParseError> {
    let mut words = text.split_whitespace();
    let name = words.next().unwrap_or_default().to_ascii_lowercase();
    let body = match name.as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        "@every" => {
            let rest: Vec<&str> = words.collect();
            if rest.is_empty() {
                return Err(ParseError::new(
                    None,
                    Some(col),
                    "@every needs a duration, e.g. `@every 90s` or `@every 1h30m`",
                ));
            }
            let arg_col = col + text.find(rest[0]).unwrap_or(0);
            let seconds = parse_duration(&rest.join(""))
                .map_err(|reason| ParseError::new(None, Some(arg_col), reason))?;
            return Ok(Expr::Every { seconds });
        }
        "@reboot" => {
            return Err(ParseError::new(
                None,
                Some(col),
                "@reboot is not supported: agentcron schedules by time; use a `once` or `manual` task",
            ));
        }
        _ => {
            return Err(ParseError::new(
                None,
                Some(col),
                format!(
                    "unknown macro `{name}` (expected @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every)"
                ),
            ));
        }
    };
    if words.next().is_some() {
        return Err(ParseError::new(
            None,
            Some(col),
            format!("{name} takes no arguments"),
        ));
    }
    parse(body, hash_key)
}

/// Parses `90s`, `25m`, `1h30m`, `2d` into whole seconds (at least one).
pub(crate) fn parse_duration(text: &str) -> Result<i64, String> {
    let mut total: i64 = 0;
    let mut digits = String::new();
    let mut any_unit = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: i64 = match c.to_ascii_lowercase() {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => {
                return Err(format!(
                    "invalid duration `{text}`: unexpected `{c}` (use units d, h, m, s as in `1h30m`)"
                ));
            }
        };
        if digits.is_empty() {
            return Err(format!(
                "invalid duration `{text}`: a number must come before `{c}`"
            ));
        }
        let n: i64 = digits
            .parse()
            .map_err(|_| format!("invalid duration `{text}`: number too large"))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("invalid duration `{text}`: too large"))?;
        digits.clear();
        any_unit = true;
    }
    if !digits.is_empty() || !any_unit {
        return Err(format!(
            "invalid duration `{text}`: every number needs a unit (d, h, m or s), as in `90s`"
        ));
    }
    if total < 1 {
        return Err(format!("invalid duration `{text}`: must be at least 1s"));
    }
    // Keep the interval far inside jiff's timestamp range.
    if total > 100 * 366 * 86_400 {
        return Err(format!("invalid duration `{text}`: at most 100 years"));
    }
    Ok(total)
}

fn parse_field(
    field: Field,
    text: &str,
    col: usize,
    hash_key: Option<&str>,
) -> Result<FieldExpr, ParseError> {
    let mut items = Vec::new();
    let mut offset = 0;
    for (index, part) in text.split(',').enumerate() {
        let part_col = col + text[..offset].chars().count();
        offset += part.len() + 1;
        if part.is_empty() {
            return Err(ParseError::new(
                Some(field),
                Some(part_col),
                "empty list element",
            ));
        }
        let item = ItemParser {
            field,
            text: part,
            col: part_col,
            hash_key,
            index,
        }
        .parse()?;
        items.push(item);
    }
    Ok(FieldExpr {
        field,
        items,
        star: text.starts_with('*') || text.starts_with('?'),
    })
}

struct ItemParser<'a> {
    field: Field,
    text: &'a str,
    col: usize,
    hash_key: Option<&'a str>,
    index: usize,
}

impl ItemParser<'_> {
    fn err(&self, at: usize, reason: impl Into<String>) -> ParseError {
        ParseError::new(Some(self.field), Some(self.col + at), reason)
    }

    fn parse(&self) -> Result<Item, ParseError> {
        let upper = self.text.to_ascii_uppercase();
        let t = upper.as_str();
        if t == "?" {
            return match self.field {
                Field::DayOfMonth | Field::DayOfWeek => Ok(Item::Every { step: 1 }),
                _ => Err(self.err(0, "`?` is only allowed in day-of-month and day-of-week")),
            };
        }
        if t.starts_with('H') {
            return self.parse_hash(t);
        }
        if let Some(item) = self.parse_day_special(t)? {
            return Ok(item);
        }
        let (base, step) = match t.split_once('/') {
            Some((base, step)) => (base, Some(self.parse_step(step, base.len() + 1)?)),
            None => (t, None),
        };
        let (min, max) = self.bounds();
        if base == "*" {
            return Ok(Item::Every {
                step: step.unwrap_or(1),
            });
        }
        let (start, end) = match base.split_once('-') {
            Some((a, b)) => {
                let start = self.parse_value(a, 0)?;
                let mut end = self.parse_value(b, a.len() + 1)?;
                // `MON-SUN`: Sunday closing a range is day 7, as people mean it.
                if self.field == Field::DayOfWeek && b == "SUN" {
                    end = 7;
                }
                if start > end {
                    return Err(self.err(
                        0,
                        format!("range {a}-{b} runs backwards (start is greater than end)"),
                    ));
                }
                (start, end)
            }
            None => {
                let v = self.parse_value(base, 0)?;
                // `5/15` means `5-max/15`.
                (v, if step.is_some() { max } else { v })
            }
        };
        debug_assert!(start >= min);
        Ok(Item::Range {
            start,
            end,
            step: step.unwrap_or(1),
        })
    }

    /// The field's range, with day-of-week's 7 folded in for open steps.
    fn bounds(&self) -> (u32, u32) {
        match self.field {
            Field::DayOfWeek => (0, 6),
            f => f.range(),
        }
    }

    fn parse_step(&self, text: &str, at: usize) -> Result<u32, ParseError> {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.err(at, format!("step `{text}` is not a positive number")));
        }
        match text.parse::<u32>() {
            Ok(0) => Err(self.err(at, "step must be at least 1")),
            Ok(n) => Ok(n),
            Err(_) => Err(self.err(at, format!("step `{text}` is too large"))),
        }
    }

    fn parse_value(&self, text: &str, at: usize) -> Result<u32, ParseError> {
        let (min, max) = self.field.range();
        if text.is_empty() {
            return Err(self.err(at, "missing value"));
        }
        let names: &[&str] = match self.field {
            Field::Month => &MONTHS,
            Field::DayOfWeek => &WEEKDAYS,
            _ => &[],
        };
        if let Some(i) = names.iter().position(|n| *n == text) {
            return Ok(i as u32 + if self.field == Field::Month { 1 } else { 0 });
        }
        if !text.bytes().all(|b| b.is_ascii_digit()) {
            let hint = match self.field {
                Field::Month => " (expected 1-12 or JAN-DEC)",
                Field::DayOfWeek => " (expected 0-7 or SUN-SAT)",
                _ => "",
            };
            return Err(self.err(at, format!("`{text}` is not a valid value{hint}")));
        }
        match text.parse::<u32>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(self.err(at, format!("{text} is out of range {min}-{max}"))),
        }
    }

    /// `L`, `L-3`, `LW`, `15W` in day-of-month; `5L`, `FRIL`, `FRI#2` in day-of-week.
    fn parse_day_special(&self, t: &str) -> Result<Option<Item>, ParseError> {
        match self.field {
            Field::DayOfMonth => {
                if t == "L" {
                    return Ok(Some(Item::LastDay { offset: 0 }));
                }
                if t == "LW" {
                    return Ok(Some(Item::LastWeekday));
                }
                if let Some(n) = t.strip_prefix("L-") {
                    let offset = match n.parse::<u32>() {
                        Ok(v) if (1..=30).contains(&v) => v,
                        _ => return Err(self.err(2, format!("L-{n}: the offset must be 1-30"))),
                    };
                    return Ok(Some(Item::LastDay { offset }));
                }
                if let Some(n) = t.strip_suffix('W') {
                    let day = self.parse_value(n, 0)?;
                    return Ok(Some(Item::NearestWeekday(day)));
                }
                if t.contains('L') || t.contains('W') || t.contains('#') {
                    return Err(self.err(
                        0,
                        format!("`{t}` is not valid here (expected L, L-n, LW or nW)"),
                    ));
                }
                Ok(None)
            }
            Field::DayOfWeek => {
                if let Some((day, nth)) = t.split_once('#') {
                    let weekday = self.parse_value(day, 0)? % 7;
                    let nth = match nth.parse::<u32>() {
                        Ok(v) if (1..=5).contains(&v) => v,
                        _ => {
                            return Err(self.err(
                                day.len() + 1,
                                format!("#{nth}: the occurrence must be 1-5"),
                            ));
                        }
                    };
                    return Ok(Some(Item::Nth { weekday, nth }));
                }
                if t == "L" {
                    return Err(self.err(0, "`L` alone is ambiguous in day-of-week; write e.g. `5L` or `FRIL` for the last Friday"));
                }
                if let Some(day) = t.strip_suffix('L') {
                    return Ok(Some(Item::LastOf(self.parse_value(day, 0)? % 7)));
                }
                if t.contains('W') && !t.chars().any(|c| c.is_ascii_alphabetic() && c != 'W')
                    || t.contains('#')
                {
                    return Err(self.err(0, format!("`{t}` is not valid here")));
                }
                Ok(None)
            }
            _ => {
                if t.bytes().any(|b| matches!(b, b'L' | b'W' | b'#'))
                    && !(self.field == Field::Month && MONTHS.iter().any(|m| t.contains(m)))
                {
                    return Err(self.err(
                        0,
                        "`L`, `W` and `#` are only allowed in day-of-month and day-of-week",
                    ));
                }
                Ok(None)
            }
        }
    }

    /// `H`, `H/15`, `H(0-29)`, `H(0-29)/10`, resolved with the hash key.
    fn parse_hash(&self, t: &str) -> Result<Item, ParseError> {
        let Some(key) = self.hash_key else {
            return Err(self.err(
                0,
                "`H` needs a hash key to pick its value (agentcron uses the task id; in the CLI pass --hash-key)",
            ));
        };
        let (min, max) = match self.field {
            Field::Year => return Err(self.err(0, "`H` is not supported in the year field")),
            // As Jenkins does: H in day-of-month stays within 1-28 so it fires every month.
            Field::DayOfMonth => (1, 28),
            Field::DayOfWeek => (0, 6),
            f => f.range(),
        };
        let rest = &t[1..];
        let (range_text, step_text) = match rest.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (rest, None),
        };
        let (lo, hi) = if range_text.is_empty() {
            (min, max)
        } else {
            let inner = range_text
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| self.err(1, "expected `H`, `H/n`, `H(a-b)` or `H(a-b)/n`"))?;
            let (a, b) = inner
                .split_once('-')
                .ok_or_else(|| self.err(2, "expected a range like `H(0-29)`"))?;
            let lo = self.parse_value(a, 2)?;
            let hi = self.parse_value(b, 3 + a.len())?;
            if lo > hi {
                return Err(self.err(2, format!("range {a}-{b} runs backwards")));
            }
            (lo, hi)
        };
        let hash = stable_hash(key, self.field, self.index);
        match step_text {
            None => {
                let v = lo + (hash % u64::from(hi - lo + 1)) as u32;
                Ok(Item::Range {
                    start: v,
                    end: v,
                    step: 1,
                })
            }
            Some(s) => {
                let step = self.parse_step(s, 1 + range_text.len() + 1)?;
                let span = (hi - lo + 1).min(step);
                let start = lo + (hash % u64::from(span)) as u32;
                Ok(Item::Range {
                    start,
                    end: hi,
                    step,
                })
            }
        }
    }
}

/// Why a compiled expression matches no date: names the usual culprit
/// (plain days no selected month has) or says so in general.
pub(crate) fn never_fires(expr: &CronExpr) -> ParseError {
    // Name the usual culprit: plain days that no selected month has.
    let months: Vec<u32> = (1..=12)
        .filter(|m| {
            expr.month.items.iter().any(|i| match *i {
                Item::Every { step } => (m - 1) % step == 0,
                Item::Range { start, end, step } => {
                    (start..=end).contains(m) && (m - start) % step == 0
                }
                _ => false,
            })
        })
        .collect();
    let only_plain_days = expr.dow.star
        && expr
            .dom
            .items
            .iter()
            .all(|i| matches!(i, Item::Range { .. } | Item::NearestWeekday(_)));
    if only_plain_days && !months.is_empty() && expr.year.is_all() {
        let longest = months
            .iter()
            .map(|&m| crate::civil::days_in_month(2000, m))
            .max()
            .unwrap_or(31);
        let names: Vec<&str> = months
            .iter()
            .map(|&m| crate::describe::MONTHS_EN[m as usize - 1])
            .collect();
        return ParseError::new(
            None,
            None,
            format!(
                "the expression can never fire: {} {} at most {longest} days",
                names.join(", "),
                if names.len() == 1 { "has" } else { "have" }
            ),
        );
    }
    ParseError::new(
        None,
        None,
        "the expression can never fire: no date between 1970 and 9999 matches all its fields",
    )
}

/// A hash of the key that is stable across platforms and releases (FNV-1a,
/// then a SplitMix64 finish), mixed with the field and list position so that
/// `H H * * *` does not pick equal minute and hour.
pub(crate) fn stable_hash(key: &str, field: Field, index: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= ((field as u64 + 1) << 32) | index as u64;
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}
