//! Web tools (issue 19): WIP.

mod charset;
mod html;
mod url;

/// Convert an HTML document to Markdown-ish text.
pub fn html_to_markdown(html: &str, base_url: Option<&str>) -> String {
    html::convert(html, base_url).0
}
