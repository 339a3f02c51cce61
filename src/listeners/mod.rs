//! Ready-made [`Listener`](crate::Listener)s: live terminal output, a token
//! log, JSON lines, an in-memory recorder, a channel the host iterates on
//! its own thread ([`ChannelListener`]), a rate limiter for delta bursts,
//! and the sanitizer they all use on model text; and [`ListenerList`], the
//! fan-out that runs each listener of an agent on its own thread.
//!
//! Each is an ordinary listener: add it with
//! [`Configurator::add_listener`](crate::Configurator::add_listener). How
//! events reach listeners (threads, order, the end-of-turn flush) is
//! documented once, on [`Listener`](crate::Listener).
//!
//! # Examples
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::listeners::InMemoryEventList;
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("hi"));
//! let events = InMemoryEventList::new();
//! let mut agent = Agent::builder(server.transport())
//!     .add_listener(events.clone())
//!     .build()?;
//! agent.run_loop("hello")?;
//! assert!(events.kinds().contains(&"assistant"));
//! # Ok::<(), pikuri::Error>(())
//! ```

mod channel;
mod json_lines;
mod memory;
mod rate_limited;
mod terminal;
mod token_log;

pub use crate::listener::ListenerList;
pub use crate::sanitize::{Hazard, Sanitized, sanitize, sanitize_report};
pub use channel::{ChannelListener, RecvTimeoutError, Subscription, TryRecvError};
pub use json_lines::JsonLines;
pub use memory::InMemoryEventList;
pub use rate_limited::RateLimited;
pub use terminal::Terminal;
pub use token_log::TokenLog;
