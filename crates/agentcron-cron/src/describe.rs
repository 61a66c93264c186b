//! Human descriptions of schedules, in English and Chinese:
//! "At 09:00, Monday through Friday" / "周一至周五 09:00".

use crate::error::Field;
use crate::parse::{CronExpr, FieldExpr, Item};

/// The language of [`crate::Schedule::describe`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Lang {
    /// English.
    #[default]
    En,
    /// Simplified Chinese.
    Zh,
}

impl std::str::FromStr for Lang {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "en" => Ok(Lang::En),
            "zh" | "zh-cn" | "cn" => Ok(Lang::Zh),
            _ => Err(format!("unknown language `{s}` (expected en or zh)")),
        }
    }
}

/// Month names, January first (also used by parse errors).
pub(crate) const MONTHS_EN: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS_EN: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const DAYS_ZH: [&str; 7] = ["日", "一", "二", "三", "四", "五", "六"];
const ORDINALS_EN: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];

pub(crate) fn every(seconds: i64, lang: Lang) -> String {
    let units: [(i64, &str, &str); 4] = [
        (86_400, "day", "天"),
        (3_600, "hour", "小时"),
        (60, "minute", "分钟"),
        (1, "second", "秒"),
    ];
    let mut rest = seconds;
    let mut parts = Vec::new();
    for (size, en, zh) in units {
        let n = rest / size;
        rest %= size;
        if n > 0 {
            parts.push(match lang {
                Lang::En if n == 1 => format!("1 {en}"),
                Lang::En => format!("{n} {en}s"),
                Lang::Zh => format!("{n}{zh}"),
            });
        }
    }
    match lang {
        Lang::En => format!("Every {}", parts.join(" ")),
        Lang::Zh => format!("每{}", parts.join("")),
    }
}

/// Every value of a field given as plain single values (`1,3,5`), if it is so.
fn singles(f: &FieldExpr) -> Option<Vec<u32>> {
    f.items
        .iter()
        .map(|i| match *i {
            Item::Range {
                start,
                end,
                step: 1,
            } if start == end => Some(start),
            _ => None,
        })
        .collect()
}

fn single(f: &FieldExpr) -> Option<u32> {
    match singles(f)?.as_slice() {
        [v] => Some(*v),
        _ => None,
    }
}

fn join(items: &[String], and: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {and} {last}", init.join(", ")),
    }
}

fn clock(h: u32, m: u32, s: u32) -> String {
    if s == 0 {
        format!("{h:02}:{m:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// The fixed times of day, when second and minute are single and hour is a
/// list of single values.
fn fixed_times(e: &CronExpr) -> Option<Vec<String>> {
    let s = single(&e.second)?;
    let m = single(&e.minute)?;
    let hours = singles(&e.hour)?;
    Some(hours.into_iter().map(|h| clock(h, m, s)).collect())
}

pub(crate) fn cron(e: &CronExpr, lang: Lang) -> String {
    match lang {
        Lang::En => en::cron(e),
        Lang::Zh => zh::cron(e),
    }
}

mod en {
    use super::*;

    fn value(field: Field, v: u32) -> String {
        match field {
            Field::Month => MONTHS_EN[(v as usize + 11) % 12].to_string(),
            Field::DayOfWeek => DAYS_EN[v as usize % 7].to_string(),
            _ => v.to_string(),
        }
    }

    /// One list element, e.g. "5", "1 through 30", "every 5th from 1 through 30".
    fn item(field: Field, i: &Item) -> String {
        let (min, max) = match field {
            Field::DayOfWeek => (0, 6),
            f => f.range(),
        };
        match *i {
            Item::Range {
                start,
                end,
                step: 1,
            } if start == end => value(field, start),
            Item::Range {
                start,
                end,
                step: 1,
            } => {
                format!("{} through {}", value(field, start), value(field, end))
            }
            Item::Range { start, end, step } if end == max => {
                format!("every {step} starting at {}", value(field, start))
            }
            Item::Range { start, end, step } => format!(
                "every {step} from {} through {}",
                value(field, start),
                value(field, end)
            ),
            Item::Every { step } => format!("every {step} starting at {}", value(field, min)),
            Item::LastDay { offset: 0 } => "the last day".into(),
            Item::LastDay { offset } => format!("{offset} days before the last day"),
            Item::LastWeekday => "the last weekday".into(),
            Item::NearestWeekday(d) => format!("the weekday nearest day {d}"),
            Item::LastOf(w) => format!("the last {}", DAYS_EN[w as usize]),
            Item::Nth { weekday, nth } => format!(
                "the {} {}",
                ORDINALS_EN[nth as usize - 1],
                DAYS_EN[weekday as usize]
            ),
        }
    }

    fn list(f: &FieldExpr) -> String {
        let parts: Vec<String> = f.items.iter().map(|i| item(f.field, i)).collect();
        join(&parts, "and")
    }

    /// "every 5 minutes" when the field is exactly `*/5`.
    fn plain_step(f: &FieldExpr) -> Option<u32> {
        match f.items.as_slice() {
            [Item::Every { step }] if *step > 1 => Some(*step),
            _ => None,
        }
    }

    fn unit(f: &FieldExpr, one: &str, many: &str) -> String {
        if f.is_all() {
            return format!("every {one}");
        }
        if let Some(step) = plain_step(f) {
            return format!("every {step} {many}");
        }
        match single(f) {
            Some(v) => format!("at {v} {many} past the {}", past(f.field)),
            None => format!("at {many} {} past the {}", list(f), past(f.field)),
        }
    }

    fn past(field: Field) -> &'static str {
        if field == Field::Second {
            "minute"
        } else {
            "hour"
        }
    }

    fn time(e: &CronExpr) -> String {
        if let Some(times) = fixed_times(e) {
            return format!("At {}", join(&times, "and"));
        }
        let mut parts = Vec::new();
        let second_zero = single(&e.second) == Some(0);
        if !second_zero {
            parts.push(if e.second.is_all() {
                "every second".to_string()
            } else {
                unit(&e.second, "second", "seconds")
            });
        }
        if second_zero && single(&e.minute) == Some(0) && e.hour.is_all() {
            parts.push("every hour".into());
        } else if second_zero || !e.minute.is_all() {
            parts.push(unit(&e.minute, "minute", "minutes"));
        }
        if !e.hour.is_all() {
            parts.push(if let Some(step) = plain_step(&e.hour) {
                format!("every {step} hours")
            } else {
                match e.hour.items.as_slice() {
                    [
                        Item::Range {
                            start,
                            end,
                            step: 1,
                        },
                    ] if start != end => {
                        format!("between {} and {}", clock(*start, 0, 0), clock(*end, 59, 0))
                    }
                    [Item::Range { start, end, step }] if start != end => format!(
                        "every {step} hours, between {} and {}",
                        clock(*start, 0, 0),
                        clock(*end, 59, 0)
                    ),
                    _ => match single(&e.hour) {
                        Some(h) => format!("between {} and {}", clock(h, 0, 0), clock(h, 59, 0)),
                        None => format!("during hours {}", list(&e.hour)),
                    },
                }
            });
        }
        let mut text = parts.join(", ");
        if let Some(c) = text.get(..1) {
            text = c.to_ascii_uppercase() + &text[1..];
        }
        text
    }

    fn days_of_month(f: &FieldExpr) -> String {
        if let Some(step) = plain_step(f) {
            return format!("every {step} days");
        }
        if let [Item::LastDay { offset }] = f.items.as_slice()
            && *offset > 0
        {
            return format!("{offset} days before the last day of the month");
        }
        let special = f
            .items
            .iter()
            .all(|i| !matches!(i, Item::Range { .. } | Item::Every { .. }));
        if special {
            format!("on {} of the month", list(f))
        } else if single(f).is_some() {
            format!("on day {} of the month", list(f))
        } else {
            format!("on days {} of the month", list(f))
        }
    }

    fn days_of_week(f: &FieldExpr) -> String {
        match f.items.as_slice() {
            [
                Item::Range {
                    start,
                    end,
                    step: 1,
                },
            ] if start != end => {
                format!(
                    "{} through {}",
                    value(Field::DayOfWeek, *start),
                    value(Field::DayOfWeek, *end)
                )
            }
            [
                Item::Range {
                    start,
                    end,
                    step: 1,
                },
            ] if start == end => {
                format!("only on {}", value(Field::DayOfWeek, *start))
            }
            items
                if items
                    .iter()
                    .all(|i| matches!(i, Item::LastOf(_) | Item::Nth { .. })) =>
            {
                format!("on {} of the month", list(f))
            }
            _ => format!("on {}", list(f)),
        }
    }

    pub(super) fn cron(e: &CronExpr) -> String {
        let mut parts = vec![time(e)];
        let dom = (!e.dom.is_all()).then(|| days_of_month(&e.dom));
        let dow = (!e.dow.is_all()).then(|| days_of_week(&e.dow));
        match (dom, dow) {
            (Some(d), Some(w)) if !(e.dom.star || e.dow.star) => {
                parts.push(format!("{d}, or {}", w.trim_start_matches("only ")))
            }
            (d, w) => parts.extend(d.into_iter().chain(w)),
        }
        if !e.month.is_all() {
            parts.push(match (plain_step(&e.month), single(&e.month)) {
                (Some(step), _) => format!("every {step} months"),
                (_, Some(m)) => format!("only in {}", value(Field::Month, m)),
                _ => format!("in {}", list(&e.month)),
            });
        }
        if !e.year.is_all() {
            parts.push(match single(&e.year) {
                Some(y) => format!("only in {y}"),
                None => format!("in years {}", list(&e.year)),
            });
        }
        parts.join(", ")
    }
}

mod zh {
    use super::*;

    fn item(field: Field, i: &Item, suffix: &str) -> String {
        let v = |n: u32| match field {
            Field::DayOfWeek => format!("周{}", DAYS_ZH[n as usize % 7]),
            _ => format!("{n}{suffix}"),
        };
        match *i {
            Item::Range {
                start,
                end,
                step: 1,
            } if start == end => v(start),
            Item::Range {
                start,
                end,
                step: 1,
            } => format!("{}至{}", v(start), v(end)),
            Item::Range { start, end, step } if field == Field::Hour => {
                format!("{}至{}每{step}小时", v(start), v(end))
            }
            Item::Range { start, end, step } => {
                format!("{}至{}每隔{step}", v(start), v(end))
            }
            Item::Every { step } => format!("每{step}{suffix}"),
            Item::LastDay { offset: 0 } => "最后一天".into(),
            Item::LastDay { offset } => format!("最后一天前{offset}天"),
            Item::LastWeekday => "最后一个工作日".into(),
            Item::NearestWeekday(d) => format!("最接近{d}日的工作日"),
            Item::LastOf(w) => format!("最后一个周{}", DAYS_ZH[w as usize]),
            Item::Nth { weekday, nth } => format!("第{nth}个周{}", DAYS_ZH[weekday as usize]),
        }
    }

    fn list(f: &FieldExpr, suffix: &str) -> String {
        let parts: Vec<String> = f.items.iter().map(|i| item(f.field, i, suffix)).collect();
        parts.join("、")
    }

    fn time(e: &CronExpr) -> String {
        if let Some(times) = fixed_times(e) {
            return times.join("、");
        }
        let mut out = String::new();
        if !e.hour.is_all() {
            out += &match e.hour.items.as_slice() {
                [Item::Every { step }] => format!("每{step}小时"),
                _ => list(&e.hour, "点"),
            };
            out += if e.minute.is_all() { "" } else { "的" };
        }
        let second_zero = single(&e.second) == Some(0);
        out += &match (e.minute.items.as_slice(), single(&e.minute)) {
            _ if e.minute.is_all() && second_zero => "每分钟".to_string(),
            _ if e.minute.is_all() => String::new(),
            ([Item::Every { step }], _) => format!("每{step}分钟"),
            (_, Some(0)) if e.hour.is_all() && second_zero => "每小时".to_string(),
            _ => format!("第{}分钟", list(&e.minute, "")),
        };
        if !second_zero {
            out += &match e.second.items.as_slice() {
                _ if e.second.is_all() => "每秒".to_string(),
                [Item::Every { step }] => format!("每{step}秒"),
                _ => format!("第{}秒", list(&e.second, "")),
            };
        }
        out
    }

    pub(super) fn cron(e: &CronExpr) -> String {
        let mut date = String::new();
        if !e.year.is_all() {
            date += &list(&e.year, "年");
        }
        let month_all = e.month.is_all();
        if !month_all {
            date += &match e.month.items.as_slice() {
                [Item::Every { step }] => format!("每{step}个月"),
                _ => list(&e.month, "月"),
            };
        }
        let dom = (!e.dom.is_all()).then(|| match e.dom.items.as_slice() {
            [Item::Every { step }] => format!("每{step}天"),
            _ => {
                let prefix = if month_all { "每月" } else { "" };
                format!("{prefix}{}", list(&e.dom, "日"))
            }
        });
        let dow = (!e.dow.is_all()).then(|| {
            let monthly = e
                .dow
                .items
                .iter()
                .all(|i| matches!(i, Item::LastOf(_) | Item::Nth { .. }));
            match e.dow.items.as_slice() {
                _ if monthly && month_all => format!("每月{}", list(&e.dow, "")),
                [
                    Item::Range {
                        start,
                        end,
                        step: 1,
                    },
                ] if start != end => list(&e.dow, ""),
                _ => format!("每{}", list(&e.dow, "")),
            }
        });
        match (dom, dow) {
            (Some(d), Some(w)) if !(e.dom.star || e.dow.star) => date += &format!("{d}或{w}"),
            (Some(d), Some(w)) => date += &format!("{d}且{w}"),
            (Some(d), None) => date += &d,
            (None, Some(w)) => date += &w,
            (None, None) if fixed_times(e).is_some() => {
                if date.is_empty() {
                    date += "每天"
                }
            }
            (None, None) => {}
        }
        let time = time(e);
        if date.is_empty() {
            time
        } else if fixed_times(e).is_some() {
            format!("{date} {time}")
        } else {
            format!("{date}，{time}")
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Lang, Schedule};

    fn en(expr: &str) -> String {
        Schedule::parse(expr).expect("valid").describe(Lang::En)
    }
    fn zh(expr: &str) -> String {
        Schedule::parse(expr).expect("valid").describe(Lang::Zh)
    }

    #[test]
    fn english() {
        assert_eq!(en("0 9 * * 1-5"), "At 09:00, Monday through Friday");
        assert_eq!(en("0 9 * * MON-FRI"), "At 09:00, Monday through Friday");
        assert_eq!(en("*/5 * * * *"), "Every 5 minutes");
        assert_eq!(en("* * * * *"), "Every minute");
        assert_eq!(en("0 * * * *"), "Every hour");
        assert_eq!(en("0 0 L * *"), "At 00:00, on the last day of the month");
        assert_eq!(
            en("0 0 29 2 *"),
            "At 00:00, on day 29 of the month, only in February"
        );
        assert_eq!(en("0 30 2 * * *"), "At 02:30");
        assert_eq!(en("0 9,17 * * *"), "At 09:00 and 17:00");
        assert_eq!(
            en("0 0 * * FRI#2"),
            "At 00:00, on the second Friday of the month"
        );
        assert_eq!(
            en("0 0 * * 5L"),
            "At 00:00, on the last Friday of the month"
        );
        assert_eq!(
            en("0 0 LW * *"),
            "At 00:00, on the last weekday of the month"
        );
        assert_eq!(
            en("0 0 15W * *"),
            "At 00:00, on the weekday nearest day 15 of the month"
        );
        assert_eq!(
            en("0 9 * * 1,3,5"),
            "At 09:00, on Monday, Wednesday and Friday"
        );
        assert_eq!(
            en("15,45 */2 1-15 * MON-FRI"),
            "At minutes 15 and 45 past the hour, every 2 hours, on days 1 through 15 of the month, or Monday through Friday"
        );
        assert_eq!(en("*/10 * * * * *"), "Every 10 seconds");
        assert_eq!(
            en("0 0 9 1 1 * 2027"),
            "At 09:00, on day 1 of the month, only in January, only in 2027"
        );
        assert_eq!(en("@every 1h30m"), "Every 1 hour 30 minutes");
        assert_eq!(
            en("30 9-17 * * *"),
            "At 30 minutes past the hour, between 09:00 and 17:59"
        );
        assert_eq!(
            en("0 8-18/2 * * *"),
            "At 0 minutes past the hour, every 2 hours, between 08:00 and 18:59"
        );
        assert_eq!(
            en("0 0 L-3 * *"),
            "At 00:00, 3 days before the last day of the month"
        );
        assert_eq!(
            en("0 0 1-7 * 1"),
            "At 00:00, on days 1 through 7 of the month, or on Monday"
        );
    }

    #[test]
    fn chinese() {
        assert_eq!(zh("0 9 * * 1-5"), "周一至周五 09:00");
        assert_eq!(zh("0 9 * * *"), "每天 09:00");
        assert_eq!(zh("*/5 * * * *"), "每5分钟");
        assert_eq!(zh("* * * * *"), "每分钟");
        assert_eq!(zh("0 0 L * *"), "每月最后一天 00:00");
        assert_eq!(zh("0 0 29 2 *"), "2月29日 00:00");
        assert_eq!(zh("0 10 * * FRI#2"), "每月第2个周五 10:00");
        assert_eq!(zh("0 8 * * 1,3,5"), "每周一、周三、周五 08:00");
        assert_eq!(zh("@every 90s"), "每1分钟30秒");
        assert_eq!(zh("15,45 */2 * * *"), "每2小时的第15、45分钟");
        assert_eq!(zh("0 8-18/2 * * *"), "8点至18点每2小时的第0分钟");
    }
}
