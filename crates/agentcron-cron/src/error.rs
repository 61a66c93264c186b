//! The one error this crate returns: why an expression was rejected, and where.

use std::fmt;

/// A field of a cron expression, as named in error messages and descriptions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Seconds, 0–59 (6- and 7-field expressions only).
    Second,
    /// Minutes, 0–59.
    Minute,
    /// Hours, 0–23.
    Hour,
    /// Day of the month, 1–31.
    DayOfMonth,
    /// Month, 1–12 or `JAN`–`DEC`.
    Month,
    /// Day of the week, 0–7 (0 and 7 are Sunday) or `SUN`–`SAT`.
    DayOfWeek,
    /// Year, 1970–9999 (7-field expressions only).
    Year,
}

impl Field {
    /// The field's name as error messages spell it (`"day-of-month"`).
    pub fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
            Field::Year => "year",
        }
    }

    /// Inclusive range of values the field accepts.
    pub fn range(self) -> (u32, u32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 7),
            Field::Year => (1970, 9999),
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an expression was rejected: the field, the reason and the 1-based
/// column where the offending text starts.
///
/// Its `Display` is one line meant for people:
/// `hour field: 25 is out of range 0-23 (column 3)`.
///
/// ```
/// let err = agentcron_cron::Schedule::parse("0 25 * * *").unwrap_err();
/// assert_eq!(err.to_string(), "hour field: 25 is out of range 0-23 (column 3)");
/// assert_eq!(err.column(), Some(3));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    field: Option<Field>,
    column: Option<usize>,
    reason: String,
}

impl ParseError {
    pub(crate) fn new(
        field: Option<Field>,
        column: Option<usize>,
        reason: impl Into<String>,
    ) -> Self {
        ParseError {
            field,
            column,
            reason: reason.into(),
        }
    }

    /// Appends a hint to the reason.
    pub(crate) fn with_hint(mut self, hint: &str) -> Self {
        self.reason = format!("{}; {hint}", self.reason);
        self
    }

    /// The field at fault, when the problem lies in one field.
    pub fn field(&self) -> Option<Field> {
        self.field
    }

    /// The 1-based column (in characters) where the offending text starts.
    pub fn column(&self) -> Option<usize> {
        self.column
    }

    /// The reason alone, without field or column.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(field) = self.field {
            write!(f, "{field} field: ")?;
        }
        f.write_str(&self.reason)?;
        if let Some(column) = self.column {
            write!(f, " (column {column})")?;
        }
        Ok(())
    }
}
