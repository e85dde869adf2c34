//! The `lambda` SDK provider (being written).
