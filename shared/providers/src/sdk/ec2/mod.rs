//! The EC2 network family through the EC2 API: one file per resource type, and what they
//! share (tag specifications, the stack's own marks, waits) in `common`.
pub(crate) mod common;
pub mod eip;
pub mod gateway_attachment;
pub mod internet_gateway;
pub mod nat_gateway;
pub mod route;
pub mod route_table;
pub mod route_table_association;
pub(crate) mod rules;
pub mod security_group;
pub mod sg_rule;
pub mod subnet;
pub mod vpc;
pub mod vpc_endpoint;
