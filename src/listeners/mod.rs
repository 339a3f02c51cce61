//! Ready-made [`Listener`](crate::Listener)s: live terminal output, a token
//! log, JSON lines, an in-memory recorder, a channel the host iterates on
//! its own thread ([`ChannelListener`]), a rate limiter for delta bursts,
//! and the sanitizer they all use on model text; and [`ListenerList`], the
//! fan-out that runs each listener of an agent on its own thread.
//!
//! Needs the `listeners` feature; [`Terminal`] needs `terminal` (both on by
//! default; the sanitizer comes with either).
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

#[cfg(feature = "listeners")]
mod channel;
#[cfg(feature = "listeners")]
mod json_lines;
#[cfg(any(test, feature = "listeners"))]
mod memory;
#[cfg(feature = "listeners")]
mod rate_limited;
#[cfg(feature = "terminal")]
mod terminal;
#[cfg(feature = "listeners")]
mod token_log;

pub use crate::listener::{Delivery, ListenerList};
pub use crate::sanitize::{Hazard, Sanitized, sanitize, sanitize_report};
#[cfg(feature = "listeners")]
pub use channel::{ChannelListener, RecvTimeoutError, Subscription, TryRecvError};
#[cfg(feature = "listeners")]
pub use json_lines::JsonLines;
#[cfg(any(test, feature = "listeners"))]
pub use memory::InMemoryEventList;
#[cfg(feature = "listeners")]
pub use rate_limited::RateLimited;
#[cfg(feature = "terminal")]
pub use terminal::Terminal;
#[cfg(feature = "listeners")]
pub use token_log::TokenLog;
