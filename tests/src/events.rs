//! Events for the store tests.

use serde_json::json;
use stackflow_events::event::{Event, ProviderKind, ResourceRecord};

/// A `ResourceCreated` of deploy `d1` whose properties carry `padding` bytes of text.
pub fn created(logical_id: &str, padding: usize) -> Event {
    let mut properties = serde_json::Map::new();
    properties.insert("Name".into(), json!(logical_id));
    properties.insert("Blob".into(), json!("z".repeat(padding)));
    Event::ResourceCreated {
        deploy_id: "d1".into(),
        resource: ResourceRecord {
            logical_id: logical_id.into(),
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: format!("phys-{logical_id}"),
            properties,
            attributes: Default::default(),
            dependencies: Vec::new(),
            provider: ProviderKind::CloudControl,
            deletion_policy: None,
            update_replace_policy: None,
            secret_digest: None,
        },
        replaces: None,
        baseline: None,
    }
}
