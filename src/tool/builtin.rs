//! Built-in tools: a calculator, the current time, and read-only access to
//! one directory tree.
//!
//! Each function returns a ready tool; [`all`] returns all four for one root
//! directory.
//!
//! # Examples
//!
//! ```
//! use pikuri::tool::builtin;
//! use pikuri::{Tool, ToolContext};
//! use serde_json::json;
//!
//! let tools = builtin::all(std::env::temp_dir());
//! let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
//! assert_eq!(names, ["calculator", "current_time", "read_file", "list_dir"]);
//!
//! let calc = builtin::calculator();
//! let out = calc.call(&json!({"expression": "2 + 3 * 4"}), &ToolContext::detached())?;
//! assert_eq!(out, "14");
//! # Ok::<(), pikuri::ToolError>(())
//! ```
//!
//! # Confinement of the file tools
//!
//! [`read_file`] and [`list_dir`] see only the tree under the `root` they
//! were built with. A `path` argument:
//!
//! - is relative to `root`; an absolute path (`/etc/passwd`, or on Windows
//!   `C:\x` and `\x`) is refused;
//! - may not contain a `..` component at all, even one that would stay inside
//!   (`a/../b`): the model can always send the plain path;
//! - is resolved with every symbolic link followed (the root too), and the
//!   result must lie under the resolved root. A link to somewhere else inside
//!   the tree works; a link that leads out of it is refused.
//!
//! Messages name the path as the model wrote it and never show the host's
//! absolute root path.
//!
//! This guards against a model (or a prompt injected into what it read)
//! wandering into `~/.ssh`; it is not a sandbox against a local process
//! that can write inside the root while a call runs: between the check and
//! the open, such a process could swap a directory for a link. Run
//! untrusted work under the operating system's own isolation.
//!
//! Reads are capped ([`ReadFile::max_bytes`], [`ListDir::max_entries`]) so one
//! call cannot flood the context window; the output says when it was cut.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::{FnTool, Parameters, Tool, ToolContext, ToolError, excerpt};

/// All four built-in tools, the file tools confined to `root`.
///
/// In order: [`calculator`], [`current_time`], [`read_file`], [`list_dir`].
///
/// # Examples
///
/// ```
/// let tools = pikuri::tool::builtin::all(".");
/// assert_eq!(tools.len(), 4);
/// ```
pub fn all(root: impl Into<PathBuf>) -> Vec<Arc<dyn Tool>> {
    let root = root.into();
    vec![
        Arc::new(calculator()),
        Arc::new(current_time()),
        Arc::new(read_file(root.clone())),
        Arc::new(list_dir(root)),
    ]
}

// ---------------------------------------------------------------------------
// calculator

/// The longest expression the calculator accepts, in characters.
const MAX_EXPRESSION_CHARS: usize = 1000;
/// How deeply parentheses, signs and powers may nest.
const MAX_DEPTH: usize = 64;
/// Integers up to this magnitude are exact in an `f64` and printed in full.
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53

/// The `calculator` tool: evaluates an arithmetic expression.
///
/// It takes `expression` and knows `+ - * / % ^` (`**` is accepted for `^`)
/// with the usual precedence, `^` binding tighter than a sign and grouping to
/// the right (`-2^2` is -4, `2^3^2` is 512), parentheses, decimals and `1e3`
/// notation. `%` is the remainder with the sign of the dividend.
///
/// The result is computed in `f64`. Integers up to 2^53 are printed exactly
/// and without a fraction (`"4"`); other results are rounded to 15
/// significant digits (`0.1 + 0.2` gives `"0.3"`), and very large or small
/// magnitudes use exponent notation (`"1e300"`).
///
/// Division or remainder by zero, a syntax error, a result that overflows or
/// is not a real number, an expression over 1000 characters or nested more
/// than 64 levels deep are [`ToolError`]s that say what is wrong.
///
/// # Examples
///
/// ```
/// use pikuri::tool::builtin::calculator;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let calc = calculator();
/// let cx = ToolContext::detached();
/// assert_eq!(calc.call(&json!({"expression": "2 + 3 * 4"}), &cx)?, "14");
/// assert_eq!(calc.call(&json!({"expression": "2^-1"}), &cx)?, "0.5");
/// assert_eq!(calc.call(&json!({"expression": "-(1.5 + 1.25)"}), &cx)?, "-2.75");
/// let err = calc.call(&json!({"expression": "1/0"}), &cx).unwrap_err();
/// assert_eq!(err.message(), "division by zero");
/// # Ok::<(), pikuri::ToolError>(())
/// ```
pub fn calculator() -> FnTool {
    FnTool::new(
        "calculator",
        "Evaluates an arithmetic expression and returns the number. Supports + - * / \
         % (remainder) ^ (power), parentheses, decimals and 1e3 notation, e.g. \
         `(2 + 3) * 4^2 / 7`.",
        Parameters::builder()
            .required_string("expression", "The expression, e.g. `(2 + 3) * 4`.")
            .build(),
        |args, _cx| {
            let expression = args["expression"].as_str().unwrap_or_default();
            evaluate(expression)
                .map(format_number)
                .map_err(ToolError::new)
        },
    )
}

/// Evaluate an expression; the error is the message for the model.
fn evaluate(expression: &str) -> Result<f64, String> {
    let chars = expression.chars().count();
    if chars > MAX_EXPRESSION_CHARS {
        return Err(format!(
            "the expression is too long ({chars} characters; the limit is \
             {MAX_EXPRESSION_CHARS})"
        ));
    }
    if expression.trim().is_empty() {
        return Err("the expression is empty".to_string());
    }
    let mut parser = Parser {
        text: expression,
        pos: 0,
        depth: 0,
    };
    let value = parser.expr()?;
    parser.skip_whitespace();
    if parser.pos < expression.len() {
        return Err(parser.unexpected());
    }
    Ok(value)
}

/// A recursive-descent parser that evaluates as it goes.
///
/// ```text
/// expr    = term (("+" | "-") term)*
/// term    = unary (("*" | "/" | "%") unary)*
/// unary   = ("-" | "+") unary | power
/// power   = primary (("^" | "**") unary)?
/// primary = number | "(" expr ")"
/// ```
///
/// Every nesting goes through `unary`, which counts the depth.
struct Parser<'a> {
    text: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn expr(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        loop {
            self.skip_whitespace();
            let op = match self.peek() {
                Some(b'+') => '+',
                Some(b'-') => '-',
                _ => return Ok(value),
            };
            self.pos += 1;
            let rhs = self.term()?;
            value = finite(if op == '+' { value + rhs } else { value - rhs })?;
        }
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        loop {
            self.skip_whitespace();
            let op = match self.peek() {
                Some(b'*') => '*',
                Some(b'/') => '/',
                Some(b'%') => '%',
                _ => return Ok(value),
            };
            self.pos += 1;
            let rhs = self.unary()?;
            value = match op {
                '*' => finite(value * rhs)?,
                _ if rhs == 0.0 => {
                    return Err(if op == '/' {
                        "division by zero".to_string()
                    } else {
                        "remainder (%) by zero".to_string()
                    });
                }
                '/' => finite(value / rhs)?,
                _ => finite(value % rhs)?,
            };
        }
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "the expression is nested too deeply (more than {MAX_DEPTH} levels of \
                 parentheses, signs or powers)"
            ));
        }
        self.skip_whitespace();
        let value = match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                -self.unary()?
            }
            Some(b'+') => {
                self.pos += 1;
                self.unary()?
            }
            _ => self.power()?,
        };
        self.depth -= 1;
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.primary()?;
        self.skip_whitespace();
        if self.peek() == Some(b'^') {
            self.pos += 1;
        } else if self.text[self.pos..].starts_with("**") {
            self.pos += 2;
        } else {
            return Ok(base);
        }
        let exponent = self.unary()?;
        if base < 0.0 && exponent.fract() != 0.0 {
            return Err(
                "a negative number raised to a fractional power is not a real number".to_string(),
            );
        }
        if base == 0.0 && exponent < 0.0 {
            return Err("division by zero (0 raised to a negative power)".to_string());
        }
        finite(base.powf(exponent))
    }

    fn primary(&mut self) -> Result<f64, String> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                let value = self.expr()?;
                self.skip_whitespace();
                if self.peek() == Some(b')') {
                    self.pos += 1;
                    Ok(value)
                } else if self.peek().is_none() {
                    Err("missing `)` at the end of the expression".to_string())
                } else {
                    Err(self.unexpected())
                }
            }
            Some(b'0'..=b'9' | b'.') => self.number(),
            None => Err("the expression ends early: expected a number or `(`".to_string()),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn number(&mut self) -> Result<f64, String> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.pos += 1;
            }
            p.pos - from
        };
        let mut mantissa_digits = digits(self);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            mantissa_digits += digits(self);
        }
        let mut well_formed = mantissa_digits > 0;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            well_formed &= digits(self) > 0;
        }
        let literal = &self.text[start..self.pos];
        if !well_formed {
            return Err(format!("malformed number `{literal}`"));
        }
        match literal.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(value),
            _ => Err(format!("the number `{literal}` is too large")),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// The error for the character at `pos` (which exists).
    fn unexpected(&self) -> String {
        let c = self.text[self.pos..].chars().next().unwrap_or(' ');
        let column = self.text[..self.pos].chars().count() + 1;
        format!("unexpected `{c}` at character {column}")
    }
}

fn finite(value: f64) -> Result<f64, String> {
    if value.is_finite() {
        Ok(value)
    } else if value.is_nan() {
        Err("the result is not a number".to_string())
    } else {
        Err("the result is too large (overflow)".to_string())
    }
}

/// `4` not `4.0`; integers to 2^53 exact; otherwise 15 significant digits.
fn format_number(value: f64) -> String {
    if value == 0.0 {
        return "0".to_string(); // also -0
    }
    if value.fract() == 0.0 && value.abs() <= EXACT_INTEGER_LIMIT {
        return format!("{}", value as i64);
    }
    // Round to 15 significant digits, which hides binary noise such as
    // 0.1 + 0.2 = 0.30000000000000004, then print the shortest form.
    let rounded: f64 = format!("{value:.14e}").parse().unwrap_or(value);
    let magnitude = rounded.abs();
    if (1e-6..1e16).contains(&magnitude) {
        format!("{rounded}")
    } else {
        format!("{rounded:e}")
    }
}

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
/// use pikuri::tool::builtin::current_time;
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

fn describe_time(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    // 1970-01-01 was a Thursday.
    let weekday = WEEKDAYS[days.rem_euclid(7) as usize];
    format!(
        "{} ({weekday}; Unix time {unix_seconds})",
        rfc3339(unix_seconds)
    )
}

/// `unix_seconds` as `YYYY-MM-DDThh:mm:ssZ`.
fn rfc3339(unix_seconds: i64) -> String {
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
fn civil_from_days(days: i64) -> (i64, u32, u32) {
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

// ---------------------------------------------------------------------------
// file tools

/// Default cap of [`ReadFile`]: 256 KiB.
const DEFAULT_MAX_BYTES: usize = 256 * 1024;
/// Default cap of [`ListDir`].
const DEFAULT_MAX_ENTRIES: usize = 500;
/// How many characters of a path argument are quoted in messages.
const PATH_EXCERPT: usize = 120;

/// The `read_file` tool, confined to `root`; see [`ReadFile`].
///
/// # Examples
///
/// ```
/// use pikuri::tool::builtin::read_file;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let tool = read_file(std::env::temp_dir());
/// let cx = ToolContext::detached();
/// let err = tool.call(&json!({"path": "../etc/passwd"}), &cx).unwrap_err();
/// assert!(err.message().contains("`..`"));
/// let err = tool.call(&json!({"path": "/etc/passwd"}), &cx).unwrap_err();
/// assert!(err.message().contains("absolute"));
/// ```
pub fn read_file(root: impl Into<PathBuf>) -> ReadFile {
    ReadFile {
        root: root.into(),
        max_bytes: DEFAULT_MAX_BYTES,
        description: ReadFile::describe(DEFAULT_MAX_BYTES),
        parameters: Parameters::builder()
            .required_string(
                "path",
                "The file's path relative to the workspace root, e.g. `src/main.rs`.",
            )
            .build(),
    }
}

/// The `list_dir` tool, confined to `root`; see [`ListDir`].
///
/// # Examples
///
/// ```
/// use pikuri::tool::builtin::list_dir;
/// use pikuri::{Tool, ToolContext};
/// let tool = list_dir(std::env::temp_dir());
/// assert!(tool.parameters().validate(&serde_json::json!({})).is_ok()); // `path` is optional
/// ```
pub fn list_dir(root: impl Into<PathBuf>) -> ListDir {
    ListDir {
        root: root.into(),
        max_entries: DEFAULT_MAX_ENTRIES,
        parameters: Parameters::builder()
            .optional_string(
                "path",
                "The directory relative to the workspace root; the root itself if left out.",
            )
            .build(),
    }
}

/// Reads a text file under a root directory (the tool `read_file`).
///
/// Argument `path`, relative to the root and confined to it as the [module
/// docs](self#confinement-of-the-file-tools) describe. At most
/// [`max_bytes`](ReadFile::max_bytes) bytes are read (256 KiB by default);
/// a longer file is cut and the output ends with `[truncated at N bytes ...]`.
/// Bytes that are not UTF-8 are replaced by U+FFFD, with a note. A missing
/// file, a directory or a special file is a [`ToolError`].
///
/// # Examples
///
/// ```
/// use pikuri::tool::builtin::read_file;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let root = std::env::temp_dir().join(format!("pikuri-doc-read-{}", std::process::id()));
/// std::fs::create_dir_all(&root).unwrap();
/// std::fs::write(root.join("notes.txt"), "hello").unwrap();
///
/// let tool = read_file(&root).max_bytes(4);
/// let out = tool.call(&json!({"path": "notes.txt"}), &ToolContext::detached())?;
/// assert_eq!(out, "hell\n\n[truncated at 4 bytes; the file has 5 bytes]");
/// # std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), pikuri::ToolError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReadFile {
    root: PathBuf,
    max_bytes: usize,
    description: String,
    parameters: Parameters,
}

impl ReadFile {
    /// Read at most `max_bytes` bytes of a file (default 256 KiB).
    #[must_use]
    pub fn max_bytes(mut self, max_bytes: usize) -> ReadFile {
        self.max_bytes = max_bytes;
        self.description = ReadFile::describe(max_bytes);
        self
    }

    fn describe(max_bytes: usize) -> String {
        format!(
            "Reads a text file under the workspace root and returns its contents. `path` \
             is relative to the root; absolute paths and `..` are refused. Only the first \
             {max_bytes} bytes of a larger file are returned."
        )
    }
}

impl Tool for ReadFile {
    fn name(&self) -> &'static str {
        "read_file"
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    fn call(&self, args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
        let path = args["path"].as_str().unwrap_or_default();
        if path.trim().is_empty() {
            return Err(ToolError::new(
                "`path` is empty; give a file path relative to the root",
            ));
        }
        let shown = excerpt(path, PATH_EXCERPT);
        let target = resolve(&self.root, path)?;
        let metadata = fs::metadata(&target).map_err(|e| io_error(&shown, &e))?;
        if metadata.is_dir() {
            return Err(ToolError::new(format!(
                "`{shown}` is a directory, not a file (list_dir shows what it contains)"
            )));
        }
        if !metadata.is_file() {
            return Err(ToolError::new(format!("`{shown}` is not a regular file")));
        }
        let mut bytes = Vec::new();
        let limit = u64::try_from(self.max_bytes).unwrap_or(u64::MAX);
        fs::File::open(&target)
            .and_then(|file| file.take(limit.saturating_add(1)).read_to_end(&mut bytes))
            .map_err(|e| io_error(&shown, &e))?;
        let truncated = bytes.len() > self.max_bytes;
        if truncated {
            bytes.truncate(self.max_bytes);
            drop_partial_char(&mut bytes);
        }
        if bytes.is_empty() && !truncated {
            return Ok("[the file is empty]".to_string());
        }
        let mut out = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let mut text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                text.push_str(
                    "\n\n[note: the file is not valid UTF-8; invalid bytes are shown as U+FFFD]",
                );
                text
            }
        };
        if truncated {
            let _ = write!(
                out,
                "{}[truncated at {} bytes; the file has {} bytes]",
                if out.is_empty() { "" } else { "\n\n" },
                self.max_bytes,
                metadata.len()
            );
        }
        Ok(out)
    }
}

/// Lists a directory under a root directory (the tool `list_dir`).
///
/// Argument `path`, optional (the root itself when left out), relative to the
/// root and confined to it as the [module
/// docs](self#confinement-of-the-file-tools) describe. Entries come one per
/// line, sorted by name, directories (and links to directories) with a
/// trailing `/`. At most [`max_entries`](ListDir::max_entries) are listed
/// (500 by default), then a note says how many were left out.
///
/// # Examples
///
/// ```
/// use pikuri::tool::builtin::list_dir;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let root = std::env::temp_dir().join(format!("pikuri-doc-list-{}", std::process::id()));
/// std::fs::create_dir_all(root.join("src")).unwrap();
/// std::fs::write(root.join("README.md"), "").unwrap();
///
/// let out = list_dir(&root).call(&json!({}), &ToolContext::detached())?;
/// assert_eq!(out, "README.md\nsrc/");
/// # std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), pikuri::ToolError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ListDir {
    root: PathBuf,
    max_entries: usize,
    parameters: Parameters,
}

impl ListDir {
    /// List at most `max_entries` entries of a directory (default 500).
    #[must_use]
    pub fn max_entries(mut self, max_entries: usize) -> ListDir {
        self.max_entries = max_entries;
        self
    }
}

impl Tool for ListDir {
    fn name(&self) -> &'static str {
        "list_dir"
    }

    fn description(&self) -> &'static str {
        "Lists the entries of a directory under the workspace root, one per line, \
         directories with a trailing `/`. `path` is relative to the root (default: the \
         root itself); absolute paths and `..` are refused."
    }

    fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    fn call(&self, args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .unwrap_or(".");
        let shown = excerpt(path, PATH_EXCERPT);
        let target = resolve(&self.root, path)?;
        if !target.is_dir() {
            return Err(ToolError::new(format!(
                "`{shown}` is not a directory (read_file reads files)"
            )));
        }
        let mut names = Vec::new();
        for entry in fs::read_dir(&target).map_err(|e| io_error(&shown, &e))? {
            let entry = entry.map_err(|e| io_error(&shown, &e))?;
            let mut name = printable(&entry.file_name().to_string_lossy());
            let is_dir = entry
                .file_type()
                .is_ok_and(|t| t.is_dir() || (t.is_symlink() && entry.path().is_dir()));
            if is_dir {
                name.push('/');
            }
            names.push(name);
        }
        if names.is_empty() {
            return Ok("[the directory is empty]".to_string());
        }
        names.sort_unstable();
        let total = names.len();
        let mut out = names
            .iter()
            .take(self.max_entries)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n");
        if total > self.max_entries {
            let _ = write!(
                out,
                "\n[... {} more entries not shown; {total} in all]",
                total - self.max_entries
            );
        }
        Ok(out)
    }
}

/// Resolve a model-supplied relative path under `root`, following symbolic
/// links, and refuse anything outside it. See the module docs.
fn resolve(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    let shown = excerpt(path, PATH_EXCERPT);
    for component in Path::new(path).components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(ToolError::new(format!(
                    "`{shown}` is an absolute path; give a path relative to the root \
                     directory, e.g. `src/main.rs`"
                )));
            }
            Component::ParentDir => {
                return Err(ToolError::new(format!(
                    "`{shown}` contains `..`; only paths inside the root directory are \
                     allowed, written without `..`"
                )));
            }
            Component::CurDir | Component::Normal(_) => {}
        }
    }
    let root = root
        .canonicalize()
        .map_err(|e| ToolError::new(format!("the tool's root directory is not accessible: {e}")))?;
    let target = root
        .join(path)
        .canonicalize()
        .map_err(|e| io_error(&shown, &e))?;
    if !target.starts_with(&root) {
        return Err(ToolError::new(format!(
            "`{shown}` leads outside the root directory through a symbolic link; \
             only files under the root are accessible"
        )));
    }
    Ok(target)
}

fn io_error(shown: &str, error: &io::Error) -> ToolError {
    ToolError::new(match error.kind() {
        io::ErrorKind::NotFound => format!("`{shown}` does not exist"),
        io::ErrorKind::PermissionDenied => format!("permission denied for `{shown}`"),
        _ => format!("cannot read `{shown}`: {error}"),
    })
}

/// After a cut at an arbitrary byte, drop an incomplete UTF-8 sequence at the
/// end, so the cut does not show up as a U+FFFD.
fn drop_partial_char(bytes: &mut Vec<u8>) {
    let tail = bytes.len().saturating_sub(3);
    for start in (tail..bytes.len()).rev() {
        if bytes[start] & 0xC0 != 0x80 {
            // `start` begins the last character (or is ASCII).
            if let Err(e) = std::str::from_utf8(&bytes[start..])
                && e.error_len().is_none()
            {
                bytes.truncate(start);
            }
            return;
        }
    }
}

/// A file name with control characters escaped, so that each entry stays on
/// one line.
fn printable(name: &str) -> String {
    if !name.chars().any(char::is_control) {
        return name.to_string();
    }
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn calc(expression: &str) -> Result<String, String> {
        calculator()
            .call(
                &json!({ "expression": expression }),
                &ToolContext::detached(),
            )
            .map_err(|e| e.message().to_string())
    }

    #[test]
    fn calculator_precedence_and_associativity() {
        for (expression, expected) in [
            ("2 + 3 * 4", "14"),
            ("(2 + 3) * 4", "20"),
            ("10 - 4 - 3", "3"),
            ("100 / 10 / 5", "2"),
            ("2 ^ 3 ^ 2", "512"),
            ("2 ** 3 ** 2", "512"),
            ("(2 ^ 3) ^ 2", "64"),
            ("-2 ^ 2", "-4"),
            ("(-2) ^ 2", "4"),
            ("2 ^ -1", "0.5"),
            ("2^-1", "0.5"),
            ("-3", "-3"),
            ("--3", "3"),
            ("+3", "3"),
            ("-(1.5 + 1.25)", "-2.75"),
            ("3 * -2", "-6"),
            ("7 % 3", "1"),
            ("-7 % 3", "-1"),
            ("7.5 % 2", "1.5"),
            ("2 + 3 % 2", "3"),
            ("1 / 4", "0.25"),
            (".5 + 1.", "1.5"),
            ("1e3 + 2.5E-1", "1000.25"),
            ("\t 1\n+\r2 ", "3"),
            ("0.1 + 0.2", "0.3"),
            ("1 / 3", "0.333333333333333"),
            ("2 ^ 53", "9007199254740992"),
            ("2 ^ 53 - 1", "9007199254740991"),
            ("-(2 ^ 53)", "-9007199254740992"),
            ("2 ^ 60", "1.15292150460685e18"),
            ("10 ^ 300", "1e300"),
            ("1 / 10 ^ 9", "1e-9"),
            ("0 * -1", "0"),
            ("4 ^ 0.5", "2"),
        ] {
            assert_eq!(
                calc(expression).as_deref().map_err(String::as_str),
                Ok(expected),
                "{expression}"
            );
        }
    }

    #[test]
    fn calculator_errors() {
        for (expression, expected) in [
            ("1/0", "division by zero"),
            ("5%0", "remainder (%) by zero"),
            ("5 % (1 - 1)", "remainder (%) by zero"),
            ("(1", "missing `)` at the end of the expression"),
            ("(1 2)", "unexpected `2` at character 4"),
            ("1)", "unexpected `)` at character 2"),
            ("1 +", "the expression ends early: expected a number or `(`"),
            ("", "the expression is empty"),
            ("   ", "the expression is empty"),
            ("2 x 3", "unexpected `x` at character 3"),
            ("2 × 3", "unexpected `×` at character 3"),
            ("2(3)", "unexpected `(` at character 2"),
            ("1.2.3", "unexpected `.` at character 4"),
            (".", "malformed number `.`"),
            ("1e", "malformed number `1e`"),
            ("1e+", "malformed number `1e+`"),
            ("1e999", "the number `1e999` is too large"),
            ("10 ^ 400", "the result is too large (overflow)"),
            ("1e300 * 1e300", "the result is too large (overflow)"),
            ("-1e308 - 1e308", "the result is too large (overflow)"),
            (
                "(-8) ^ (1/3)",
                "a negative number raised to a fractional power is not a real number",
            ),
            ("0 ^ -1", "division by zero (0 raised to a negative power)"),
        ] {
            assert_eq!(
                calc(expression).as_deref().map_err(String::as_str),
                Err(expected),
                "{expression}"
            );
        }
    }

    #[test]
    fn calculator_limits() {
        let nested = |n: usize| format!("{}1{}", "(".repeat(n), ")".repeat(n));
        assert_eq!(
            calc(&nested(60)).as_deref().map_err(String::as_str),
            Ok("1")
        );
        let err = calc(&nested(100)).unwrap_err();
        assert!(err.contains("nested too deeply"), "{err}");
        let err = calc(&format!("{}1", "-".repeat(500))).unwrap_err();
        assert!(err.contains("nested too deeply"), "{err}");
        let err = calc(&vec!["2"; 300].join("^")).unwrap_err();
        assert!(err.contains("nested too deeply"), "{err}");
        // Long but flat is fine up to the length limit.
        assert_eq!(
            calc(&vec!["1"; 500].join("+"))
                .as_deref()
                .map_err(String::as_str),
            Ok("500")
        );
        let err = calc(&"1+".repeat(100_000)).unwrap_err();
        assert_eq!(
            err,
            "the expression is too long (200000 characters; the limit is 1000)"
        );
        // Deep nesting far past the limit fails cleanly, not with a stack overflow.
        assert!(calc(&"(".repeat(999)).is_err());
    }

    #[test]
    fn formats_numbers() {
        assert_eq!(format_number(4.0), "4");
        assert_eq!(format_number(-0.0), "0");
        assert_eq!(format_number(0.5), "0.5");
        assert_eq!(format_number(-2.75), "-2.75");
        assert_eq!(format_number(1e16), "1e16");
        assert_eq!(format_number(123_456.789), "123456.789");
        assert_eq!(format_number(1.5e-7), "1.5e-7");
    }

    #[test]
    fn rfc3339_known_instants() {
        for (seconds, expected) in [
            (0, "1970-01-01T00:00:00Z"),
            (-1, "1969-12-31T23:59:59Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_000_000_000, "2001-09-09T01:46:40Z"),
            (2_147_483_648, "2038-01-19T03:14:08Z"),
            (4_107_542_400, "2100-03-01T00:00:00Z"),
            (-2_208_988_800, "1900-01-01T00:00:00Z"),
            (253_402_300_799, "9999-12-31T23:59:59Z"),
        ] {
            assert_eq!(rfc3339(seconds), expected, "{seconds}");
        }
        assert_eq!(
            describe_time(1_795_310_400),
            "2026-11-22T01:20:00Z (Sunday; Unix time 1795310400)"
        );
    }

    /// Check `civil_from_days` against a plain day-by-day calendar walk.
    #[test]
    fn civil_from_days_matches_a_naive_calendar() {
        fn month_len(year: i64, month: u32) -> u32 {
            match month {
                2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            }
        }
        let (mut y, mut m, mut d) = (1970_i64, 1_u32, 1_u32);
        for days in 0..150_000 {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            d += 1;
            if d > month_len(y, m) {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
        let (mut y, mut m, mut d) = (1970_i64, 1_u32, 1_u32);
        for days in (-150_000..=0).rev() {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            if d == 1 {
                if m == 1 {
                    m = 12;
                    y -= 1;
                } else {
                    m -= 1;
                }
                d = month_len(y, m);
            } else {
                d -= 1;
            }
        }
    }

    #[test]
    fn current_time_is_now() {
        let out = current_time()
            .call(&json!({}), &ToolContext::detached())
            .unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let unix: u64 = out
            .rsplit(' ')
            .next()
            .unwrap()
            .trim_end_matches(')')
            .parse()
            .unwrap();
        assert!(now.abs_diff(unix) < 5, "{out}");
        assert!(
            out.starts_with(&rfc3339(i64::try_from(unix).unwrap())),
            "{out}"
        );
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "pikuri-builtin-{name}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn read(tool: &ReadFile, path: &str) -> Result<String, String> {
        tool.call(&json!({ "path": path }), &ToolContext::detached())
            .map_err(|e| e.message().to_string())
    }

    fn list(tool: &ListDir, args: &Value) -> Result<String, String> {
        tool.call(args, &ToolContext::detached())
            .map_err(|e| e.message().to_string())
    }

    #[test]
    fn read_file_reads_inside_the_root() {
        let dir = TempDir::new("read");
        fs::create_dir_all(dir.0.join("sub")).unwrap();
        fs::write(dir.0.join("sub/a.txt"), "alpha\n").unwrap();
        fs::write(dir.0.join("empty"), "").unwrap();
        let tool = read_file(&dir.0);
        assert_eq!(
            read(&tool, "sub/a.txt").as_deref().map_err(String::as_str),
            Ok("alpha\n")
        );
        assert_eq!(
            read(&tool, "./sub/./a.txt")
                .as_deref()
                .map_err(String::as_str),
            Ok("alpha\n")
        );
        assert_eq!(
            read(&tool, "empty").as_deref().map_err(String::as_str),
            Ok("[the file is empty]")
        );
        assert_eq!(
            read(&tool, "missing.txt")
                .as_deref()
                .map_err(String::as_str),
            Err("`missing.txt` does not exist")
        );
        assert_eq!(
            read(&tool, "sub").as_deref().map_err(String::as_str),
            Err("`sub` is a directory, not a file (list_dir shows what it contains)")
        );
        assert_eq!(
            read(&tool, " ").as_deref().map_err(String::as_str),
            Err("`path` is empty; give a file path relative to the root")
        );
    }

    #[test]
    fn read_file_refuses_escapes() {
        let dir = TempDir::new("escape");
        fs::create_dir_all(dir.0.join("sub")).unwrap();
        fs::write(dir.0.join("sub/a.txt"), "alpha").unwrap();
        let tool = read_file(dir.0.join("sub"));
        for path in ["../sub/a.txt", "x/../a.txt", "..", "a.txt/.."] {
            let err = read(&tool, path).unwrap_err();
            assert!(err.contains("contains `..`"), "{path}: {err}");
        }
        let absolute = dir.0.join("sub/a.txt");
        let err = read(&tool, absolute.to_str().unwrap()).unwrap_err();
        assert!(err.contains("is an absolute path"), "{err}");
        assert!(read(&tool, "/etc/passwd").unwrap_err().contains("absolute"));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_may_not_lead_out_of_the_root() {
        use std::os::unix::fs::symlink;
        let dir = TempDir::new("symlink");
        let root = dir.0.join("root");
        fs::create_dir_all(root.join("inner")).unwrap();
        fs::write(dir.0.join("secret.txt"), "secret").unwrap();
        fs::write(root.join("inner/ok.txt"), "ok").unwrap();
        symlink(dir.0.join("secret.txt"), root.join("out.txt")).unwrap();
        symlink(&dir.0, root.join("outdir")).unwrap();
        symlink(root.join("inner/ok.txt"), root.join("in.txt")).unwrap();
        symlink("inner", root.join("indir")).unwrap();

        let tool = read_file(&root);
        assert_eq!(
            read(&tool, "in.txt").as_deref().map_err(String::as_str),
            Ok("ok")
        );
        assert_eq!(
            read(&tool, "indir/ok.txt")
                .as_deref()
                .map_err(String::as_str),
            Ok("ok")
        );
        for path in ["out.txt", "outdir/secret.txt"] {
            let err = read(&tool, path).unwrap_err();
            assert!(err.contains("leads outside the root"), "{path}: {err}");
            assert!(!err.contains("secret\""), "{err}");
        }
        let lister = list_dir(&root);
        let err = list(&lister, &json!({"path": "outdir"})).unwrap_err();
        assert!(err.contains("leads outside the root"), "{err}");
        assert_eq!(
            list(&lister, &json!({})).as_deref().map_err(String::as_str),
            Ok("in.txt\nindir/\ninner/\nout.txt\noutdir/")
        );

        // The root itself may be a link; it is resolved too.
        let linked_root = dir.0.join("linked-root");
        symlink(&root, &linked_root).unwrap();
        assert_eq!(
            read(&read_file(&linked_root), "in.txt")
                .as_deref()
                .map_err(String::as_str),
            Ok("ok")
        );
    }

    #[test]
    fn read_file_caps_and_cuts_cleanly() {
        let dir = TempDir::new("cap");
        fs::write(dir.0.join("big.txt"), "a".repeat(300 * 1024)).unwrap();
        let out = read(&read_file(&dir.0), "big.txt").unwrap();
        assert!(
            out.ends_with("\n\n[truncated at 262144 bytes; the file has 307200 bytes]"),
            "{}",
            &out[out.len() - 100..]
        );
        assert_eq!(out.split("\n\n[").next().unwrap(), "a".repeat(262_144));

        // A cut in the middle of a multi-byte character drops the partial one.
        fs::write(dir.0.join("utf8.txt"), "aé€").unwrap(); // 1 + 2 + 3 bytes
        let tool = read_file(&dir.0).max_bytes(4);
        assert_eq!(
            read(&tool, "utf8.txt").as_deref().map_err(String::as_str),
            Ok("aé\n\n[truncated at 4 bytes; the file has 6 bytes]")
        );
        let tool = read_file(&dir.0).max_bytes(0);
        assert_eq!(
            read(&tool, "utf8.txt").as_deref().map_err(String::as_str),
            Ok("[truncated at 0 bytes; the file has 6 bytes]")
        );
        assert!(tool.description().contains("first 0 bytes"));
    }

    #[test]
    fn read_file_is_lossy_with_a_note() {
        let dir = TempDir::new("lossy");
        fs::write(dir.0.join("bin"), b"ok\xff\xfeok").unwrap();
        assert_eq!(
            read(&read_file(&dir.0), "bin")
                .as_deref()
                .map_err(String::as_str),
            Ok(
                "ok\u{fffd}\u{fffd}ok\n\n[note: the file is not valid UTF-8; invalid bytes are \
                shown as U+FFFD]"
            )
        );
    }

    #[test]
    fn list_dir_lists_sorted_with_slashes() {
        let dir = TempDir::new("list");
        fs::create_dir_all(dir.0.join("b_dir/deeper")).unwrap();
        fs::create_dir_all(dir.0.join("empty")).unwrap();
        fs::write(dir.0.join("c.txt"), "").unwrap();
        fs::write(dir.0.join("a.txt"), "").unwrap();
        fs::write(dir.0.join("b_dir/x"), "").unwrap();
        let tool = list_dir(&dir.0);
        let expected = "a.txt\nb_dir/\nc.txt\nempty/";
        assert_eq!(
            list(&tool, &json!({})).as_deref().map_err(String::as_str),
            Ok(expected)
        );
        assert_eq!(
            list(&tool, &json!({"path": "."}))
                .as_deref()
                .map_err(String::as_str),
            Ok(expected)
        );
        assert_eq!(
            list(&tool, &json!({"path": ""}))
                .as_deref()
                .map_err(String::as_str),
            Ok(expected)
        );
        assert_eq!(
            list(&tool, &json!({"path": "b_dir"}))
                .as_deref()
                .map_err(String::as_str),
            Ok("deeper/\nx")
        );
        assert_eq!(
            list(&tool, &json!({"path": "empty"}))
                .as_deref()
                .map_err(String::as_str),
            Ok("[the directory is empty]")
        );
        assert_eq!(
            list(&tool, &json!({"path": "a.txt"}))
                .as_deref()
                .map_err(String::as_str),
            Err("`a.txt` is not a directory (read_file reads files)")
        );
        assert_eq!(
            list(&tool, &json!({"path": "nope"}))
                .as_deref()
                .map_err(String::as_str),
            Err("`nope` does not exist")
        );
        assert!(
            list(&tool, &json!({"path": ".."}))
                .unwrap_err()
                .contains("contains `..`")
        );
        assert!(
            list(&tool, &json!({"path": "/"}))
                .unwrap_err()
                .contains("absolute")
        );
    }

    #[test]
    fn list_dir_caps_entries() {
        let dir = TempDir::new("many");
        for i in 0..12 {
            fs::write(dir.0.join(format!("f{i:02}")), "").unwrap();
        }
        let tool = list_dir(&dir.0).max_entries(10);
        let out = list(&tool, &json!({})).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 11);
        assert_eq!(lines[9], "f09");
        assert_eq!(lines[10], "[... 2 more entries not shown; 12 in all]");
    }

    #[cfg(unix)]
    #[test]
    fn list_dir_escapes_control_characters() {
        let dir = TempDir::new("names");
        fs::write(dir.0.join("evil\nname"), "").unwrap();
        assert_eq!(
            list(&list_dir(&dir.0), &json!({}))
                .as_deref()
                .map_err(String::as_str),
            Ok("evil\\nname")
        );
    }

    #[test]
    fn missing_root_is_reported_without_panicking() {
        let tool = read_file(std::env::temp_dir().join("pikuri-no-such-root-dir-xyz"));
        let err = read(&tool, "a.txt").unwrap_err();
        assert!(
            err.starts_with("the tool's root directory is not accessible"),
            "{err}"
        );
    }

    #[test]
    fn all_has_the_four_tools_with_valid_schemas() {
        let tools = all(std::env::temp_dir());
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            ["calculator", "current_time", "read_file", "list_dir"]
        );
        for tool in &tools {
            assert_eq!(tool.parameters().to_json()["type"], "object");
            assert!(!tool.description().is_empty());
        }
    }
}
