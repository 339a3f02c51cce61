//! HTML to Markdown-ish text, by hand: a forgiving [tokenizer](tokenizer)
//! and a stack-driven [renderer](render) that never recurse, so input of
//! any shape costs time and memory linear in its size.
//!
//! See [`html_to_markdown`](crate::web::html_to_markdown) for what is kept
//! and what is dropped.

mod entities;
mod out;
mod render;
mod tokenizer;

/// Markdown for `html` and the document's `<title>`, if any.
pub(crate) fn convert(html: &str, base_url: Option<&str>) -> (String, Option<String>) {
    render::Renderer::new(base_url).run(html)
}

#[cfg(test)]
mod tests;
