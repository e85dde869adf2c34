//! The custom resource provider (being written).
