//! `AWS::IAM::ManagedPolicy` through the IAM API.
//!
//! The physical id (and `Ref`) is the policy's ARN. The attributes are CloudFormation's:
//! `PolicyArn`, `PolicyId`, `DefaultVersionId`, `AttachmentCount`,
//! `PermissionsBoundaryUsageCount`, `IsAttachable`, `CreateDate` and `UpdateDate` (ISO
//! 8601), as `GetPolicy` answers them.
//!
//! Without a `ManagedPolicyName` the name is generated ([`crate::names::physical_name`],
//! at most 128 characters of letters, digits and `+=,.@_-`); such a name is ours alone, so
//! a create whose `CreatePolicy` finds it taken (an attempt whose answer was lost) adopts
//! that policy. A name the template gives is looked up first (`ListPolicies`, local
//! scope: the ARN needs the account, which a request need not carry) and a taken one is
//! refused (`name_taken`); taken after the look-up, it is this create's own earlier call.
//!
//! Handled properties: `ManagedPolicyName`, `Path`, `Description` (all three create-only,
//! as in CloudFormation: a change is [`ProviderError::NotUpdatable`]), `PolicyDocument`
//! (an update adds a policy version, made the default; when the policy holds IAM's five
//! versions already, the oldest version that is not the default is deleted first), and
//! `Roles`, `Users`, `Groups` (names; attached and detached in place).
//!
//! Delete detaches the policy from every role, user and group that holds it (IAM refuses
//! to delete an attached policy), deletes the versions that are not the default, then the
//! policy. A create that fails after `CreatePolicy` (an attachment refused) deletes what
//! it made the same way, so nothing is left behind.
//!
//! `read_current_state` reports `ManagedPolicyName`, `Path` unless `/`, `Description`
//! unless empty, the default version's `PolicyDocument` (decoded and parsed), and the
//! attached `Roles`, `Users` and `Groups`, each sorted, when there are any.
//!
//! Calls: create 1 `ListPolicies` page per 100 policies (named only) + `CreatePolicy` + 1
//! `Attach*Policy` per principal + `GetPolicy` for the attributes; update
//! `ListPolicyVersions` + `CreatePolicyVersion` (+ `DeletePolicyVersion` at five) when the
//! document changes, 1 attach/detach per changed principal, `GetPolicy`; delete
//! `ListEntitiesForPolicy` + 1 detach per principal + `ListPolicyVersions` + 1
//! `DeletePolicyVersion` per old version + `DeletePolicy`.
//!
//! Emulator (fakecloud 0.51.0): no quirk met; the same calls as against AWS. What the
//! emulator cannot show is listed in the test file `providers_iam_policies.rs`.

use std::collections::BTreeSet;

use aws_sdk_iam::Client;
use aws_sdk_iam::primitives::{DateTime, DateTimeFormat};
use aws_sdk_iam::types::{Policy, PolicyScopeType, PolicyVersion};
use serde_json::{Value, json};

use super::common::{
    self, SdkResource, call, context, find_in_pages, missing_as_none, refuse_taken, sdk_provider,
    string_of, value_string, vanished,
};
use super::iam::document_value;
use super::iam_policy::{Kind, Principal, insert_principals, no_principal, principals};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &[
    "ManagedPolicyName",
    "Path",
    "Description",
    "PolicyDocument",
    "Roles",
    "Users",
    "Groups",
];

/// Managed policy names: letters, digits and `+=,.@_-`, at most 128 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 128,
    extra: "-_+=,.@",
    lowercase: false,
};

/// The most versions IAM keeps of one managed policy.
const MAX_VERSIONS: usize = 5;

/// The properties a change of which needs a new policy, with their IAM defaults.
const CREATE_ONLY: &[(&str, &str)] = &[
    ("ManagedPolicyName", ""),
    ("Path", "/"),
    ("Description", ""),
];

sdk_provider! {
    /// The `AWS::IAM::ManagedPolicy` provider.
    IamManagedPolicyProvider(Client), "AWS::IAM::ManagedPolicy", HANDLED
}

fn invalid(what: &str) -> ProviderError {
    common::invalid(TYPE, what)
}

fn document(props: &Properties) -> Result<String, ProviderError> {
    props
        .get("PolicyDocument")
        .map(value_string)
        .ok_or_else(|| invalid("PolicyDocument is required"))
}

fn date(d: Option<&DateTime>) -> Value {
    d.and_then(|d| d.fmt(DateTimeFormat::DateTime).ok())
        .map_or(Value::Null, Value::String)
}

fn attributes(arn: &str, policy: &Policy) -> Attributes {
    let mut a = Attributes::new();
    a.insert("PolicyArn".into(), json!(arn));
    a.insert("PolicyId".into(), json!(policy.policy_id()));
    a.insert(
        "DefaultVersionId".into(),
        json!(policy.default_version_id()),
    );
    a.insert("AttachmentCount".into(), json!(policy.attachment_count()));
    let boundaries = policy.permissions_boundary_usage_count();
    a.insert("PermissionsBoundaryUsageCount".into(), json!(boundaries));
    a.insert("IsAttachable".into(), json!(policy.is_attachable()));
    a.insert("CreateDate".into(), date(policy.create_date()));
    a.insert("UpdateDate".into(), date(policy.update_date()));
    a
}

/// The version to delete before a new one when the policy holds [`MAX_VERSIONS`]: the
/// oldest that is not the default (by date, then by number).
fn oldest_spare(versions: &[PolicyVersion]) -> Option<String> {
    let number = |v: &PolicyVersion| {
        let id = v.version_id().unwrap_or_default();
        id.trim_start_matches('v')
            .parse::<u64>()
            .unwrap_or(u64::MAX)
    };
    versions
        .iter()
        .filter(|v| !v.is_default_version())
        .min_by_key(|v| {
            (
                v.create_date().map(|d| (d.secs(), d.subsec_nanos())),
                number(v),
            )
        })
        .and_then(|v| v.version_id().map(str::to_string))
}

impl IamManagedPolicyProvider {
    /// The local managed policy called `name`, found by listing (`None`: no such policy).
    async fn by_name(&self, name: &str) -> Result<Option<Policy>, ProviderError> {
        find_in_pages(
            |marker| {
                call(&self.retry, "ListPolicies", move || {
                    self.client
                        .list_policies()
                        .scope(PolicyScopeType::Local)
                        .set_marker(marker.clone())
                        .send()
                })
            },
            |page| page.marker().filter(|_| page.is_truncated()),
            |page| {
                let mut policies = page.policies().iter();
                policies.find(|p| p.policy_name() == Some(name)).cloned()
            },
        )
        .await
    }

    async fn get_existing(&self, arn: &str) -> Result<Policy, ProviderError> {
        self.find(arn).await?.ok_or_else(|| vanished(TYPE, arn))
    }

    /// The roles, users and groups the policy `arn` is attached to.
    async fn entities(&self, arn: &str) -> Result<BTreeSet<Principal>, ProviderError> {
        let mut all = BTreeSet::new();
        find_in_pages(
            |marker| {
                call(&self.retry, "ListEntitiesForPolicy", move || {
                    self.client
                        .list_entities_for_policy()
                        .policy_arn(arn)
                        .set_marker(marker.clone())
                        .send()
                })
            },
            |page| page.marker().filter(|_| page.is_truncated()),
            |page| {
                let roles = page.policy_roles().iter().filter_map(|r| r.role_name());
                all.extend(roles.map(|n| (Kind::Role, n.to_string())));
                let users = page.policy_users().iter().filter_map(|u| u.user_name());
                all.extend(users.map(|n| (Kind::User, n.to_string())));
                let groups = page.policy_groups().iter().filter_map(|g| g.group_name());
                all.extend(groups.map(|n| (Kind::Group, n.to_string())));
                None::<()>
            },
        )
        .await?;
        Ok(all)
    }

    /// Attaches the policy `arn` to `principal` (attached already is fine).
    async fn attach(&self, arn: &str, principal: &Principal) -> Result<(), ProviderError> {
        let (kind, name) = principal;
        let c = &self.client;
        let attached = match kind {
            Kind::Role => call(&self.retry, "AttachRolePolicy", || {
                c.attach_role_policy()
                    .role_name(name)
                    .policy_arn(arn)
                    .send()
            })
            .await
            .map(drop),
            Kind::User => call(&self.retry, "AttachUserPolicy", || {
                c.attach_user_policy()
                    .user_name(name)
                    .policy_arn(arn)
                    .send()
            })
            .await
            .map(drop),
            Kind::Group => call(&self.retry, "AttachGroupPolicy", || {
                c.attach_group_policy()
                    .group_name(name)
                    .policy_arn(arn)
                    .send()
            })
            .await
            .map(drop),
        };
        attached.map_err(|e| no_principal(TYPE, principal, e))
    }

    /// Detaches the policy `arn` from `principal` (not attached, or gone, is fine).
    async fn detach(&self, arn: &str, principal: &Principal) -> Result<(), ProviderError> {
        let (kind, name) = principal;
        let c = &self.client;
        let detached = match kind {
            Kind::Role => call(&self.retry, "DetachRolePolicy", || {
                c.detach_role_policy()
                    .role_name(name)
                    .policy_arn(arn)
                    .send()
            })
            .await
            .map(drop),
            Kind::User => call(&self.retry, "DetachUserPolicy", || {
                c.detach_user_policy()
                    .user_name(name)
                    .policy_arn(arn)
                    .send()
            })
            .await
            .map(drop),
            Kind::Group => call(&self.retry, "DetachGroupPolicy", || {
                c.detach_group_policy()
                    .group_name(name)
                    .policy_arn(arn)
                    .send()
            })
            .await
            .map(drop),
        };
        missing_as_none(detached).map(drop)
    }

    async fn versions(&self, arn: &str) -> Result<Vec<PolicyVersion>, ProviderError> {
        let mut all = Vec::new();
        find_in_pages(
            |marker| {
                call(&self.retry, "ListPolicyVersions", move || {
                    self.client
                        .list_policy_versions()
                        .policy_arn(arn)
                        .set_marker(marker.clone())
                        .send()
                })
            },
            |page| page.marker().filter(|_| page.is_truncated()),
            |page| {
                all.extend(page.versions().iter().cloned());
                None::<()>
            },
        )
        .await?;
        Ok(all)
    }

    async fn delete_version(&self, arn: &str, version: &str) -> Result<(), ProviderError> {
        let deleted = call(&self.retry, "DeletePolicyVersion", || {
            let r = self.client.delete_policy_version().policy_arn(arn);
            r.version_id(version).send()
        })
        .await;
        missing_as_none(deleted).map(drop)
    }

    /// Makes `document` the policy's default version, making room first when it holds
    /// [`MAX_VERSIONS`].
    async fn new_version(&self, arn: &str, document: &str) -> Result<(), ProviderError> {
        let versions = self.versions(arn).await?;
        if versions.len() >= MAX_VERSIONS
            && let Some(oldest) = oldest_spare(&versions)
        {
            self.delete_version(arn, &oldest).await?;
        }
        call(&self.retry, "CreatePolicyVersion", || {
            let r = self.client.create_policy_version().policy_arn(arn);
            r.policy_document(document).set_as_default(true).send()
        })
        .await
        .map(drop)
    }

    /// `CreatePolicy`: the new policy, or `None` when the name is taken.
    async fn create_policy(
        &self,
        name: &str,
        props: &Properties,
    ) -> Result<Option<Policy>, ProviderError> {
        let document = document(props)?;
        let made = call(&self.retry, "CreatePolicy", || {
            self.client
                .create_policy()
                .policy_name(name)
                .set_path(string_of(props, "Path"))
                .set_description(string_of(props, "Description"))
                .policy_document(&document)
                .send()
        })
        .await;
        match made {
            Ok(out) => match out.policy().cloned() {
                Some(policy) => Ok(Some(policy)),
                None => self
                    .by_name(name)
                    .await?
                    .map(Some)
                    .ok_or_else(|| vanished(TYPE, name)),
            },
            Err(ProviderError::AlreadyExists(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Attaches `arn` to every principal of `wanted`; on a failure, deletes the policy
    /// (a create leaves nothing behind) when `undo`.
    async fn attach_all(
        &self,
        arn: &str,
        wanted: &BTreeSet<Principal>,
        undo: bool,
    ) -> Result<(), ProviderError> {
        for principal in wanted {
            if let Err(e) = self.attach(arn, principal).await {
                if undo {
                    let _ = self.remove(arn).await;
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

impl SdkResource for IamManagedPolicyProvider {
    type Found = Policy;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "ManagedPolicyName";
    const NOUN: &'static str = "managed policy";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let (name, generated) = given_or_generated(request, "ManagedPolicyName", NAME_RULES);
        let wanted = principals(TYPE, props)?;
        document(props)?;
        refuse_taken::<Self, _>(&name, generated, self.by_name(&name)).await?;
        let (policy, fresh) = match self.create_policy(&name, props).await.map_err(in_context)? {
            Some(policy) => (policy, true),
            // Taken since the look-up (or a generated name): this create's own policy.
            None => (
                self.by_name(&name)
                    .await?
                    .ok_or_else(|| vanished(TYPE, &name))?,
                false,
            ),
        };
        let arn = policy
            .arn()
            .ok_or_else(|| vanished(TYPE, &name))?
            .to_string();
        self.attach_all(&arn, &wanted, fresh)
            .await
            .map_err(in_context)?;
        let policy = self.get_existing(&arn).await?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(&arn, &policy),
            physical_id: arn,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let arn = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        for (key, default) in CREATE_ONLY {
            let value = |p: &Properties| string_of(p, key).unwrap_or_else(|| default.to_string());
            if value(&previous) != value(props) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{}: {key} {:?} -> {:?} needs a new managed policy",
                    context(request, TYPE),
                    value(&previous),
                    value(props)
                )));
            }
        }
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let new_document = document(props)?;
        if previous.get("PolicyDocument") != props.get("PolicyDocument") {
            self.new_version(arn, &new_document)
                .await
                .map_err(in_context)?;
        }
        let old = principals(TYPE, &previous).unwrap_or_default();
        let new = principals(TYPE, props)?;
        let added: BTreeSet<Principal> = new.difference(&old).cloned().collect();
        self.attach_all(arn, &added, false)
            .await
            .map_err(in_context)?;
        for principal in old.difference(&new) {
            self.detach(arn, principal).await.map_err(in_context)?;
        }
        let policy = self.get_existing(arn).await?;
        Ok(Updated {
            sensitive: false,
            physical_id: arn.to_string(),
            attributes: attributes(arn, &policy),
            replaced: false,
        })
    }

    /// Detaches the policy everywhere and deletes its old versions first (IAM refuses to
    /// delete a policy that is attached or has versions besides the default).
    async fn remove(&self, arn: &str) -> Result<(), ProviderError> {
        for principal in self.entities(arn).await? {
            self.detach(arn, &principal).await?;
        }
        for version in self.versions(arn).await? {
            if !version.is_default_version()
                && let Some(id) = version.version_id()
            {
                self.delete_version(arn, id).await?;
            }
        }
        call(&self.retry, "DeletePolicy", || {
            self.client.delete_policy().policy_arn(arn).send()
        })
        .await
        .map(drop)
    }

    /// `GetPolicy`, or `None` when the policy does not exist.
    async fn find(&self, arn: &str) -> Result<Option<Policy>, ProviderError> {
        if !arn.starts_with("arn:") {
            // Not an ARN (an import by a name given as the id): no such policy.
            return Ok(None);
        }
        let got = call(&self.retry, "GetPolicy", || {
            self.client.get_policy().policy_arn(arn).send()
        })
        .await;
        Ok(missing_as_none(got)?.and_then(|out| out.policy().cloned()))
    }

    /// The explicit id (an ARN; a bare name is looked up), else the template's name, looked
    /// up by listing.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        let Some(id) = request.explicit_or_named(Self::NAME_PROPERTY) else {
            return Ok(None);
        };
        if id.starts_with("arn:") {
            return Ok(Some(id));
        }
        Ok(self
            .by_name(&id)
            .await?
            .and_then(|p| p.arn().map(str::to_string)))
    }

    fn attributes(&self, arn: &str, policy: &Policy) -> Attributes {
        attributes(arn, policy)
    }

    async fn state(&self, arn: &str, policy: Policy) -> Result<CurrentState, ProviderError> {
        let mut state = Properties::new();
        state.insert("ManagedPolicyName".into(), json!(policy.policy_name()));
        if let Some(path) = policy.path().filter(|p| *p != "/" && !p.is_empty()) {
            state.insert("Path".into(), json!(path));
        }
        if let Some(d) = policy.description().filter(|d| !d.is_empty()) {
            state.insert("Description".into(), json!(d));
        }
        if let Some(version) = policy.default_version_id() {
            let got = call(&self.retry, "GetPolicyVersion", || {
                let r = self.client.get_policy_version().policy_arn(arn);
                r.version_id(version).send()
            })
            .await;
            let Some(out) = missing_as_none(got)? else {
                return Ok(CurrentState::NotFound);
            };
            if let Some(doc) = out.policy_version().and_then(|v| v.document()) {
                state.insert("PolicyDocument".into(), document_value(doc));
            }
        }
        let Some(attached) = missing_as_none(self.entities(arn).await)? else {
            return Ok(CurrentState::NotFound);
        };
        insert_principals(&mut state, &attached);
        Ok(CurrentState::Found(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(id: &str, secs: i64, default: bool) -> PolicyVersion {
        PolicyVersion::builder()
            .version_id(id)
            .is_default_version(default)
            .create_date(DateTime::from_secs(secs))
            .build()
    }

    #[test]
    fn the_oldest_spare_version_goes() {
        let versions = [
            version("v1", 10, true),
            version("v3", 30, false),
            version("v2", 20, false),
        ];
        assert_eq!(oldest_spare(&versions).as_deref(), Some("v2"));
        assert_eq!(oldest_spare(&versions[..1]), None);
    }

    #[test]
    fn attributes_are_cloudformations() {
        let policy = Policy::builder()
            .policy_id("ANPA1")
            .default_version_id("v1")
            .attachment_count(2)
            .is_attachable(true)
            .create_date(DateTime::from_secs(0))
            .build();
        let a = attributes("arn:aws:iam::1:policy/p", &policy);
        assert_eq!(a["PolicyArn"], json!("arn:aws:iam::1:policy/p"));
        assert_eq!(a["AttachmentCount"], json!(2));
        assert_eq!(a["CreateDate"], json!("1970-01-01T00:00:00Z"));
        assert_eq!(a["UpdateDate"], Value::Null);
    }
}
