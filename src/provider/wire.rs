//! Wire structs (being written).
