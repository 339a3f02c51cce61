//! Integration tests through the public API against the scripted FakeServer.
//! One binary (see `autotests = false`); each module is one area.

mod agent_loop; // rounds, tools, streaming, events, model switch, close
mod controls; // step limit, synthesizer, cancellation, interloper
mod errors; // the fault matrix: HTTP, transport and stream faults
mod extensions; // extension hooks, sub-agents, history
mod listeners; // ordering, isolation, end-of-turn flush
mod local_models; // leaked tool calls, think tags, wind-down, switches
mod probe; // context-window detection per server shape
mod properties; // random fault scripts against random agent settings
mod regression; // one test per fixed bug
mod security; // secrets, redirects, size limits, terminal escapes, file confinement
mod stress; // many threads: agents, cancel, interloper, listeners
mod util; // shared helpers
