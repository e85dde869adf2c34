//! Publishing a cloud assembly's assets before its stack deploys, from wherever the
//! assembly is (the CLI, for the embedded engine and for a remote run alike): file
//! assets to S3 ([`publish`]; directories zipped by [`zip`]), container images with a
//! container engine ([`container`]), and stackflow's own bucket ([`bucket`]).

pub mod bucket;
pub mod container;
pub mod publish;
pub mod zip;
