//! Built-in tools (stub; being written).
