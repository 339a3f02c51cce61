//! A report as JUnit XML, the format CI systems read test results in.

use std::fmt::Write as _;

use super::capture::RunStatus;
use super::report::Report;

impl Report {
    /// The report as JUnit XML: one `<testsuite>` named after the dataset,
    /// one `<testcase>` per case (`classname` the dataset, `time` the
    /// runs' seconds). A case with a run that did not complete has an
    /// `<error>`; one with a run that failed a check a `<failure>`, whose
    /// text lists every failing run and verdict. Each case's pass rate and
    /// mean score are `<properties>`. Every text is escaped, and characters
    /// XML 1.0 cannot hold (most control characters) are written as
    /// `\u{..}`, so any case name or model output makes a well-formed file.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::evals::{Case, Check, Dataset, Experiment};
    ///
    /// let dataset = Dataset::new("d").case(Case::new("a<&>\"'", "x").check(Check::equals("y")));
    /// let report = Experiment::new("x").run(&dataset, |cx: &mut pikuri::evals::TaskContext| Ok::<_, String>(cx.input().to_string()));
    /// let xml = report.to_junit();
    /// assert!(xml.contains(r#"<testcase name="a&lt;&amp;&gt;&quot;&apos;" classname="d""#));
    /// assert!(xml.contains("<failure message=\"1 of 1 run(s) failed\""));
    /// ```
    pub fn to_junit(&self) -> String {
        let mut tests = 0;
        let mut failures = 0;
        let mut errors = 0;
        let mut body = String::new();
        let mut total_secs = 0.0;
        for case in &self.cases {
            tests += 1;
            let secs: f64 = case
                .runs
                .iter()
                .map(|r| r.run.duration_ms as f64 / 1000.0)
                .sum();
            total_secs += secs;
            let _ = write!(
                body,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{secs:.3}\">\n      <properties>\n        <property name=\"pass_rate\" value=\"{}\"/>\n        <property name=\"score\" value=\"{}\"/>\n      </properties>\n",
                escape(&case.name),
                escape(&self.dataset),
                case.pass_rate,
                case.score.mean,
            );
            let failed = case.runs.iter().filter(|r| !r.pass).count();
            let broken = case
                .runs
                .iter()
                .filter(|r| r.run.status != RunStatus::Completed)
                .count();
            if failed > 0 {
                let tag = if broken > 0 {
                    errors += 1;
                    "error"
                } else {
                    failures += 1;
                    "failure"
                };
                let _ = writeln!(
                    body,
                    "      <{tag} message=\"{failed} of {} run(s) failed\" type=\"{}\">{}</{tag}>",
                    case.runs.len(),
                    if broken > 0 { "run" } else { "check" },
                    escape(&case.failures().join("\n")),
                );
            }
            body.push_str("    </testcase>\n");
        }
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{name}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{total_secs:.3}\">\n  <testsuite name=\"{dataset}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" time=\"{total_secs:.3}\">\n{body}  </testsuite>\n</testsuites>\n",
            name = escape(&self.name),
            dataset = escape(&self.dataset),
        )
    }
}

/// `text` for an XML attribute or element: the five markup characters as
/// entities, and each character XML 1.0 does not allow as `\u{..}` text.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Kept literally in element text; an attribute normalizes them
            // to spaces, which is what a reader of a name expects anyway.
            '\t' | '\n' | '\r' => out.push(c),
            c if allowed(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    out
}

/// XML 1.0's `Char` production, less the whitespace handled above.
fn allowed(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_characters_xml_cannot_hold() {
        assert_eq!(
            escape("]]><x a=\"1\">&'"),
            "]]&gt;&lt;x a=&quot;1&quot;&gt;&amp;&apos;"
        );
        assert_eq!(
            escape("a\u{1}b\u{1b}[31m\u{FFFE}"),
            "a\\u{1}b\\u{1b}[31m\\u{fffe}"
        );
        assert_eq!(escape("tab\tnl\n"), "tab\tnl\n");
    }
}
