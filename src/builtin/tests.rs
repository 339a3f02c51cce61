use super::calculator::format_number;
use super::clock::{civil_from_days, describe_time, rfc3339};
use super::*;
use std::fs;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::{Tool, ToolContext};

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
    let names: Vec<&str> = tools.iter().map(Tool::name).collect();
    assert_eq!(
        names,
        ["calculator", "current_time", "read_file", "list_dir"]
    );
    for tool in &tools {
        assert_eq!(tool.parameters().to_json()["type"], "object");
        assert!(!tool.description().is_empty());
    }
}

// Issue 38, item 9: a journaled run cut off while one of these ran runs the
// call again on resume (`Tool::idempotent`) instead of telling the model it
// was interrupted. Each is a read or a pure function; the web tools send a
// GET, which is harmless to send again.

#[test]
fn calculator_is_idempotent() {
    assert!(calculator().idempotent());
}

#[test]
fn current_time_is_idempotent() {
    assert!(current_time().idempotent());
}

#[test]
fn read_file_is_idempotent() {
    assert!(read_file(std::env::temp_dir()).idempotent());
}

#[test]
fn list_dir_is_idempotent() {
    assert!(list_dir(std::env::temp_dir()).idempotent());
}

#[test]
fn every_tool_of_all_is_idempotent() {
    for tool in all(std::env::temp_dir()) {
        assert!(tool.idempotent(), "{}", tool.name());
    }
}

#[cfg(feature = "web")]
#[test]
fn fetch_is_idempotent() {
    assert!(fetch().idempotent());
}

#[cfg(feature = "web")]
#[test]
fn web_scrape_is_idempotent() {
    assert!(web_scrape().idempotent());
}

#[cfg(feature = "web")]
#[test]
fn web_search_is_idempotent() {
    let search = WebSearch::new(SearXng::new("http://127.0.0.1:9"));
    assert!(search.idempotent());
}
