//! The small vocabulary shared by the event log, the providers and the engine.

use serde::{Deserialize, Serialize};

/// The kind of provider that made a resource, recorded with it so that updates, deletes
/// and undo go back to the same one. A resource whose SDK provider cannot take a property
/// is made with Cloud Control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// A hand-written SDK provider.
    Sdk,
    /// The AWS Cloud Control API.
    CloudControl,
    /// The custom resource protocol (Lambda or SNS service token).
    Custom,
    /// A nested stack, deployed as a child stream.
    NestedStack,
}

impl ProviderKind {
    /// The name recorded in state and shown in reports: `sdk`, `cloud-control`, `custom`,
    /// `nested-stack`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Sdk => "sdk",
            ProviderKind::CloudControl => "cloud-control",
            ProviderKind::Custom => "custom",
            ProviderKind::NestedStack => "nested-stack",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_serialized_form() {
        for k in [
            ProviderKind::Sdk,
            ProviderKind::CloudControl,
            ProviderKind::Custom,
            ProviderKind::NestedStack,
        ] {
            let json = serde_json::to_value(k).unwrap();
            assert_eq!(json, serde_json::Value::String(k.as_str().into()));
        }
    }
}
