//! `AWS::ApiGateway::Account` through the API Gateway API (`GetAccount`, `UpdateAccount`).
//!
//! The type is not a resource of its own: it is the account's API Gateway settings in a
//! region, which always exist, and the one property is the role API Gateway writes logs
//! with (`CloudWatchRoleArn`). Every CDK `RestApi` with `cloudWatchRole` makes one.
//!
//! The physical id (what `Ref` and `Fn::GetAtt Id` return) is made from the stack, the
//! logical id and the request's token, as a generated name is ([`physical_name`]); AWS has
//! no id for the settings. Create and update set the role with `UpdateAccount` (`replace
//! /cloudwatchRoleArn`), whatever role the account held before, as CloudFormation does (the
//! settings are one per account and region: two stacks that set them overwrite each other,
//! which is why CloudFormation asks for one such resource per account and region). An
//! update that drops `CloudWatchRoleArn` clears the role only while the account still
//! holds the one this resource set.
//!
//! A delete leaves the settings as they are and answers done, as CloudFormation's delete
//! does (AWS: API Gateway can still assume the role after the stack is deleted; CDK keeps
//! the resource with `DeletionPolicy: Retain` by default).
//!
//! `import` finds the settings under the explicit id, else under this resource's own id:
//! the settings always exist. `read_current_state` reports `CloudWatchRoleArn` when the
//! account has a role.
//!
//! Right after the role is made, AWS refuses it ("The role ARN does not have required
//! permissions set to API Gateway") until IAM has propagated it: that answer is retried as
//! IAM propagation.
//!
//! Calls: create 1 (`UpdateAccount`; none without a role); update 1 (2 when the role is
//! dropped); delete 0; read 1.

use aws_sdk_apigateway::Client;
use aws_sdk_apigateway::types::{Op, PatchOperation};
use serde_json::json;

use super::common::id_attributes as attributes;
use super::common::{SdkResource, call, context, sdk_provider, string_of};
use crate::error::ProviderError;
use crate::names::{NameRules, generated_name};
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &["CloudWatchRoleArn"];

/// The id's rules (AWS has none: those of a generated name of letters, digits and `-`).
const ID_RULES: NameRules = NameRules {
    max_len: 128,
    extra: "-",
    lowercase: false,
};

/// The property, and the path `UpdateAccount` patches.
const ROLE: &str = "CloudWatchRoleArn";
const ROLE_PATH: &str = "/cloudwatchRoleArn";

sdk_provider! {
    /// The `AWS::ApiGateway::Account` provider.
    ApiGatewayAccountProvider(Client), "AWS::ApiGateway::Account", HANDLED
}

/// The id of the settings as `request`'s resource: from the stack, the logical id and the
/// token.
fn own_id(request: &ResourceRequest) -> String {
    generated_name(request, ID_RULES)
}

impl ApiGatewayAccountProvider {
    /// The role the account holds now, `None` when it has none.
    async fn role(&self) -> Result<Option<String>, ProviderError> {
        let got = call(&self.retry, "GetAccount", || {
            self.client.get_account().send()
        })
        .await?;
        Ok(got
            .cloudwatch_role_arn()
            .filter(|r| !r.is_empty())
            .map(str::to_string))
    }

    /// Sets the account's role (`""` clears it).
    async fn set_role(&self, role: &str) -> Result<(), ProviderError> {
        let patch = PatchOperation::builder()
            .op(Op::Replace)
            .path(ROLE_PATH)
            .value(role)
            .build();
        call(&self.retry, "UpdateAccount", || {
            self.client
                .update_account()
                .patch_operations(patch.clone())
                .send()
        })
        .await
        .map(drop)
    }
}

impl SdkResource for ApiGatewayAccountProvider {
    /// The role the account holds.
    type Found = Option<String>;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = ROLE;
    const NOUN: &'static str = "API Gateway account settings";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        if let Some(role) = string_of(&request.properties, ROLE) {
            self.set_role(&role)
                .await
                .map_err(|e| e.context(context(request, TYPE)))?;
        }
        let id = own_id(request);
        Ok(Created {
            sensitive: false,
            attributes: attributes(&id),
            physical_id: id,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let previous = request
            .previous_properties
            .as_ref()
            .and_then(|p| string_of(p, ROLE));
        match (string_of(&request.properties, ROLE), previous) {
            (Some(role), _) => self.set_role(&role).await,
            // Dropped: cleared while the account still holds ours.
            (None, Some(ours)) if self.role().await?.as_deref() == Some(ours.as_str()) => {
                self.set_role("").await
            }
            (None, _) => Ok(()),
        }
        .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes(id),
            replaced: false,
        })
    }

    /// Leaves the settings as they are (see the module's docs).
    async fn remove(&self, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }

    /// The settings always exist.
    async fn find(&self, _id: &str) -> Result<Option<Self::Found>, ProviderError> {
        self.role().await.map(Some)
    }

    fn attributes(&self, id: &str, _found: &Self::Found) -> Attributes {
        attributes(id)
    }

    /// The explicit id, else this resource's own: the settings always exist.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(Some(
            request
                .physical_id
                .clone()
                .unwrap_or_else(|| own_id(request)),
        ))
    }

    async fn state(&self, _id: &str, role: Self::Found) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(role)))
    }
}

fn state_of(role: Option<String>) -> Properties {
    let mut state = Properties::new();
    if let Some(role) = role {
        state.insert(ROLE.into(), json!(role));
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;
    use serde_json::Value;

    #[test]
    fn the_id_is_the_resources_own_and_stable_for_its_token() {
        let mut r = ResourceRequest::new("Api", "ApiAccountA18C9B29", TYPE, props(json!({})));
        r.token = "t1".into();
        let id = own_id(&r);
        assert!(id.starts_with("Api-ApiAccountA18C9B29-"), "{id}");
        assert_eq!(own_id(&r), id);
        r.token = "t2".into();
        assert_ne!(own_id(&r), id);
        assert_eq!(attributes(&id)["Id"], json!(id));
    }

    #[test]
    fn the_state_holds_the_role_only_when_one_is_set() {
        assert_eq!(state_of(None), Properties::new());
        assert_eq!(
            Value::Object(state_of(Some("arn:aws:iam::1:role/r".into()))),
            json!({"CloudWatchRoleArn": "arn:aws:iam::1:role/r"})
        );
    }
}
