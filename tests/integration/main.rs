//! Integration tests through the public API against the scripted FakeServer.
//! One binary (see `autotests = false`); each module is one area.

mod agent_loop; // rounds, tools, streaming, events, model switch, close
mod anthropic; // issue 29: Anthropic Messages against a raw scripted server
mod api; // Send/Sync bounds, pinned Debug and Display
mod approval; // approvers: approve, deny, edit, cancel while waiting, deferred turns
#[cfg(feature = "tool-search")]
mod attacks12; // ATTACKS.md over the local tool search: numbers, names, histories, threads, 100,000 tools
mod attacks13; // ATTACKS.md leftovers: at most 64 guard checks run past their bound
mod attacks16_state; // ATTACKS.md over files, stores, lifecycle: saved eval files, images from a path
mod attacks16_wire; // ATTACKS.md over the four wire formats and the model-server client: the class x format table of tests/attacks16.md
mod budgets; // issue 39 part 3: budgets, limits, spend and cost
mod cassette; // record through Recorder, replay from a Cassette, mismatch diffs
mod chat_example; // examples/chat.rs as a process: flags, exit codes, REPL
mod compaction; // issue 17: compaction, overflow recovery, oversized results, fallback
mod context_cache; // issue 37: Gemini's context caches: create, use, expire, delete
mod controls; // step limit, synthesizer, cancellation, interloper
mod decoder_rules; // issue 36: the decoder rules on all three APIs (progress, identity, errors, bounds)
mod errors; // the fault matrix: HTTP, transport and stream faults
mod evals; // issue 41: datasets, evaluators, runs, reports, baselines, replayed cassettes
mod extensions; // extension hooks, sub-agents, history
mod faithful; // issue 29 item 4: provider fields echoed to their own model only, cached tokens
mod fake_apis; // issue 29: FakeServer on /messages and /responses, strict mode, cassettes
mod fidelity; // issue 28 class 10: differences from pikuri, fixed
mod finish; // issue 36: why an answer ended, a cut answer never `Completed`, on all three APIs
mod first_contact; // issue 28, classes 7-9: compaction bounds, error bodies, first-contact errors
mod gemini; // issue 37: Google Gemini's own API on the strict FakeServer
mod guards; // issue 39: guardrails at the four points, chains, failing guards, the judge
mod guards_spend; // issue 39 leftovers: a judge's spend in the budget, lifetime budgets, attack classes
mod hand_off; // issue 42: listeners that opt out of the end-of-turn barrier
mod hardening; // issue 13: history validation, retry_turn, close_all, cancel events
mod hostile; // issue 13: extreme numbers, echoed keys, media types, endless streams, probes, no model
mod hosts; // events pulled through ChannelListener, turn usage
mod listeners; // ordering, isolation, end-of-turn flush
mod llama_cassette; // a recorded llama.cpp session, replayed
mod local_models; // leaked tool calls, think tags, wind-down, switches
mod poisoned; // issue 28: refused tool-call arguments never reach a later request
mod probe; // context-window detection per server shape
mod properties; // random fault scripts against random agent settings
mod regression; // one test per fixed bug
mod responses; // issue 29: OpenAI Responses against a raw scripted server
mod sdk; // issue 29: the official Python SDKs parse what FakeServer serves
mod security; // secrets, redirects, size limits, terminal escapes, file confinement
mod settings; // issue 36: typed model settings on every API, overrides, request fields
mod skills; // issue 40 part 3: Agent Skills read on demand, confined and bounded
mod stress; // many threads: agents, cancel, interloper, listeners
mod structured; // issue 14: typed answers, response_format, repairs, InvalidAnswer
mod three_apis; // issue 29 end to end: one script through the agent on all three APIs, switches
#[cfg(feature = "tool-search")]
mod tool_search; // issue 40: deferred tools found by the local search, the cache kept, found after reload and resume
#[cfg(all(feature = "tool-search", feature = "anthropic", feature = "responses"))]
mod tool_search_native; // issue 40: the API's own tool search on Anthropic and Responses, strict, plain and streamed
mod trifecta; // the lethal-trifecta rule, the bundled personas
mod typed_tools; // TypedTool, schemas from types and raw JSON Schema, on the wire
mod util; // shared helpers
mod web; // fetch, web_scrape, web_search against local HTTP servers
mod web_html; // the HTML extractor: hostile input, entities, real files, linear work
mod work_kept; // issue 38 item 25: injected messages and a dropped window no longer lost
