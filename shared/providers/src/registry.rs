//! Which provider handles a resource.
//!
//! The rules, in order:
//!
//! 1. `Custom::*` and `AWS::CloudFormation::CustomResource` always go to the custom
//!    resource provider ([`Route::Custom`]).
//! 2. A resource recorded as made by Cloud Control stays with Cloud Control (sticky: the
//!    caller passes the recorded [`ProviderKind`] from state).
//! 3. A registered SDK provider for the type is used when it handles every top-level
//!    property the template sets.
//! 4. Otherwise Cloud Control, when it knows the type (the type has a schema in
//!    [`stackflow_core::schema`]).
//! 5. Otherwise no provider can handle the type ([`Registry::route`] answers `None`;
//!    [`Registry::check_supported`] lists every such type of a template at once, before
//!    any AWS call).

use std::collections::HashMap;
use std::sync::Arc;

use crate::provider::{Properties, Provider};
pub use stackflow_core::ProviderKind;

/// The routing decision for one resource.
#[derive(Clone)]
pub enum Route {
    /// This SDK provider.
    Sdk(Arc<dyn Provider>),
    /// The Cloud Control provider.
    CloudControl,
    /// The custom resource provider.
    Custom,
}

impl Route {
    /// What to record in state.
    pub fn kind(&self) -> ProviderKind {
        match self {
            Route::Sdk(_) => ProviderKind::Sdk,
            Route::CloudControl => ProviderKind::CloudControl,
            Route::Custom => ProviderKind::Custom,
        }
    }
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Route::Sdk(p) => write!(f, "Sdk({})", p.name()),
            Route::CloudControl => f.write_str("CloudControl"),
            Route::Custom => f.write_str("Custom"),
        }
    }
}

/// True for the types the custom resource provider handles.
pub fn is_custom_type(resource_type: &str) -> bool {
    resource_type.starts_with("Custom::") || resource_type == "AWS::CloudFormation::CustomResource"
}

/// True when Cloud Control can handle `resource_type` (its schema is known).
pub fn cloud_control_knows(resource_type: &str) -> bool {
    stackflow_core::schema::schema(resource_type).is_some()
}

/// The SDK providers by resource type, and the routing rules (see the module docs).
#[derive(Default, Clone)]
pub struct Registry {
    sdk: HashMap<String, Arc<dyn Provider>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut types: Vec<&String> = self.sdk.keys().collect();
        types.sort();
        f.debug_struct("Registry").field("sdk", &types).finish()
    }
}

impl Registry {
    /// A registry without SDK providers (everything goes to Cloud Control or custom).
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers `provider` as the SDK provider of `resource_type` (replacing another).
    pub fn register(&mut self, resource_type: impl Into<String>, provider: Arc<dyn Provider>) {
        self.sdk.insert(resource_type.into(), provider);
    }

    /// Registers each `(resource type, provider)`.
    pub fn register_all<'a>(
        &mut self,
        providers: impl IntoIterator<Item = (&'a str, Arc<dyn Provider>)>,
    ) {
        for (resource_type, provider) in providers {
            self.register(resource_type, provider);
        }
    }

    /// The SDK provider registered for `resource_type`.
    pub fn sdk_provider(&self, resource_type: &str) -> Option<&Arc<dyn Provider>> {
        self.sdk.get(resource_type)
    }

    /// The route of a resource of `resource_type` whose template sets `properties`, given
    /// the route recorded in state by an earlier deploy (`None` for a new resource), or
    /// `None` when no provider can handle the type.
    pub fn route(
        &self,
        resource_type: &str,
        properties: &Properties,
        recorded: Option<ProviderKind>,
    ) -> Option<Route> {
        if is_custom_type(resource_type) {
            return Some(Route::Custom);
        }
        if recorded == Some(ProviderKind::CloudControl) && cloud_control_knows(resource_type) {
            return Some(Route::CloudControl);
        }
        if let Some(provider) = self.sdk.get(resource_type) {
            let handles_all = match provider.handled_properties(resource_type) {
                None => true,
                Some(handled) => properties.keys().all(|k| handled.contains(&k.as_str())),
            };
            if handles_all {
                return Some(Route::Sdk(provider.clone()));
            }
        }
        cloud_control_knows(resource_type).then_some(Route::CloudControl)
    }

    /// The top-level properties in `properties` that the SDK provider of `resource_type`
    /// does not handle (empty when there is no SDK provider or it handles them all): what
    /// sends the resource to Cloud Control, for the plan's explanation.
    pub fn unhandled_properties(
        &self,
        resource_type: &str,
        properties: &Properties,
    ) -> Vec<String> {
        let Some(handled) = self
            .sdk
            .get(resource_type)
            .and_then(|p| p.handled_properties(resource_type))
        else {
            return Vec::new();
        };
        properties
            .keys()
            .filter(|k| !handled.contains(&k.as_str()))
            .cloned()
            .collect()
    }

    /// True when some provider can handle `resource_type` (with some properties).
    pub fn supports(&self, resource_type: &str) -> bool {
        is_custom_type(resource_type)
            || self.sdk.contains_key(resource_type)
            || cloud_control_knows(resource_type)
    }

    /// `Ok` when every type in `types` can be handled, else every type that cannot, each
    /// once, in first-seen order.
    pub fn check_supported<'a>(
        &self,
        types: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), Vec<String>> {
        let mut missing: Vec<String> = Vec::new();
        for t in types {
            if !self.supports(t) && !missing.iter().any(|m| m == t) {
                missing.push(t.to_string());
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::error::ProviderError;
    use crate::provider::{BoxFuture, Created, Deleted, ResourceRequest, Updated};

    /// An SDK provider that handles a fixed list of properties (or, with `None`, all).
    struct Fake(Option<&'static [&'static str]>);

    impl Provider for Fake {
        fn name(&self) -> &str {
            "fake"
        }
        fn handled_properties(&self, _: &str) -> Option<&[&str]> {
            self.0
        }
        fn create<'a>(
            &'a self,
            _: &'a ResourceRequest,
        ) -> BoxFuture<'a, Result<Created, ProviderError>> {
            Box::pin(async { Err(ProviderError::Other("fake".into())) })
        }
        fn update<'a>(
            &'a self,
            _: &'a ResourceRequest,
        ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
            Box::pin(async { Err(ProviderError::Other("fake".into())) })
        }
        fn delete<'a>(
            &'a self,
            _: &'a ResourceRequest,
        ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
            Box::pin(async { Ok(Deleted::Done) })
        }
    }

    fn props(v: serde_json::Value) -> Properties {
        v.as_object().cloned().unwrap_or_default()
    }

    fn registry() -> Registry {
        let mut r = Registry::new();
        r.register(
            "AWS::SQS::Queue",
            Arc::new(Fake(Some(&["QueueName", "VisibilityTimeout"]))),
        );
        r.register("AWS::SSM::Parameter", Arc::new(Fake(None)));
        r.register("My::Sdk::Only", Arc::new(Fake(Some(&["A"]))));
        r
    }

    fn kind(
        r: &Registry,
        t: &str,
        p: serde_json::Value,
        rec: Option<ProviderKind>,
    ) -> Option<ProviderKind> {
        r.route(t, &props(p), rec).map(|route| route.kind())
    }

    #[test]
    fn custom_types_always_go_to_the_custom_provider() {
        let r = registry();
        assert_eq!(
            kind(&r, "Custom::Thing", json!({"X": 1}), None),
            Some(ProviderKind::Custom)
        );
        assert_eq!(
            kind(
                &r,
                "AWS::CloudFormation::CustomResource",
                json!({}),
                Some(ProviderKind::CloudControl)
            ),
            Some(ProviderKind::Custom)
        );
    }

    #[test]
    fn sdk_provider_preferred_when_it_handles_every_property() {
        let r = registry();
        assert_eq!(
            kind(
                &r,
                "AWS::SQS::Queue",
                json!({"QueueName": "q", "VisibilityTimeout": 3}),
                None
            ),
            Some(ProviderKind::Sdk)
        );
        assert_eq!(
            kind(&r, "AWS::SQS::Queue", json!({}), None),
            Some(ProviderKind::Sdk)
        );
        // `None` = handles everything.
        assert_eq!(
            kind(&r, "AWS::SSM::Parameter", json!({"Anything": 1}), None),
            Some(ProviderKind::Sdk)
        );
        assert!(
            r.unhandled_properties("AWS::SQS::Queue", &props(json!({"QueueName": "q"})))
                .is_empty()
        );
    }

    #[test]
    fn an_unhandled_property_sends_the_resource_to_cloud_control() {
        let r = registry();
        let p = json!({"QueueName": "q", "DelaySeconds": 5});
        assert_eq!(
            kind(&r, "AWS::SQS::Queue", p.clone(), None),
            Some(ProviderKind::CloudControl)
        );
        assert_eq!(
            r.unhandled_properties("AWS::SQS::Queue", &props(p)),
            ["DelaySeconds"]
        );
    }

    #[test]
    fn a_type_without_sdk_provider_goes_to_cloud_control() {
        let r = registry();
        assert_eq!(
            kind(&r, "AWS::SNS::Topic", json!({}), None),
            Some(ProviderKind::CloudControl)
        );
    }

    #[test]
    fn cloud_control_is_sticky() {
        let r = registry();
        let p = json!({"QueueName": "q"});
        assert_eq!(
            kind(&r, "AWS::SQS::Queue", p.clone(), None),
            Some(ProviderKind::Sdk)
        );
        assert_eq!(
            kind(
                &r,
                "AWS::SQS::Queue",
                p.clone(),
                Some(ProviderKind::CloudControl)
            ),
            Some(ProviderKind::CloudControl)
        );
        assert_eq!(
            kind(&r, "AWS::SQS::Queue", p, Some(ProviderKind::Sdk)),
            Some(ProviderKind::Sdk)
        );
    }

    #[test]
    fn unknown_types_have_no_route_and_are_listed_at_once() {
        let r = registry();
        assert!(r.route("AWS::Foo::Bar", &Properties::new(), None).is_none());
        // An SDK-only type (no schema) with an unhandled property has no route either.
        assert_eq!(
            kind(&r, "My::Sdk::Only", json!({"A": 1}), None),
            Some(ProviderKind::Sdk)
        );
        assert_eq!(kind(&r, "My::Sdk::Only", json!({"B": 1}), None), None);
        assert_eq!(
            r.check_supported([
                "AWS::SQS::Queue",
                "AWS::Foo::Bar",
                "Custom::X",
                "My::Sdk::Only",
                "AWS::Baz::Qux",
                "AWS::Foo::Bar",
                "AWS::SNS::Topic",
            ]),
            Err(vec![
                "AWS::Foo::Bar".to_string(),
                "AWS::Baz::Qux".to_string()
            ])
        );
        assert_eq!(r.check_supported(["AWS::SNS::Topic", "Custom::Y"]), Ok(()));
    }
}
