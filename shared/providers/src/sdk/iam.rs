//! `AWS::IAM::Role` through the IAM API.
//!
//! The physical id (and `Ref`) is the role name; the attributes are `Arn` and `RoleId`.
//! Without a `RoleName` the name is generated ([`crate::names::physical_name`], at most 64
//! characters of letters, digits and `+=,.@_-`); such a name is ours alone, so a create
//! that finds it taken (a retry after a lost answer) adopts the role and writes every
//! property onto it again. A taken name the template gives is
//! [`ProviderError::AlreadyExists`].
//!
//! Policy documents (`AssumeRolePolicyDocument`, each inline `Policies[].PolicyDocument`)
//! are JSON objects in the template and JSON text in the API; IAM answers them
//! URL-encoded, so they are decoded and parsed back into objects.
//!
//! Update changes everything in place except `RoleName` and `Path`
//! ([`ProviderError::NotUpdatable`]). Delete first detaches the managed policies and
//! deletes the inline ones (IAM refuses to delete a role that still has any).
//!
//! `read_current_state` reports `RoleName`, `AssumeRolePolicyDocument`, `Path` unless it
//! is `/`, `Description` unless empty, `MaxSessionDuration` unless it is the default 3600,
//! `PermissionsBoundary` when set, `ManagedPolicyArns` (in IAM's order) and `Policies`
//! (sorted by name) when there are any, and `Tags` (a `Key`/`Value` list sorted by key)
//! when there are any.

use std::collections::BTreeMap;

use aws_sdk_iam::Client;
use aws_sdk_iam::types::{Role, Tag};
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
use crate::retry::{RetryPolicy, retry};

/// The resource type this provider handles.
pub const TYPE: &str = "AWS::IAM::Role";

const HANDLED: &[&str] = &[
    "RoleName",
    "Path",
    "AssumeRolePolicyDocument",
    "Description",
    "MaxSessionDuration",
    "ManagedPolicyArns",
    "Policies",
    "PermissionsBoundary",
    "Tags",
];

/// Role names: letters, digits and `+=,.@_-`, at most 64 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 64,
    extra: "-_+=,.@",
    lowercase: false,
};

/// IAM's `MaxSessionDuration` when none is given.
const DEFAULT_MAX_SESSION: i32 = 3600;

/// The `AWS::IAM::Role` provider.
#[derive(Debug, Clone)]
pub struct IamRoleProvider {
    client: Client,
    retry: RetryPolicy,
}

fn invalid(what: &str) -> ProviderError {
    ProviderError::InvalidRequest(format!("{TYPE}: {what}"))
}

/// A policy document as IAM takes it: an object as JSON text, a string as it is.
fn document_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Decodes `%XX` escapes (IAM answers policy documents URL-encoded, RFC 3986 style).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A policy document from IAM as a JSON value: parsed as it comes, else URL-decoded and
/// parsed, else the text as a string.
fn document_value(text: &str) -> Value {
    serde_json::from_str(text)
        .or_else(|_| serde_json::from_str(&percent_decode(text)))
        .unwrap_or_else(|_| json!(percent_decode(text)))
}

fn string_of(props: &Properties, key: &str) -> Option<String> {
    match props.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn int_of(props: &Properties, key: &str) -> Result<Option<i32>, ProviderError> {
    match props.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| invalid(&format!("{key} must be an integer"))),
        Some(Value::String(s)) => s
            .parse()
            .map(Some)
            .map_err(|_| invalid(&format!("{key} must be an integer"))),
        Some(_) => Err(invalid(&format!("{key} must be an integer"))),
    }
}

/// The template's tags as (key, value), by key.
fn tag_map(props: &Properties) -> Result<BTreeMap<String, String>, ProviderError> {
    let Some(tags) = props.get("Tags") else {
        return Ok(BTreeMap::new());
    };
    tags.as_array()
        .ok_or_else(|| invalid("Tags must be a list of Key/Value objects"))?
        .iter()
        .map(|t| {
            let key = t
                .get("Key")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("a tag without a Key"))?;
            let value = match t.get("Value") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            Ok((key.to_string(), value))
        })
        .collect()
}

fn sdk_tags(tags: &BTreeMap<String, String>) -> Result<Vec<Tag>, ProviderError> {
    tags.iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| invalid(&format!("tag {k}: {e}")))
        })
        .collect()
}

/// `ManagedPolicyArns` of the template.
fn managed_arns(props: &Properties) -> Result<Vec<String>, ProviderError> {
    let Some(arns) = props.get("ManagedPolicyArns") else {
        return Ok(Vec::new());
    };
    arns.as_array()
        .ok_or_else(|| invalid("ManagedPolicyArns must be a list"))?
        .iter()
        .map(|a| {
            a.as_str()
                .map(str::to_string)
                .ok_or_else(|| invalid("ManagedPolicyArns must be a list of strings"))
        })
        .collect()
}

/// Inline `Policies` of the template: name → document text.
fn inline_policies(props: &Properties) -> Result<BTreeMap<String, String>, ProviderError> {
    let Some(policies) = props.get("Policies") else {
        return Ok(BTreeMap::new());
    };
    policies
        .as_array()
        .ok_or_else(|| invalid("Policies must be a list"))?
        .iter()
        .map(|p| {
            let name = p
                .get("PolicyName")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("an inline policy without a PolicyName"))?;
            let document = p
                .get("PolicyDocument")
                .ok_or_else(|| invalid(&format!("inline policy {name} has no PolicyDocument")))?;
            Ok((name.to_string(), document_text(document)))
        })
        .collect()
}

fn attributes(role: &Role) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Arn".into(), json!(role.arn()));
    a.insert("RoleId".into(), json!(role.role_id()));
    a
}

/// Swallows a not-found answer (for detaching or deleting what may be gone already).
fn ok_if_gone(result: Result<(), ProviderError>) -> Result<(), ProviderError> {
    match result {
        Err(ProviderError::NotFound(_)) => Ok(()),
        other => other,
    }
}

impl IamRoleProvider {
    /// A provider using `client`, with the default retry policy.
    pub fn new(client: Client) -> Self {
        IamRoleProvider {
            client,
            retry: RetryPolicy::default(),
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// `GetRole`, or `None` when the role does not exist.
    async fn get(&self, name: &str) -> Result<Option<Role>, ProviderError> {
        let got = retry(&self.retry, "GetRole", || async {
            self.client
                .get_role()
                .role_name(name)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("GetRole", e))
        })
        .await;
        match got {
            Ok(out) => Ok(out.role().cloned()),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn get_existing(&self, name: &str) -> Result<Role, ProviderError> {
        self.get(name).await?.ok_or_else(|| {
            ProviderError::NotFound(format!("{TYPE} {name} vanished right after it was written"))
        })
    }

    /// The ARNs of the managed policies attached to the role, in IAM's order.
    async fn attached(&self, name: &str) -> Result<Vec<String>, ProviderError> {
        let mut arns = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = retry(&self.retry, "ListAttachedRolePolicies", || async {
                self.client
                    .list_attached_role_policies()
                    .role_name(name)
                    .set_marker(marker.clone())
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("ListAttachedRolePolicies", e))
            })
            .await?;
            arns.extend(
                page.attached_policies()
                    .iter()
                    .filter_map(|p| p.policy_arn().map(str::to_string)),
            );
            match page.marker() {
                Some(m) if page.is_truncated() => marker = Some(m.to_string()),
                _ => return Ok(arns),
            }
        }
    }

    /// The names of the role's inline policies.
    async fn inline_names(&self, name: &str) -> Result<Vec<String>, ProviderError> {
        let mut names = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = retry(&self.retry, "ListRolePolicies", || async {
                self.client
                    .list_role_policies()
                    .role_name(name)
                    .set_marker(marker.clone())
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("ListRolePolicies", e))
            })
            .await?;
            names.extend(page.policy_names().iter().cloned());
            match page.marker() {
                Some(m) if page.is_truncated() => marker = Some(m.to_string()),
                _ => return Ok(names),
            }
        }
    }

    /// `AttachRolePolicy`; an unknown policy is an invalid request (not a missing role).
    async fn attach(&self, name: &str, arn: &str) -> Result<(), ProviderError> {
        let attached = retry(&self.retry, "AttachRolePolicy", || async {
            self.client
                .attach_role_policy()
                .role_name(name)
                .policy_arn(arn)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| ProviderError::from_sdk("AttachRolePolicy", e))
        })
        .await;
        match attached {
            Err(ProviderError::NotFound(m)) if self.get(name).await?.is_some() => Err(
                ProviderError::InvalidRequest(format!("managed policy {arn}: {m}")),
            ),
            other => other,
        }
    }

    async fn detach(&self, name: &str, arn: &str) -> Result<(), ProviderError> {
        ok_if_gone(
            retry(&self.retry, "DetachRolePolicy", || async {
                self.client
                    .detach_role_policy()
                    .role_name(name)
                    .policy_arn(arn)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| ProviderError::from_sdk("DetachRolePolicy", e))
            })
            .await,
        )
    }

    async fn put_inline(
        &self,
        name: &str,
        policy: &str,
        document: &str,
    ) -> Result<(), ProviderError> {
        retry(&self.retry, "PutRolePolicy", || async {
            self.client
                .put_role_policy()
                .role_name(name)
                .policy_name(policy)
                .policy_document(document)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| ProviderError::from_sdk("PutRolePolicy", e))
        })
        .await
    }

    async fn delete_inline(&self, name: &str, policy: &str) -> Result<(), ProviderError> {
        ok_if_gone(
            retry(&self.retry, "DeleteRolePolicy", || async {
                self.client
                    .delete_role_policy()
                    .role_name(name)
                    .policy_name(policy)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| ProviderError::from_sdk("DeleteRolePolicy", e))
            })
            .await,
        )
    }

    /// Brings the role from `previous` to `props`. `role_fields`: also write the fields
    /// `CreateRole` sets (trust policy, description, session duration, boundary, tags),
    /// which a role just made by `CreateRole` already has.
    async fn sync(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
        role_fields: bool,
    ) -> Result<(), ProviderError> {
        let changed = |key: &str| role_fields && previous.get(key) != props.get(key);

        if changed("AssumeRolePolicyDocument") {
            let document = props
                .get("AssumeRolePolicyDocument")
                .map(document_text)
                .ok_or_else(|| invalid("AssumeRolePolicyDocument is required"))?;
            retry(&self.retry, "UpdateAssumeRolePolicy", || async {
                self.client
                    .update_assume_role_policy()
                    .role_name(name)
                    .policy_document(&document)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| ProviderError::from_sdk("UpdateAssumeRolePolicy", e))
            })
            .await?;
        }

        if changed("Description") || changed("MaxSessionDuration") {
            let description = string_of(props, "Description").unwrap_or_default();
            let duration = int_of(props, "MaxSessionDuration")?.unwrap_or(DEFAULT_MAX_SESSION);
            retry(&self.retry, "UpdateRole", || async {
                self.client
                    .update_role()
                    .role_name(name)
                    .description(&description)
                    .max_session_duration(duration)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| ProviderError::from_sdk("UpdateRole", e))
            })
            .await?;
        }

        if changed("PermissionsBoundary") {
            match string_of(props, "PermissionsBoundary") {
                Some(arn) => {
                    retry(&self.retry, "PutRolePermissionsBoundary", || async {
                        self.client
                            .put_role_permissions_boundary()
                            .role_name(name)
                            .permissions_boundary(&arn)
                            .send()
                            .await
                            .map(|_| ())
                            .map_err(|e| ProviderError::from_sdk("PutRolePermissionsBoundary", e))
                    })
                    .await?;
                }
                None => ok_if_gone(
                    retry(&self.retry, "DeleteRolePermissionsBoundary", || async {
                        self.client
                            .delete_role_permissions_boundary()
                            .role_name(name)
                            .send()
                            .await
                            .map(|_| ())
                            .map_err(|e| {
                                ProviderError::from_sdk("DeleteRolePermissionsBoundary", e)
                            })
                    })
                    .await,
                )?,
            }
        }

        if changed("Tags") {
            let old = tag_map(previous)?;
            let new = tag_map(props)?;
            let removed: Vec<String> = old
                .keys()
                .filter(|k| !new.contains_key(*k))
                .cloned()
                .collect();
            let added: BTreeMap<String, String> = new
                .into_iter()
                .filter(|(k, v)| old.get(k) != Some(v))
                .collect();
            if !removed.is_empty() {
                retry(&self.retry, "UntagRole", || async {
                    self.client
                        .untag_role()
                        .role_name(name)
                        .set_tag_keys(Some(removed.clone()))
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ProviderError::from_sdk("UntagRole", e))
                })
                .await?;
            }
            if !added.is_empty() {
                let tags = sdk_tags(&added)?;
                retry(&self.retry, "TagRole", || async {
                    self.client
                        .tag_role()
                        .role_name(name)
                        .set_tags(Some(tags.clone()))
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ProviderError::from_sdk("TagRole", e))
                })
                .await?;
            }
        }

        let old_arns = managed_arns(previous)?;
        let new_arns = managed_arns(props)?;
        for arn in old_arns.iter().filter(|a| !new_arns.contains(a)) {
            self.detach(name, arn).await?;
        }
        for arn in &new_arns {
            if !old_arns.contains(arn) {
                self.attach(name, arn).await?;
            }
        }

        let old_policies = inline_policies(previous)?;
        let new_policies = inline_policies(props)?;
        for policy in old_policies
            .keys()
            .filter(|p| !new_policies.contains_key(*p))
        {
            self.delete_inline(name, policy).await?;
        }
        for (policy, document) in &new_policies {
            if old_policies.get(policy) != Some(document) {
                self.put_inline(name, policy, document).await?;
            }
        }
        Ok(())
    }
}

impl Provider for IamRoleProvider {
    fn name(&self) -> &str {
        "sdk:AWS::IAM::Role"
    }

    fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
        Some(HANDLED)
    }

    fn create<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let props = &request.properties;
            let context = || format!("{} ({TYPE})", request.logical_id);
            let (name, generated) = given_or_generated(request, "RoleName", NAME_RULES);
            let trust = props
                .get("AssumeRolePolicyDocument")
                .map(document_text)
                .ok_or_else(|| {
                    invalid("AssumeRolePolicyDocument is required").context(context())
                })?;
            let tags = sdk_tags(&tag_map(props)?)?;
            let duration = int_of(props, "MaxSessionDuration")?;
            // Checked before the role exists, so a bad list fails at once.
            managed_arns(props)?;
            inline_policies(props)?;
            let made = retry(&self.retry, "CreateRole", || async {
                self.client
                    .create_role()
                    .role_name(&name)
                    .set_path(string_of(props, "Path"))
                    .assume_role_policy_document(&trust)
                    .set_description(string_of(props, "Description"))
                    .set_max_session_duration(duration)
                    .set_permissions_boundary(string_of(props, "PermissionsBoundary"))
                    .set_tags((!tags.is_empty()).then(|| tags.clone()))
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("CreateRole", e))
            })
            .await;
            let role = match made {
                Ok(out) => {
                    let role = out.role().cloned();
                    self.sync(&name, &Properties::new(), props, false)
                        .await
                        .map_err(|e| e.context(context()))?;
                    match role {
                        Some(role) => role,
                        None => self.get_existing(&name).await?,
                    }
                }
                Err(ProviderError::AlreadyExists(_)) if generated => {
                    // Our own role from an earlier attempt: write everything again.
                    let existing = self.get_existing(&name).await?;
                    if let Some(path) = string_of(props, "Path")
                        && path != existing.path()
                    {
                        return Err(ProviderError::AlreadyExists(format!(
                            "{}: role {name} exists with path {}",
                            context(),
                            existing.path()
                        )));
                    }
                    self.sync(&name, &Properties::new(), props, true)
                        .await
                        .map_err(|e| e.context(context()))?;
                    existing
                }
                Err(e) => return Err(e.context(context())),
            };
            Ok(Created {
                attributes: attributes(&role),
                physical_id: name,
            })
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            let context = || format!("{} ({TYPE})", request.logical_id);
            if let Some(wanted) = request.string_property("RoleName")
                && wanted != name
            {
                return Err(ProviderError::NotUpdatable(format!(
                    "{}: RoleName {name} -> {wanted} needs a new role",
                    context()
                )));
            }
            let previous = request.previous_properties.clone().unwrap_or_default();
            let path = |p: &Properties| string_of(p, "Path").unwrap_or_else(|| "/".into());
            if path(&previous) != path(&request.properties) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{}: Path {} -> {} needs a new role",
                    context(),
                    path(&previous),
                    path(&request.properties)
                )));
            }
            self.sync(name, &previous, &request.properties, true)
                .await
                .map_err(|e| e.context(context()))?;
            let role = self.get_existing(name).await?;
            Ok(Updated {
                physical_id: name.to_string(),
                attributes: attributes(&role),
                replaced: false,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            let result = async {
                for arn in self.attached(name).await? {
                    self.detach(name, &arn).await?;
                }
                for policy in self.inline_names(name).await? {
                    self.delete_inline(name, &policy).await?;
                }
                retry(&self.retry, "DeleteRole", || async {
                    self.client
                        .delete_role()
                        .role_name(name)
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ProviderError::from_sdk("DeleteRole", e))
                })
                .await
            }
            .await;
            match result {
                Ok(()) | Err(ProviderError::NotFound(_)) => Ok(Deleted::Done),
                Err(e) => Err(e.context(format!("{} ({TYPE})", request.logical_id))),
            }
        })
    }

    fn import<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Imported, ProviderError>> {
        Box::pin(async move {
            let Some(name) = request.explicit_or_named("RoleName") else {
                return Ok(Imported::NotDeployedYet);
            };
            Ok(match self.get(&name).await? {
                Some(role) => Imported::Found {
                    physical_id: name,
                    attributes: attributes(&role),
                },
                None => Imported::NotDeployedYet,
            })
        })
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<CurrentState, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            let Some(role) = self.get(name).await? else {
                return Ok(CurrentState::NotFound);
            };
            let mut state = Properties::new();
            state.insert("RoleName".into(), json!(role.role_name()));
            if let Some(doc) = role.assume_role_policy_document() {
                state.insert("AssumeRolePolicyDocument".into(), document_value(doc));
            }
            if role.path() != "/" && !role.path().is_empty() {
                state.insert("Path".into(), json!(role.path()));
            }
            if let Some(d) = role.description()
                && !d.is_empty()
            {
                state.insert("Description".into(), json!(d));
            }
            if let Some(d) = role.max_session_duration()
                && d != DEFAULT_MAX_SESSION
            {
                state.insert("MaxSessionDuration".into(), json!(d));
            }
            if let Some(arn) = role
                .permissions_boundary()
                .and_then(|b| b.permissions_boundary_arn())
            {
                state.insert("PermissionsBoundary".into(), json!(arn));
            }

            let gone = |e: ProviderError| match e {
                ProviderError::NotFound(_) => None,
                e => Some(e),
            };
            let arns = match self.attached(name).await {
                Ok(arns) => arns,
                Err(e) => return gone(e).map_or(Ok(CurrentState::NotFound), Err),
            };
            if !arns.is_empty() {
                state.insert("ManagedPolicyArns".into(), json!(arns));
            }
            let mut names = match self.inline_names(name).await {
                Ok(names) => names,
                Err(e) => return gone(e).map_or(Ok(CurrentState::NotFound), Err),
            };
            names.sort();
            let mut policies = Vec::new();
            for policy in names {
                let got = retry(&self.retry, "GetRolePolicy", || async {
                    self.client
                        .get_role_policy()
                        .role_name(name)
                        .policy_name(&policy)
                        .send()
                        .await
                        .map_err(|e| ProviderError::from_sdk("GetRolePolicy", e))
                })
                .await;
                match got {
                    Ok(out) => policies.push(json!({
                        "PolicyName": policy,
                        "PolicyDocument": document_value(out.policy_document()),
                    })),
                    // Deleted between the list and the get.
                    Err(ProviderError::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            if !policies.is_empty() {
                state.insert("Policies".into(), Value::Array(policies));
            }

            let mut tags: Vec<(String, String)> = role
                .tags()
                .iter()
                .map(|t| (t.key().to_string(), t.value().to_string()))
                .collect();
            tags.sort();
            if !tags.is_empty() {
                let list = tags
                    .into_iter()
                    .map(|(k, v)| json!({"Key": k, "Value": v}))
                    .collect();
                state.insert("Tags".into(), Value::Array(list));
            }
            Ok(CurrentState::Found(state))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::physical_name;

    #[test]
    fn decodes_url_encoded_documents() {
        let doc = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
        let encoded: String = doc
            .to_string()
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        assert_eq!(document_value(&encoded), doc);
        assert_eq!(document_value(&doc.to_string()), doc);
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }

    #[test]
    fn generated_names_fit_iam() {
        let name = physical_name(&"S".repeat(80), "Role", "t", "", NAME_RULES);
        assert!(name.len() <= 64, "{name}");
        assert!(name.contains("-Role-"), "{name}");
    }

    #[test]
    fn template_lists_parse() {
        let props = json!({
            "ManagedPolicyArns": ["arn:aws:iam::aws:policy/ReadOnlyAccess"],
            "Policies": [{"PolicyName": "p", "PolicyDocument": {"Version": "2012-10-17"}}],
            "Tags": [{"Key": "b", "Value": "2"}, {"Key": "a", "Value": 1}]
        });
        let props = props.as_object().cloned().unwrap_or_default();
        assert_eq!(managed_arns(&props).ok().map(|a| a.len()), Some(1));
        assert_eq!(
            inline_policies(&props)
                .ok()
                .and_then(|p| p.get("p").cloned()),
            Some(r#"{"Version":"2012-10-17"}"#.to_string())
        );
        let tags = tag_map(&props).unwrap_or_default();
        assert_eq!(tags.get("a").map(String::as_str), Some("1"));
    }
}
