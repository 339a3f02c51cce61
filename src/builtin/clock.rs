//! The `current_time` tool.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::tool::{FnTool, Parameters};

// ---------------------------------------------------------------------------
// current_time

/// The `current_time` tool: the current UTC time, with no arguments.
///
/// It returns the time as RFC 3339 with the weekday and the Unix time, e.g.
/// `2026-11-22T01:20:00Z (Sunday; Unix time 1795310400)`.
///
/// # Examples
///
/// ```
/// use pikuri::builtin::current_time;
/// use pikuri::{Tool, ToolContext};
/// let out = current_time().call(&serde_json::json!({}), &ToolContext::detached())?;
/// assert_eq!(out.find('T'), Some(10));
/// assert!(out.contains("Unix time "));
/// # Ok::<(), pikuri::ToolError>(())
/// ```
pub fn current_time() -> FnTool {
    FnTool::new(
        "current_time",
        "Returns the current date and time in UTC (RFC 3339), the weekday and the \
         Unix time.",
        Parameters::empty(),
        |_args, _cx| {
            let seconds = match SystemTime::now().duration_since(UNIX_EPOCH) {
                Ok(since) => i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
                Err(before) => -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX),
            };
            Ok(describe_time(seconds))
        },
    )
    // Reads the clock and changes nothing: a resumed run asks it again (and
    // gets the time of the resume, which is the time the model wants).
    .idempotent_calls()
}

const WEEKDAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];

pub(super) fn describe_time(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    // 1970-01-01 was a Thursday.
    let weekday = WEEKDAYS[days.rem_euclid(7) as usize];
    format!(
        "{} ({weekday}; Unix time {unix_seconds})",
        rfc3339(unix_seconds)
    )
}

/// `unix_seconds` as `YYYY-MM-DDThh:mm:ssZ`.
pub(super) fn rfc3339(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    let second_of_day = unix_seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// The proleptic Gregorian (year, month, day) of a count of days since
/// 1970-01-01.
///
/// The count is shifted to start on 0000-03-01, so that the leap day is the
/// last day of each shifted year, then split into 400-year eras of 146 097
/// days (the calendar repeats every era), the year within the era, and the
/// day within the year. Months from March have lengths 31 30 31 30 31 31 30
/// 31 30 31 31 (29|28), which `(153 * m + 2) / 5` lays out exactly.
#[allow(
    clippy::cast_sign_loss,
    reason = "month is 1..=12 and day 1..=31 by construction"
)]
pub(super) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    const DAYS_0000_03_01_TO_1970_01_01: i64 = 719_468;
    const DAYS_PER_ERA: i64 = 146_097;
    let shifted = days + DAYS_0000_03_01_TO_1970_01_01;
    let era = shifted.div_euclid(DAYS_PER_ERA);
    let day_of_era = shifted.rem_euclid(DAYS_PER_ERA); // 0..=146_096
    // Remove the leap days before `day_of_era` (one per 4 years, minus one per
    // 100, plus the era's last day), so dividing by 365 gives the year.
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100); // 0..=365
    let shifted_month = (5 * day_of_year + 2) / 153; // 0 = March ... 11 = February
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = era * 400 + year_of_era + i64::from(month <= 2);
    (year, month as u32, day as u32)
}
