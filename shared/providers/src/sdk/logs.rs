//! The `logs` SDK provider (being written).
