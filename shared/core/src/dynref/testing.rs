//! What the tests of the dynamic references share: reference builders, a map lookup and
//! a strategy for references.

use std::collections::HashMap;

use proptest::prelude::*;

use super::{DynamicReference, Lookup, LookupFailed};

pub(super) fn ssm(name: &str, version: Option<&str>) -> DynamicReference {
    DynamicReference::Ssm {
        name: name.into(),
        version: version.map(Into::into),
    }
}

pub(super) fn ssm_secure(name: &str, version: Option<&str>) -> DynamicReference {
    DynamicReference::SsmSecure {
        name: name.into(),
        version: version.map(Into::into),
    }
}

pub(super) fn sm(
    id: &str,
    key: Option<&str>,
    stage: Option<&str>,
    vid: Option<&str>,
) -> DynamicReference {
    DynamicReference::SecretsManager {
        secret_id: id.into(),
        json_key: key.map(Into::into),
        version_stage: stage.map(Into::into),
        version_id: vid.map(Into::into),
    }
}

/// A lookup backed by a map from the canonical reference text to the value.
pub(super) struct MapLookup(HashMap<String, String>);

impl Lookup for MapLookup {
    fn lookup(&self, r: &DynamicReference) -> Result<String, LookupFailed> {
        self.0
            .get(&r.to_string())
            .cloned()
            .ok_or(LookupFailed::NotFound {
                service: r.service(),
            })
    }
}

pub(super) fn map_lookup(pairs: &[(&str, &str)]) -> MapLookup {
    MapLookup(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

fn ssm_name() -> impl Strategy<Value = String> {
    "/?[A-Za-z0-9_.-]{1,8}(/[A-Za-z0-9_.-]{1,8}){0,2}"
}

fn field() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[A-Za-z0-9_ .-]{1,8}")
}

pub(super) fn reference() -> impl Strategy<Value = DynamicReference> {
    let version = proptest::option::of("[0-9]{1,3}");
    let secret_id = prop_oneof![
        "[A-Za-z0-9/_+=.@-]{1,12}",
        "[A-Za-z0-9/_+=.@-]{1,12}"
            .prop_map(|n| format!("arn:aws:secretsmanager:us-east-1:123456789012:secret:{n}")),
    ];
    let ssm_name = prop_oneof![
        ssm_name(),
        "[A-Za-z0-9_.-]{1,8}(/[A-Za-z0-9_.-]{1,8}){0,2}"
            .prop_map(|n| format!("arn:aws:ssm:us-east-1:123456789012:parameter/{n}")),
    ];
    prop_oneof![
        (ssm_name.clone(), version.clone())
            .prop_map(|(name, version)| DynamicReference::Ssm { name, version }),
        (ssm_name, version)
            .prop_map(|(name, version)| DynamicReference::SsmSecure { name, version }),
        (secret_id, field(), field(), field(), any::<bool>()).prop_map(
            |(secret_id, json_key, version_stage, version_id, stage_wins)| {
                // Only one of version-stage and version-id may be given.
                let (version_stage, version_id) = if stage_wins {
                    (version_stage, None)
                } else {
                    (None, version_id)
                };
                DynamicReference::SecretsManager {
                    secret_id,
                    json_key,
                    version_stage,
                    version_id,
                }
            }
        ),
    ]
}
