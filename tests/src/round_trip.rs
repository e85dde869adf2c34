//! Helpers for provider round trips.
//!
//! A provider round trip drives one resource type's [`Provider`] against the emulator
//! the way the engine would: create from template properties (and create again with the
//! same token, which must answer with the same resource), `read_current_state` gives
//! the properties back in the template's shape, update and read again, an update of a
//! create-only property is refused as needing a new resource, then delete, delete
//! again, and the resource is gone: not found, and `import` reports it not deployed.
//! The `tests/providers*.rs` files are such round trips; what they share is here.

use serde_json::Value;
use stackflow_providers::{
    CurrentState, Deleted, Imported, Properties, Provider, ProviderError, ResourceRequest,
};

use crate::unique_name;

/// The properties of the JSON object `v` (panics if `v` is not an object).
pub fn props(v: Value) -> Properties {
    v.as_object().cloned().expect("an object")
}

/// `p` with its keys sorted, to compare with a state from [`read`].
pub fn sorted(mut p: Properties) -> Properties {
    p.sort_keys();
    p
}

/// A request to create `logical_id` of `resource_type` with `properties`, in a stack
/// of its own (a fresh name) and with a fresh token.
pub fn request(logical_id: &str, resource_type: &str, properties: Value) -> ResourceRequest {
    request_in(&unique_name("stack"), logical_id, resource_type, properties)
}

/// Like [`request`], in the stack `stack` (for resources whose test puts several in
/// one stack).
pub fn request_in(
    stack: &str,
    logical_id: &str,
    resource_type: &str,
    properties: Value,
) -> ResourceRequest {
    let mut r = ResourceRequest::new(stack, logical_id, resource_type, props(properties));
    r.token = unique_name("token");
    r
}

/// `req` without its physical id: the request as `import` gets it from a template.
pub fn without_id(req: &ResourceRequest) -> ResourceRequest {
    let mut r = req.clone();
    r.physical_id = None;
    r
}

/// The state `read_current_state` finds for `req`, keys sorted (panics if it finds
/// none).
pub async fn read(provider: &dyn Provider, req: &ResourceRequest) -> Properties {
    match provider.read_current_state(req).await.expect("read") {
        CurrentState::Found(state) => sorted(state),
        other => panic!("{other:?}"),
    }
}

/// `req` as the update to `properties` (the previous ones are `req`'s), with a new
/// token.
pub fn update_of(req: &ResourceRequest, properties: Value) -> ResourceRequest {
    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update.properties = props(properties);
    update.token = unique_name("token");
    update
}

/// The provider refuses `update` as needing a new resource
/// ([`ProviderError::NotUpdatable`]).
pub async fn not_updatable(provider: &dyn Provider, update: &ResourceRequest) {
    match provider.update(update).await {
        Err(ProviderError::NotUpdatable(_)) => {}
        other => panic!("a create-only change must be NotUpdatable, got {other:?}"),
    }
}

/// Delete `req`, delete it again (both done), then `read_current_state` says not found
/// and `import` says not deployed yet, by `req` and by each of `also` (such as the
/// request naming the resource by its name, or [`without_id`]).
pub async fn delete_twice_then_gone(
    provider: &dyn Provider,
    req: &ResourceRequest,
    also: &[&ResourceRequest],
) {
    assert_eq!(provider.delete(req).await.expect("delete"), Deleted::Done);
    assert_eq!(
        provider.delete(req).await.expect("delete again"),
        Deleted::Done
    );
    assert_eq!(
        provider.read_current_state(req).await.expect("read"),
        CurrentState::NotFound
    );
    for r in std::iter::once(req).chain(also.iter().copied()) {
        assert_eq!(
            provider.import(r).await.expect("import"),
            Imported::NotDeployedYet,
            "import of {:?} (physical id {:?})",
            r.logical_id,
            r.physical_id
        );
    }
}
