//! The `iam` SDK provider (being written).
