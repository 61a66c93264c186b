//! Shared by the property and oracle tests: random expressions as
//! structures, rendered to text for the parser and evaluated directly, with
//! jiff's calendar, by a slow reference matcher that shares no code with the
//! engine.

#![allow(dead_code, unreachable_pub, missing_docs)]

use jiff::civil::{Date, DateTime, Weekday};
use proptest::prelude::*;

#[derive(Clone, Debug)]
pub enum Item {
    Star {
        step: u32,
    },
    Range {
        start: u32,
        end: u32,
        step: u32,
    },
    /// `a/step`: a through the field's maximum.
    From {
        start: u32,
        step: u32,
    },
    Last {
        offset: u32,
    },
    LastWeekday,
    Nearest(u32),
    LastOf(u32),
    Nth {
        weekday: u32,
        nth: u32,
    },
}

#[derive(Clone, Debug)]
pub struct FieldSpec {
    pub items: Vec<Item>,
    /// Render values as names (month / day-of-week).
    pub names: bool,
    pub question: bool,
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub second: Option<FieldSpec>,
    pub minute: FieldSpec,
    pub hour: FieldSpec,
    pub dom: FieldSpec,
    pub month: FieldSpec,
    pub dow: FieldSpec,
    pub year: Option<FieldSpec>,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 8] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];

fn name(kind: Kind, v: u32, names: bool) -> String {
    match (kind, names) {
        (Kind::Month, true) => MONTHS[v as usize - 1].to_string(),
        // 7 (Sunday again) stays a number: `SUN-SUN` would mean one day.
        (Kind::Dow, true) if v < 7 => DAYS[v as usize].to_string(),
        _ => v.to_string(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Second,
    Minute,
    Hour,
    Dom,
    Month,
    Dow,
    Year,
}

impl Kind {
    fn bounds(self) -> (u32, u32) {
        match self {
            Kind::Second | Kind::Minute => (0, 59),
            Kind::Hour => (0, 23),
            Kind::Dom => (1, 31),
            Kind::Month => (1, 12),
            Kind::Dow => (0, 7),
            Kind::Year => (2020, 2060),
        }
    }
}

impl FieldSpec {
    pub fn render(&self, kind: Kind) -> String {
        if self.question {
            return "?".into();
        }
        // `SUN` closing a range means 7, so a closing 0 stays a number.
        let parts: Vec<String> = self
            .items
            .iter()
            .map(|i| match *i {
                Item::Star { step: 1 } => "*".into(),
                Item::Star { step } => format!("*/{step}"),
                Item::Range {
                    start,
                    end,
                    step: 1,
                } if start == end => name(kind, start, self.names),
                Item::Range {
                    start,
                    end,
                    step: 1,
                } => {
                    format!(
                        "{}-{}",
                        name(kind, start, self.names),
                        name(kind, end, self.names && end != 0)
                    )
                }
                Item::Range { start, end, step } => format!(
                    "{}-{}/{step}",
                    name(kind, start, self.names),
                    name(kind, end, self.names && end != 0)
                ),
                Item::From { start, step } => format!("{}/{step}", name(kind, start, self.names)),
                Item::Last { offset: 0 } => "L".into(),
                Item::Last { offset } => format!("L-{offset}"),
                Item::LastWeekday => "LW".into(),
                Item::Nearest(d) => format!("{d}W"),
                Item::LastOf(w) => format!("{}L", name(kind, w, self.names)),
                Item::Nth { weekday, nth } => format!("{}#{nth}", name(kind, weekday, self.names)),
            })
            .collect();
        parts.join(",")
    }

    fn starts_with_star(&self) -> bool {
        self.question || matches!(self.items.first(), Some(Item::Star { .. }))
    }

    /// Does a plain value match (seconds, minutes, hours, months, years)?
    fn value_matches(&self, kind: Kind, v: u32) -> bool {
        let (min, max) = kind.bounds();
        // The year field's own range is 1970-9999; generated values stay in 2020-2060.
        let (min, max) = if kind == Kind::Year {
            (1970, 9999)
        } else {
            (min, max)
        };
        self.question
            || self.items.iter().any(|i| match *i {
                Item::Star { step } => (v - min).is_multiple_of(step),
                Item::Range { start, end, step } => {
                    v >= start && v <= end && (v - start).is_multiple_of(step)
                }
                Item::From { start, step } => {
                    v >= start && v <= max && (v - start).is_multiple_of(step)
                }
                _ => false,
            })
    }
}

impl Expr {
    /// A five-field expression (no seconds, no year).
    pub fn five(
        minute: FieldSpec,
        hour: FieldSpec,
        dom: FieldSpec,
        month: FieldSpec,
        dow: FieldSpec,
    ) -> Expr {
        Expr {
            second: None,
            minute,
            hour,
            dom,
            month,
            dow,
            year: None,
        }
    }

    /// The same expression with `a/step` spelled `a-max/step` (croner accepts only that).
    pub fn without_open_steps(&self) -> Expr {
        let close = |f: &FieldSpec, kind: Kind| {
            let max = if kind == Kind::Dow {
                6
            } else {
                kind.bounds().1
            };
            FieldSpec {
                items: f
                    .items
                    .iter()
                    .map(|i| match *i {
                        Item::From { start, step } => Item::Range {
                            start,
                            end: max,
                            step,
                        },
                        ref other => other.clone(),
                    })
                    .collect(),
                ..f.clone()
            }
        };
        Expr {
            second: self.second.as_ref().map(|f| close(f, Kind::Second)),
            minute: close(&self.minute, Kind::Minute),
            hour: close(&self.hour, Kind::Hour),
            dom: close(&self.dom, Kind::Dom),
            month: close(&self.month, Kind::Month),
            dow: close(&self.dow, Kind::Dow),
            year: self.year.as_ref().map(|f| close(f, Kind::Year)),
        }
    }

    pub fn render(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = &self.second {
            parts.push(s.render(Kind::Second));
        }
        parts.push(self.minute.render(Kind::Minute));
        parts.push(self.hour.render(Kind::Hour));
        parts.push(self.dom.render(Kind::Dom));
        parts.push(self.month.render(Kind::Month));
        parts.push(self.dow.render(Kind::Dow));
        if let Some(y) = &self.year {
            parts.push(y.render(Kind::Year));
        }
        parts.join(" ")
    }

    /// Is this a fixed-time job (no leading `*` in second, minute, hour)?
    pub fn fixed(&self) -> bool {
        !(self.second.as_ref().is_some_and(|s| s.starts_with_star())
            || self.minute.starts_with_star()
            || self.hour.starts_with_star())
    }

    /// The reference matcher: does this wall time match?
    pub fn matches(&self, dt: DateTime) -> bool {
        let second_ok = match &self.second {
            Some(s) => s.value_matches(Kind::Second, dt.second() as u32),
            None => dt.second() == 0,
        };
        second_ok
            && dt.subsec_nanosecond() == 0
            && self.minute.value_matches(Kind::Minute, dt.minute() as u32)
            && self.hour.value_matches(Kind::Hour, dt.hour() as u32)
            && self.month.value_matches(Kind::Month, dt.month() as u32)
            && self
                .year
                .as_ref()
                .is_none_or(|y| y.value_matches(Kind::Year, dt.year() as u32))
            && self.day_matches(dt.date())
    }

    fn day_matches(&self, date: Date) -> bool {
        let dom = self.dom.question || self.dom.items.iter().any(|i| dom_item(i, date));
        let dow = self.dow.question || self.dow.items.iter().any(|i| dow_item(i, date));
        if self.dom.starts_with_star() || self.dow.starts_with_star() {
            dom && dow
        } else {
            dom || dow
        }
    }
}

fn is_weekday(d: Date) -> bool {
    !matches!(d.weekday(), Weekday::Saturday | Weekday::Sunday)
}

fn dom_item(item: &Item, date: Date) -> bool {
    let d = date.day() as u32;
    let dim = date.days_in_month() as u32;
    match *item {
        Item::Star { step } => (d - 1).is_multiple_of(step),
        Item::Range { start, end, step } => {
            d >= start && d <= end && (d - start).is_multiple_of(step)
        }
        Item::From { start, step } => d >= start && (d - start).is_multiple_of(step),
        Item::Last { offset } => offset < dim && d == dim - offset,
        Item::LastWeekday => {
            // The last day of the month that is a weekday.
            is_weekday(date)
                && (d + 1..=dim)
                    .all(|later| !is_weekday(date.with().day(later as i8).build().expect("day")))
        }
        Item::Nearest(n) => {
            if n > dim {
                return false;
            }
            // Search outward from day n, never leaving the month; ties go earlier.
            let target = date.with().day(n as i8).build().expect("day");
            if is_weekday(target) {
                return d == n;
            }
            let mut best = None;
            for dist in 1..=2i32 {
                for cand in [n as i32 - dist, n as i32 + dist] {
                    if best.is_none() && cand >= 1 && cand <= dim as i32 {
                        let c = date.with().day(cand as i8).build().expect("day");
                        if is_weekday(c) {
                            best = Some(cand as u32);
                        }
                    }
                }
            }
            // Saturday the 1st: Monday the 3rd; Sunday the last: Friday before.
            best == Some(d)
        }
        _ => false,
    }
}

fn dow_item(item: &Item, date: Date) -> bool {
    let w = date.weekday().to_sunday_zero_offset() as u32;
    let d = date.day() as u32;
    let dim = date.days_in_month() as u32;
    match *item {
        Item::Star { step } => (0..=7).step_by(step as usize).any(|v| v % 7 == w),
        Item::Range { start, end, step } => {
            (start..=end).step_by(step as usize).any(|v| v % 7 == w)
        }
        Item::From { start, step } => (start..=6).step_by(step as usize).any(|v| v % 7 == w),
        Item::LastOf(v) => v % 7 == w && d + 7 > dim,
        Item::Nth { weekday, nth } => weekday % 7 == w && (d - 1) / 7 + 1 == nth,
        _ => false,
    }
}

// ---------- generators ----------

fn plain_item(kind: Kind) -> BoxedStrategy<Item> {
    let (min, max) = kind.bounds();
    let max_open = if kind == Kind::Dow { 6 } else { max };
    prop_oneof![
        (min..=max).prop_map(|v| Item::Range {
            start: v,
            end: v,
            step: 1
        }),
        (min..=max, min..=max, 1u32..=4).prop_map(|(a, b, s)| Item::Range {
            start: a.min(b),
            end: a.max(b),
            step: s,
        }),
        (1u32..=(max - min + 1).min(20)).prop_map(|step| Item::Star { step }),
        (min..=max_open, 1u32..=10).prop_map(|(start, step)| Item::From { start, step }),
    ]
    .boxed()
}

fn field(kind: Kind) -> BoxedStrategy<FieldSpec> {
    let names = matches!(kind, Kind::Month | Kind::Dow);
    let items = prop::collection::vec(plain_item(kind), 1..=3);
    prop_oneof![
        2 => Just(FieldSpec { items: vec![Item::Star { step: 1 }], names: false, question: false }),
        3 => (items, any::<bool>()).prop_map(move |(items, n)| FieldSpec { items, names: names && n, question: false }),
    ]
    .boxed()
}

fn dom_field() -> BoxedStrategy<FieldSpec> {
    let special = prop_oneof![
        (0u32..=5).prop_map(|offset| Item::Last { offset }),
        Just(Item::LastWeekday),
        (1u32..=31).prop_map(Item::Nearest),
    ];
    prop_oneof![
        3 => field(Kind::Dom),
        1 => Just(FieldSpec { items: vec![], names: false, question: true }),
        1 => prop::collection::vec(prop_oneof![special, plain_item(Kind::Dom)], 1..=2)
            .prop_map(|items| FieldSpec { items, names: false, question: false }),
    ]
    .boxed()
}

fn dow_field() -> BoxedStrategy<FieldSpec> {
    let special = prop_oneof![
        (0u32..=7).prop_map(Item::LastOf),
        (0u32..=7, 1u32..=5).prop_map(|(weekday, nth)| Item::Nth { weekday, nth }),
    ];
    prop_oneof![
        3 => field(Kind::Dow),
        1 => Just(FieldSpec { items: vec![], names: false, question: true }),
        1 => (prop::collection::vec(prop_oneof![special, plain_item(Kind::Dow)], 1..=2), any::<bool>())
            .prop_map(|(items, names)| FieldSpec { items, names, question: false }),
    ]
    .boxed()
}

/// Random expressions of the whole dialect (5, 6 or 7 fields).
pub fn expr() -> impl Strategy<Value = Expr> {
    (
        prop::option::weighted(0.25, field(Kind::Second)),
        field(Kind::Minute),
        field(Kind::Hour),
        dom_field(),
        field(Kind::Month),
        dow_field(),
        prop::option::weighted(0.15, field(Kind::Year)),
    )
        .prop_map(|(second, minute, hour, dom, month, dow, year)| Expr {
            // A year field needs a seconds field (7 fields).
            second: if year.is_some() && second.is_none() {
                Some(FieldSpec {
                    items: vec![Item::Range {
                        start: 0,
                        end: 0,
                        step: 1,
                    }],
                    names: false,
                    question: false,
                })
            } else {
                second
            },
            minute,
            hour,
            dom,
            month,
            dow,
            year,
        })
}

/// Daily expressions whose hours sit around the transitions the DST tests
/// use (all between 01:00 and 03:00 local), so fixed-time jobs meet gaps and folds.
pub fn near_transition_expr() -> impl Strategy<Value = Expr> {
    let hour_item = prop_oneof![
        (0u32..=3).prop_map(|v| Item::Range {
            start: v,
            end: v,
            step: 1
        }),
        (0u32..=3, 0u32..=3).prop_map(|(a, b)| Item::Range {
            start: a.min(b),
            end: a.max(b),
            step: 1
        }),
    ];
    let hour = prop_oneof![
        4 => prop::collection::vec(hour_item, 1..=2).prop_map(|items| FieldSpec { items, names: false, question: false }),
        1 => Just(FieldSpec { items: vec![Item::Star { step: 1 }], names: false, question: false }),
    ];
    let star = || FieldSpec {
        items: vec![Item::Star { step: 1 }],
        names: false,
        question: false,
    };
    (field(Kind::Minute), hour)
        .prop_map(move |(minute, hour)| Expr::five(minute, hour, star(), star(), star()))
}

/// Fixed-time expressions (a few hours and minutes) on random, often rare,
/// days: the wall-time enumeration test walks their candidates day by day.
pub fn fixed_rare_expr() -> impl Strategy<Value = Expr> {
    let few = |kind: Kind| {
        let (min, max) = kind.bounds();
        prop::collection::btree_set(min..=max, 1..=3).prop_map(|set| FieldSpec {
            items: set
                .into_iter()
                .map(|v| Item::Range {
                    start: v,
                    end: v,
                    step: 1,
                })
                .collect(),
            names: false,
            question: false,
        })
    };
    (
        few(Kind::Minute),
        few(Kind::Hour),
        dom_field(),
        field(Kind::Month),
        dow_field(),
    )
        .prop_map(|(minute, hour, dom, month, dow)| Expr::five(minute, hour, dom, month, dow))
}

/// Random five-field expressions without `L`/`W`/`#` or `?`: the dialect
/// croner shares (the oracle test filters out the forms croner reads or
/// spells differently).
pub fn shared_dialect_expr() -> impl Strategy<Value = Expr> {
    (
        field(Kind::Minute),
        field(Kind::Hour),
        field(Kind::Dom),
        field(Kind::Month),
        field(Kind::Dow),
    )
        .prop_map(|(minute, hour, dom, month, dow)| Expr::five(minute, hour, dom, month, dow))
}

/// Instants from 2000 to 2040, in epoch seconds, with random sub-seconds.
pub fn instant() -> impl Strategy<Value = (i64, i32)> {
    (
        946_684_800i64..2_208_988_800,
        prop_oneof![Just(0), 0i32..1_000_000_000],
    )
}
