//! The `s3` SDK provider (being written).
