use super::convert;

fn md(html: &str) -> String {
    convert(html, Some("https://example.org/docs/page.html")).0
}

#[test]
fn headings_paragraphs_and_breaks() {
    assert_eq!(
        md(
            "<h1>Title</h1><p>One\n  two</p><p>a<br>b<br/><br>c</p><h2> </h2><h3>Sub <b>bold</b></h3>"
        ),
        "# Title\n\nOne two\n\na\nb\n\nc\n\n### Sub bold"
    );
}

#[test]
fn lists_nested_and_ordered() {
    assert_eq!(
        md("<ul><li>a<li>b<ul><li>b1</li></ul></li></ul><ol start=3><li>x</li><li>y</ol>"),
        "- a\n- b\n  - b1\n\n3. x\n4. y"
    );
    assert_eq!(
        md("<ol start=9223372036854775807><li>a<li>b</ol>"),
        "9223372036854775807. a\n9223372036854775807. b"
    );
}

#[test]
fn links_resolve_against_the_base() {
    assert_eq!(
        md(
            "<p>See <a href=\"../api/x.html?a=1&amp;b=2#f\">the <em>API</em></a>, \
            <a href='//cdn.example.com/y'>cdn</a>, <a href=\"#top\">top</a>, \
            <a href=\"javascript:alert(1)\">js</a> and <a href=/z><img src=i.png alt=''></a>.</p>"
        ),
        "See [the API](https://example.org/api/x.html?a=1&b=2#f), [cdn](https://cdn.example.com/y), top, js and ."
    );
    assert_eq!(convert("<a href=\"x/y\">rel</a>", None).0, "[rel](x/y)");
}

#[test]
fn tables_as_pipe_rows() {
    assert_eq!(
        md("<table><tr><th>a</th><th>b|c</th></tr><tr><td>1<td>2<br>3</table>after"),
        "| a | b\\|c |\n| --- | --- |\n| 1 | 2 3 |\n\nafter"
    );
    assert_eq!(
        md("<table><tr><td>a<td>b<tr><td>c<td>d</table>"),
        "| a | b |\n| --- | --- |\n| c | d |"
    );
}

#[test]
fn pre_and_code_are_kept() {
    assert_eq!(
        md("<p>Use <code>a  b</code>:</p><pre>\nfn main() {\n    x &lt; y;\n}</pre>next"),
        "Use `a b`:\n\n```\nfn main() {\n    x < y;\n}\n```\n\nnext"
    );
}

#[test]
fn chrome_and_hidden_elements_are_dropped() {
    let html = "<html><head><title>The  page</title><style>p{}</style></head><body>\
        <header>site menu</header><nav>nav</nav><script>var x = '<p>';</script>\
        <main><article><header><h1>Kept</h1></header><p>body</p>\
        <div hidden>h1</div><div aria-hidden=\"true\">h2</div>\
        <span style=\"DISPLAY: none\">h3</span><aside>ad</aside><form><input>f</form>\
        <template>t</template><svg><text>s</text></svg><noscript>n</noscript>\
        <div role=navigation>r</div></article></main><footer>(c)</footer>";
    let (text, title) = convert(html, None);
    assert_eq!(text, "# Kept\n\nbody");
    assert_eq!(title.as_deref(), Some("The page"));
}

#[test]
fn unclosed_head_ends_at_body_content() {
    assert_eq!(md("<head><title>t</title><p>visible"), "visible");
}

#[test]
fn blockquote_hr_and_images() {
    assert_eq!(
        md("<blockquote><p>q1</p><p>q2</p></blockquote><hr><img alt=\"A cat\" src=\"/c.png\">"),
        "> q1\n\n> q2\n\n---\n\n![A cat](https://example.org/c.png)"
    );
}

#[test]
fn hostile_inputs_finish() {
    let deep = "<div>".repeat(100_000) + "deep" + &"</div>".repeat(100_000);
    assert_eq!(md(&deep), "deep");
    let lists = "<ul><li>".repeat(50_000) + "x";
    let out = md(&lists);
    // The indentation is capped, so the output stays proportional.
    assert!(out.len() < lists.len() * 2, "{}", out.len());
    let attr = format!("<p title=\"{}\">after", "x".repeat(10 << 20));
    assert_eq!(md(&attr), "after");
    for s in [
        "<",
        "<<<>>>",
        "</",
        "<!",
        "<!-",
        "<![CDATA[",
        "&",
        "&#",
        "&#x",
        "<a href",
        "<p <p",
        "\u{0}<\u{0}>",
        "<table><td><table><td>x",
    ] {
        let _ = md(s);
    }
}
