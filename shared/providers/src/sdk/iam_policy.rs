//! `AWS::IAM::Policy` through the IAM API: one inline policy, `PolicyName` with
//! `PolicyDocument`, put on each role, user and group the template names
//! (`PutRolePolicy`, `PutUserPolicy`, `PutGroupPolicy`).
//!
//! An inline policy has no id of its own in IAM, so the physical id (what `Ref` returns,
//! and the `Id` attribute) is made up the way CloudFormation makes one:
//! `{stack}-{logicalId}-{hash}` ([`crate::names::physical_name`]), the hash covering the
//! request's token. Because the id names nothing in IAM, delete, `read_current_state` and
//! import look the policy up by the `PolicyName` and the principals of the request's
//! properties (the engine sends the recorded properties with every such request). That is
//! why this provider implements [`Provider`] itself instead of `SdkResource` (whose lookups
//! take only the id).
//!
//! Handled properties: `PolicyName`, `PolicyDocument`, `Roles`, `Users`, `Groups` (names,
//! at least one). Everything changes in place, as in CloudFormation: a new document or
//! name is put on every principal, an added principal gets the policy, a removed one
//! loses it; the puts come before the deletes, so no principal is ever without the policy
//! during an update.
//!
//! A create never takes over an inline policy it did not make: when a named principal
//! already holds an inline policy of that name, the create fails with
//! [`ProviderError::AlreadyExists`] (`name_taken`) and nothing is written. A replay of an
//! interrupted create (same token) therefore meets its own policy and is refused too; the
//! engine then imports it (found: the same physical id, from the same token) and adopts it.
//! A create that fails half way deletes the copies it had put, so nothing is left behind.
//!
//! `read_current_state` reports `PolicyName`, the `PolicyDocument` of the first principal
//! holding it (IAM answers it URL-encoded; it is decoded and parsed) and the principals
//! (of those the request names) that hold the policy, each list sorted, when not empty.
//! Not found: no named principal holds it.
//!
//! Calls: create 1 `Get*Policy` + 1 `Put*Policy` per principal; update 1 `Put*Policy`
//! per principal that needs the policy (new, or a new name or document) and 1
//! `Delete*Policy` per principal that loses it; delete 1 `Delete*Policy` per principal.
//!
//! Emulator (fakecloud 0.51.0): no quirk met; the same calls as against AWS.

use std::collections::BTreeSet;

use aws_sdk_iam::Client;
use serde_json::{Value, json};

use super::common::id_attributes as attributes;
use super::common::{call, invalid, missing_as_none, value_string};
use super::iam::document_value;
use crate::error::ProviderError;
use crate::names::{NameRules, generated_name};
use crate::provider::{Created, CurrentState, Deleted, Imported, Properties};
use crate::provider::{Provider, ProviderFuture, ResourceRequest, Updated};
use crate::retry::RetryPolicy;

/// The resource type this provider handles.
pub const TYPE: &str = "AWS::IAM::Policy";

const HANDLED: &[&str] = &["PolicyName", "PolicyDocument", "Roles", "Users", "Groups"];

/// The made-up physical ids: letters, digits and `-`, at most 128 characters.
const ID_RULES: NameRules = NameRules {
    max_len: 128,
    extra: "-",
    lowercase: false,
};

/// What an IAM policy is put on or attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// A role (`Roles`).
    Role,
    /// A user (`Users`).
    User,
    /// A group (`Groups`).
    Group,
}

impl Kind {
    /// Every kind, in the order of the state's keys.
    pub(crate) const ALL: [Kind; 3] = [Kind::Group, Kind::Role, Kind::User];

    /// The template's list property of this kind.
    pub(crate) fn property(self) -> &'static str {
        match self {
            Kind::Role => "Roles",
            Kind::User => "Users",
            Kind::Group => "Groups",
        }
    }

    /// The kind in messages.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Kind::Role => "role",
            Kind::User => "user",
            Kind::Group => "group",
        }
    }
}

/// One principal: its kind and name.
pub(crate) type Principal = (Kind, String);

/// The principals `props` names in `Roles`, `Users` and `Groups` (names; a list that is not
/// a list of strings is invalid).
pub(crate) fn principals(
    type_name: &str,
    props: &Properties,
) -> Result<BTreeSet<Principal>, ProviderError> {
    let mut all = BTreeSet::new();
    for kind in Kind::ALL {
        let Some(list) = props.get(kind.property()) else {
            continue;
        };
        let not_names = || {
            invalid(
                type_name,
                &format!("{} must be a list of names", kind.property()),
            )
        };
        for name in list.as_array().ok_or_else(not_names)? {
            all.insert((kind, name.as_str().ok_or_else(not_names)?.to_string()));
        }
    }
    Ok(all)
}

/// `principals` in the template's shape: one sorted list per kind that has any.
pub(crate) fn insert_principals<'a>(
    state: &mut Properties,
    principals: impl IntoIterator<Item = &'a Principal>,
) {
    let principals: BTreeSet<&Principal> = principals.into_iter().collect();
    for kind in Kind::ALL {
        let names: Vec<&str> = principals
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n.as_str())
            .collect();
        if !names.is_empty() {
            state.insert(kind.property().into(), json!(names));
        }
    }
}

/// A principal that IAM says does not exist, as a wrong request (not a missing policy).
pub(crate) fn no_principal(
    type_name: &str,
    (kind, name): &Principal,
    e: ProviderError,
) -> ProviderError {
    match e {
        ProviderError::NotFound(m) => invalid(type_name, &format!("{} {name}: {m}", kind.noun())),
        other => other,
    }
}

/// What the template asks for: the policy name, the document text and the principals.
struct Wanted {
    name: String,
    document: Option<Value>,
    principals: BTreeSet<Principal>,
}

impl Wanted {
    fn of(props: &Properties) -> Result<Wanted, ProviderError> {
        let name = props
            .get("PolicyName")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(TYPE, "PolicyName is required"))?;
        Ok(Wanted {
            name: name.to_string(),
            document: props.get("PolicyDocument").cloned(),
            principals: principals(TYPE, props)?,
        })
    }

    /// [`Wanted::of`] for a create or an update: a document and a principal are required.
    fn complete(props: &Properties) -> Result<(Wanted, String), ProviderError> {
        let wanted = Wanted::of(props)?;
        let document = wanted
            .document
            .as_ref()
            .map(value_string)
            .ok_or_else(|| invalid(TYPE, "PolicyDocument is required"))?;
        if wanted.principals.is_empty() {
            return Err(invalid(
                TYPE,
                "at least one of Roles, Users or Groups is required",
            ));
        }
        Ok((wanted, document))
    }
}

/// The `AWS::IAM::Policy` provider.
#[derive(Debug, Clone)]
pub struct IamPolicyProvider {
    client: Client,
    retry: RetryPolicy,
}

impl IamPolicyProvider {
    /// A provider using `client`, with the default retry policy.
    pub fn new(client: Client) -> Self {
        IamPolicyProvider {
            client,
            retry: RetryPolicy::default(),
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The document of the inline policy `policy` of `principal`; `None`: it has none of
    /// that name, or the principal does not exist.
    async fn get(
        &self,
        principal: &Principal,
        policy: &str,
    ) -> Result<Option<String>, ProviderError> {
        let (kind, name) = principal;
        let c = &self.client;
        let got = match kind {
            Kind::Role => call(&self.retry, "GetRolePolicy", || {
                c.get_role_policy()
                    .role_name(name)
                    .policy_name(policy)
                    .send()
            })
            .await
            .map(|o| o.policy_document().to_string()),
            Kind::User => call(&self.retry, "GetUserPolicy", || {
                c.get_user_policy()
                    .user_name(name)
                    .policy_name(policy)
                    .send()
            })
            .await
            .map(|o| o.policy_document().to_string()),
            Kind::Group => call(&self.retry, "GetGroupPolicy", || {
                c.get_group_policy()
                    .group_name(name)
                    .policy_name(policy)
                    .send()
            })
            .await
            .map(|o| o.policy_document().to_string()),
        };
        missing_as_none(got)
    }

    /// Puts the inline policy `policy` with `document` on `principal`.
    async fn put(
        &self,
        principal: &Principal,
        policy: &str,
        document: &str,
    ) -> Result<(), ProviderError> {
        let (kind, name) = principal;
        let c = &self.client;
        let put = match kind {
            Kind::Role => call(&self.retry, "PutRolePolicy", || {
                let r = c.put_role_policy().role_name(name);
                r.policy_name(policy).policy_document(document).send()
            })
            .await
            .map(drop),
            Kind::User => call(&self.retry, "PutUserPolicy", || {
                let r = c.put_user_policy().user_name(name);
                r.policy_name(policy).policy_document(document).send()
            })
            .await
            .map(drop),
            Kind::Group => call(&self.retry, "PutGroupPolicy", || {
                let r = c.put_group_policy().group_name(name);
                r.policy_name(policy).policy_document(document).send()
            })
            .await
            .map(drop),
        };
        put.map_err(|e| no_principal(TYPE, principal, e))
    }

    /// Deletes the inline policy `policy` of `principal`; gone already (or no such
    /// principal) is fine.
    async fn delete_from(&self, principal: &Principal, policy: &str) -> Result<(), ProviderError> {
        let (kind, name) = principal;
        let c = &self.client;
        let deleted = match kind {
            Kind::Role => call(&self.retry, "DeleteRolePolicy", || {
                c.delete_role_policy()
                    .role_name(name)
                    .policy_name(policy)
                    .send()
            })
            .await
            .map(drop),
            Kind::User => call(&self.retry, "DeleteUserPolicy", || {
                c.delete_user_policy()
                    .user_name(name)
                    .policy_name(policy)
                    .send()
            })
            .await
            .map(drop),
            Kind::Group => call(&self.retry, "DeleteGroupPolicy", || {
                c.delete_group_policy()
                    .group_name(name)
                    .policy_name(policy)
                    .send()
            })
            .await
            .map(drop),
        };
        missing_as_none(deleted).map(drop)
    }

    /// The principals of `wanted` that hold its policy, with the first one's document.
    async fn holders<'a>(
        &self,
        wanted: &'a Wanted,
    ) -> Result<(Vec<&'a Principal>, Option<String>), ProviderError> {
        let mut holders = Vec::new();
        let mut document = None;
        for principal in &wanted.principals {
            if let Some(found) = self.get(principal, &wanted.name).await? {
                document.get_or_insert(found);
                holders.push(principal);
            }
        }
        Ok((holders, document))
    }

    async fn create_policy(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let (wanted, document) = in_context(request, Wanted::complete(&request.properties))?;
        for principal in &wanted.principals {
            if self.get(principal, &wanted.name).await?.is_some() {
                let what = format!(
                    "{TYPE} {} ({} {})",
                    wanted.name,
                    principal.0.noun(),
                    principal.1
                );
                return Err(ProviderError::name_taken(&what, "policy"));
            }
        }
        let mut done = Vec::new();
        for principal in &wanted.principals {
            let put = self.put(principal, &wanted.name, &document).await;
            if let Err(e) = in_context(request, put) {
                // Undo what this create put, so that a failed create leaves nothing.
                for made in done {
                    let _ = self.delete_from(made, &wanted.name).await;
                }
                return Err(e);
            }
            done.push(principal);
        }
        let id = made_up_id(request);
        Ok(Created {
            sensitive: false,
            attributes: attributes(&id),
            physical_id: id,
        })
    }

    async fn update_policy(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let (new, document) = Wanted::complete(&request.properties)?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let old = Wanted::of(&previous).unwrap_or(Wanted {
            name: new.name.clone(),
            document: None,
            principals: BTreeSet::new(),
        });
        let renamed = old.name != new.name;
        let rewritten = renamed || old.document != new.document;
        for principal in &new.principals {
            if rewritten || !old.principals.contains(principal) {
                self.put(principal, &new.name, &document).await?;
            }
        }
        for principal in &old.principals {
            if renamed || !new.principals.contains(principal) {
                self.delete_from(principal, &old.name).await?;
            }
        }
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes(id),
            replaced: false,
        })
    }

    async fn delete_policy(&self, request: &ResourceRequest) -> Result<Deleted, ProviderError> {
        request.require_physical_id()?;
        let wanted = Wanted::of(&request.properties)?;
        for principal in &wanted.principals {
            self.delete_from(principal, &wanted.name).await?;
        }
        Ok(Deleted::Done)
    }

    async fn import_policy(&self, request: &ResourceRequest) -> Result<Imported, ProviderError> {
        let Ok(wanted) = Wanted::of(&request.properties) else {
            return Ok(Imported::NotDeployedYet);
        };
        if self.holders(&wanted).await?.0.is_empty() {
            return Ok(Imported::NotDeployedYet);
        }
        let id = request
            .physical_id
            .clone()
            .unwrap_or_else(|| made_up_id(request));
        Ok(Imported::Found {
            attributes: attributes(&id),
            physical_id: id,
        })
    }

    async fn read_policy(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        request.require_physical_id()?;
        let wanted = Wanted::of(&request.properties)?;
        let (holders, document) = self.holders(&wanted).await?;
        let Some(document) = document else {
            return Ok(CurrentState::NotFound);
        };
        let mut state = Properties::new();
        state.insert("PolicyName".into(), json!(wanted.name));
        state.insert("PolicyDocument".into(), document_value(&document));
        insert_principals(&mut state, holders);
        Ok(CurrentState::Found(state))
    }
}

/// The physical id of the policy a create `request` makes: `{stack}-{logicalId}-{hash}`.
fn made_up_id(request: &ResourceRequest) -> String {
    generated_name(request, ID_RULES)
}

fn in_context<T>(
    request: &ResourceRequest,
    r: Result<T, ProviderError>,
) -> Result<T, ProviderError> {
    r.map_err(|e| e.context(super::common::context(request, TYPE)))
}

impl Provider for IamPolicyProvider {
    fn name(&self) -> &str {
        "sdk:AWS::IAM::Policy"
    }

    fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
        Some(HANDLED)
    }

    fn create<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Created> {
        // Not in context: a taken name's message stands alone, as every provider's.
        Box::pin(self.create_policy(request))
    }

    fn update<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Updated> {
        Box::pin(async move { in_context(request, self.update_policy(request).await) })
    }

    fn delete<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Deleted> {
        Box::pin(async move { in_context(request, self.delete_policy(request).await) })
    }

    fn import<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Imported> {
        Box::pin(self.import_policy(request))
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> ProviderFuture<'a, CurrentState> {
        Box::pin(self.read_policy(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn principals_parse_and_list_back() {
        let p = props(json!({"Roles": ["r2", "r1"], "Groups": ["g"], "Users": []}));
        let all = principals(TYPE, &p).unwrap_or_default();
        assert_eq!(all.len(), 3);
        let mut state = Properties::new();
        insert_principals(&mut state, &all);
        assert_eq!(
            json!(state),
            json!({"Roles": ["r1", "r2"], "Groups": ["g"]})
        );
        assert!(principals(TYPE, &props(json!({"Roles": "r"}))).is_err());
        assert!(principals(TYPE, &props(json!({"Users": [1]}))).is_err());
    }

    #[test]
    fn a_create_needs_a_document_and_a_principal() {
        let doc = json!({"Version": "2012-10-17", "Statement": []});
        assert!(
            Wanted::complete(&props(json!({"PolicyName": "p", "PolicyDocument": doc}))).is_err()
        );
        assert!(Wanted::complete(&props(json!({"PolicyName": "p", "Roles": ["r"]}))).is_err());
        assert!(Wanted::complete(&props(json!({"PolicyDocument": doc, "Roles": ["r"]}))).is_err());
        let ok = Wanted::complete(&props(
            json!({"PolicyName": "p", "PolicyDocument": doc, "Roles": ["r"]}),
        ));
        assert!(ok.is_ok());
    }

    #[test]
    fn ids_are_made_like_cloudformation_does() {
        let mut r = ResourceRequest::new("stack", "Policy", TYPE, Properties::new());
        r.token = "t".into();
        let id = made_up_id(&r);
        assert!(id.starts_with("stack-Policy-"), "{id}");
        assert_eq!(id, made_up_id(&r));
    }
}
