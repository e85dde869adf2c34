//! The `sns` SDK provider (being written).
