//! `html_to_markdown` on hostile input, entities, real HTML files installed
//! on the machine, and input growth (the work must stay linear).

use std::path::{Path, PathBuf};
use std::time::Instant;

use pikuri::builtin::html_to_markdown;

fn md(html: &str) -> String {
    html_to_markdown(html, Some("https://example.org/dir/page.html"))
}

#[test]
fn hostile_html_finishes_without_panicking() {
    // 100k levels of nesting, closed and unclosed.
    let deep = format!(
        "{}deep{}",
        "<div><span>".repeat(100_000),
        "</span></div>".repeat(100_000)
    );
    assert_eq!(md(&deep), "deep");
    let unclosed = format!(
        "{}end",
        "<b><i><table><tr><td><ul><li><a href=x>".repeat(20_000)
    );
    assert!(md(&unclosed).contains("end"));
    // A 10 MB attribute value, then one that never closes.
    let attr = format!("<p data-x=\"{}\">after</p>", "x".repeat(10 << 20));
    assert_eq!(md(&attr), "after");
    assert_eq!(
        md(&format!("before<p title='{}", "y".repeat(1 << 20))),
        "before"
    );
    // Stray `<`, CDATA, comments (closed, unclosed, odd), broken entities.
    // `<` not followed by a letter, `/`, `!` or `?` is text.
    assert_eq!(
        md("1 < 2 and 3 <4> & 5 <= 6 <b>x</b>"),
        "1 < 2 and 3 <4> & 5 <= 6 x"
    );
    assert_eq!(md("a<![CDATA[<b>&amp;</b>]]>b"), "a<b>&amp;</b>b");
    assert_eq!(
        md("a<!-- <p>hidden</p> -->b<!--->c<!-->d<!-- never closed"),
        "abcd"
    );
    assert_eq!(
        md("&; &#; &#x; &#xZZ; &amp &#99999999; &bogus;"),
        "&; &#; &#x; &#xZZ; & \u{FFFD} &bogus;"
    );
    // Script content that looks like markup, and an unclosed script.
    assert_eq!(md("<script>document.write('<p>x</p>')</script>ok"), "ok");
    assert_eq!(md("ok<script>never closed <p>x"), "ok");
    // Invalid structure everywhere.
    for s in [
        "</div></div></p></li>",
        "<li>orphan",
        "<td>cell",
        "<tr><td>x",
        "<table><table><table>",
        "<pre><pre><pre>x",
        "<a href=a><a href=b>x</a></a>",
        "<h1><h2><h3>x",
        "<blockquote>".repeat(10_000).as_str(),
        "<ol start=-99999999999999999999><li>x",
        "\u{0}\u{FFFF}<\u{1F600}>",
        "<a\u{0}b>",
        "<!DOCTYPE",
        "<?",
        "</",
    ] {
        let _ = md(s);
    }
}

#[test]
fn entities_decode() {
    assert_eq!(
        md(
            "<p>&lt;tag&gt; &amp; &quot;q&quot; &apos;a&apos; &nbsp;x &copy; &reg; &trade; &euro; &pound; \
            &yen; &sect; &para; &deg; &plusmn; &times; &divide; &frac12; &micro; &middot; &laquo;&raquo; \
            &ndash; &mdash; &lsquo;&rsquo; &ldquo;&rdquo; &hellip; &bull; &dagger; &larr;&rarr;&uarr;&darr; \
            &le; &ge; &ne; &infin; &sum; &radic; &alpha;&beta;&gamma;&Omega; &eacute;&Eacute;&uuml;&ntilde;&ccedil;&szlig;</p>"
        ),
        "<tag> & \"q\" 'a' x © ® ™ € £ ¥ § ¶ ° ± × ÷ ½ µ · «» – — ‘’ “” … • † ←→↑↓ ≤ ≥ ≠ ∞ ∑ √ αβγΩ éÉüñçß"
    );
    assert_eq!(md("&#65;&#x42;&#X43;&#128512;&#x1f600;&#150;"), "ABC😀😀–");
    assert_eq!(
        md("<a href=\"?a=1&amp;b=2&copy=3\">q</a>"),
        "[q](https://example.org/dir/page.html?a=1&b=2&copy=3)"
    );
}

/// Up to `max` `.html` files over 2 KiB under `roots`, walked iteratively.
fn html_files(roots: &[PathBuf], max: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for root in roots {
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.flatten().collect();
            entries.sort_by_key(std::fs::DirEntry::path);
            for entry in entries {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    dirs.push(path);
                } else if kind.is_file()
                    && path.extension().is_some_and(|e| e == "html")
                    && entry.metadata().is_ok_and(|m| m.len() > 2048)
                {
                    found.push(path);
                }
            }
            if found.len() >= max {
                return found;
            }
        }
    }
    found
}

fn roots() -> Vec<PathBuf> {
    let mut roots = vec![PathBuf::from("/usr/share/doc")];
    if let Some(home) = std::env::var_os("HOME") {
        let toolchains = Path::new(&home).join(".rustup/toolchains");
        if let Ok(entries) = std::fs::read_dir(toolchains) {
            let mut tc: Vec<_> = entries
                .flatten()
                .map(|e| e.path().join("share/doc"))
                .collect();
            tc.sort();
            roots.extend(tc);
        }
    }
    roots
}

#[test]
fn real_html_files_give_readable_text() {
    let candidates = html_files(&roots(), 3000);
    if candidates.len() < 50 {
        eprintln!(
            "skipped: only {} HTML files over 2 KiB found on this machine",
            candidates.len()
        );
        return;
    }
    // Spread the sample over everything found.
    let step = (candidates.len() / 200).max(1);
    let sample: Vec<_> = candidates.iter().step_by(step).take(200).collect();
    let mut empty = Vec::new();
    for path in &sample {
        let bytes = std::fs::read(path).unwrap();
        let html = String::from_utf8_lossy(&bytes);
        let text = html_to_markdown(&html, None);
        let letters = text.chars().filter(|c| c.is_alphabetic()).count();
        if letters < 20 {
            empty.push(path.display().to_string());
        }
        for leftover in ["<script", "</div>", "<style", "<nav"] {
            assert!(
                !text.contains(leftover),
                "{}: markup `{leftover}` left in the output",
                path.display()
            );
        }
    }
    assert!(sample.len() >= 50);
    // Redirect stubs and frame sets have no text of their own; allow a few.
    assert!(
        empty.len() * 20 <= sample.len(),
        "no readable text from: {empty:#?}"
    );
}

/// Each pathological shape at two sizes: the output grows with the input,
/// not faster (no quadratic blow-up), and both finish.
#[test]
fn work_stays_linear_in_the_input() {
    let shapes: [(&str, &str); 10] = [
        ("nesting", "<div>"),
        ("unclosed links", "<a href=x>y"),
        ("unmatched end tags", "</x>"),
        ("nested lists", "<ul><li>x"),
        ("entities", "&amp;&#x41;&bogus"),
        ("implicit closes", "<li>a<td>b<tr>"),
        ("headings", "<h1>x"),
        ("stray lt", "a < b "),
        ("raw text near misses", "</scrip"),
        ("table cells", "<td>|x"),
    ];
    for (name, unit) in shapes {
        let wrap = |n: usize| {
            let body = unit.repeat(n / unit.len());
            if name == "raw text near misses" {
                format!("<script>{body}</script>ok")
            } else {
                body
            }
        };
        let small = wrap(256 << 10);
        let large = wrap(2 << 20);
        let t = Instant::now();
        let out_small = md(&small).len();
        let t_small = t.elapsed();
        let t = Instant::now();
        let out_large = md(&large).len();
        let t_large = t.elapsed();
        eprintln!(
            "{name}: {} -> {out_small} bytes in {t_small:?}; {} -> {out_large} bytes in {t_large:?}",
            small.len(),
            large.len()
        );
        assert!(
            out_large <= out_small * 8 + 4096,
            "{name}: {out_small} -> {out_large}"
        );
        assert!(
            out_large <= large.len() * 4,
            "{name}: output {out_large} for input {}",
            large.len()
        );
    }
}
