//! The `dynamodb` SDK provider (being written).
