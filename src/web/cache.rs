//! The optional process-wide cache of downloads, shared by every tool that
//! turned it on ([`FetchBuilder::cache`](super::FetchBuilder::cache)).
//!
//! Keyed by the requested URL and the options that decide what a download
//! may return (the address policy and the size cap), so a tool that may not
//! reach private addresses never gets a page another tool fetched from one.
//! Bounded: at most [`MAX_ENTRIES`] entries and [`MAX_TOTAL_BYTES`] of
//! bodies, oldest evicted first, each entry kept for [`TTL`].

use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::http::Response;

pub(crate) const MAX_ENTRIES: usize = 32;
pub(crate) const MAX_TOTAL_BYTES: usize = 16 << 20;
pub(crate) const TTL: Duration = Duration::from_secs(600);

struct Entry {
    key: String,
    at: Instant,
    response: Response,
}

fn cache() -> &'static Mutex<VecDeque<Entry>> {
    static CACHE: OnceLock<Mutex<VecDeque<Entry>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(VecDeque::new()))
}

pub(crate) fn key(url: &str, allow_private: bool, max_bytes: usize) -> String {
    format!("{allow_private} {max_bytes} {url}")
}

pub(crate) fn get(key: &str) -> Option<Response> {
    let mut entries = cache().lock();
    entries.retain(|e| e.at.elapsed() < TTL);
    entries
        .iter()
        .find(|e| e.key == key)
        .map(|e| e.response.clone())
}

pub(crate) fn put(key: String, response: Response) {
    if response.body.len() > MAX_TOTAL_BYTES {
        return;
    }
    let mut entries = cache().lock();
    entries.retain(|e| e.key != key);
    entries.push_back(Entry {
        key,
        at: Instant::now(),
        response,
    });
    let mut total: usize = entries.iter().map(|e| e.response.body.len()).sum();
    while entries.len() > MAX_ENTRIES || total > MAX_TOTAL_BYTES {
        let Some(old) = entries.pop_front() else {
            break;
        };
        total -= old.response.body.len();
    }
}
