//! The OTLP exporter (`pikuri::otel`) through the public API: spans read
//! back from a scripted fake collector on 127.0.0.1 (nesting, attributes,
//! status, usage counted once), collector faults (down, slow, 500, 503, 429
//! with `Retry-After`, a collector that never answers), and a real OTLP
//! receiver when `scripts/otlp-receiver.sh` installed one.

mod attacks16; // session 16's outside pass: partial success, 400, Retry-After 100000, trickle
mod collector; // the scripted fake collector and the span reader
mod faults; // down, slow, 5xx, 429, silent: the turn is unaffected
mod logs; // no credential in any log line, the HTTP library's included
mod receiver; // a real receiver (rotel), skipped unless installed
mod spans; // the spans of a turn with a tool and a sub-agent
