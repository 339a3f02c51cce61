//! The agent loop (being written).
