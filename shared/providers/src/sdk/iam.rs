//! `AWS::IAM::Role` through the IAM API.
//!
//! The physical id (and `Ref`) is the role name; the attributes are `Arn` and `RoleId`.
//! Without a `RoleName` the name is generated ([`crate::names::physical_name`], at most 64
//! characters of letters, digits and `+=,.@_-`); such a name is ours alone, so a create
//! that finds it taken (a retry after a lost answer) adopts the role and writes every
//! property onto it again. A name the template gives is never taken over: `CreateRole`
//! refuses a taken one (`EntityAlreadyExists`), which is [`ProviderError::AlreadyExists`]
//! saying so (`SdkResource::name_taken`).
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

use super::common::{
    self, SdkResource, Tagging, call, context, find_in_pages, insert_tags, int_of, keep_name,
    missing_as_none, sdk_provider, sdk_tags, string_or_number_of, tag_pairs, tagging, value_string,
    vanished,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

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
pub(crate) const DEFAULT_MAX_SESSION: i32 = 3600;

sdk_provider! {
    /// The `AWS::IAM::Role` provider.
    IamRoleProvider(Client), "AWS::IAM::Role", HANDLED
}

fn invalid(what: &str) -> ProviderError {
    common::invalid(TYPE, what)
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
pub(crate) fn document_value(text: &str) -> Value {
    serde_json::from_str(text)
        .or_else(|_| serde_json::from_str(&percent_decode(text)))
        .unwrap_or_else(|_| json!(percent_decode(text)))
}

fn string_of(props: &Properties, key: &str) -> Option<String> {
    string_or_number_of(props, key)
}

/// The template's tags as (key, value), by key.
fn tag_map(props: &Properties) -> Result<BTreeMap<String, String>, ProviderError> {
    Ok(tag_pairs(TYPE, props)?.into_iter().collect())
}

/// The IAM tags of `tags`.
fn iam_tags(tags: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Tag>, ProviderError> {
    sdk_tags(TYPE, tags, |k, v| Tag::builder().key(k).value(v).build())
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
            Ok((name.to_string(), value_string(document)))
        })
        .collect()
}

fn attributes(role: &Role) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Arn".into(), json!(role.arn()));
    a.insert("RoleId".into(), json!(role.role_id()));
    a
}

impl IamRoleProvider {
    async fn get_existing(&self, name: &str) -> Result<Role, ProviderError> {
        self.find(name).await?.ok_or_else(|| vanished(TYPE, name))
    }

    /// The ARNs of the managed policies attached to the role, in IAM's order.
    async fn attached(&self, name: &str) -> Result<Vec<String>, ProviderError> {
        let mut arns = Vec::new();
        find_in_pages(
            |marker| {
                call(&self.retry, "ListAttachedRolePolicies", move || {
                    self.client
                        .list_attached_role_policies()
                        .role_name(name)
                        .set_marker(marker.clone())
                        .send()
                })
            },
            |page| page.marker().filter(|_| page.is_truncated()),
            |page| {
                let policies = page.attached_policies().iter();
                arns.extend(policies.filter_map(|p| p.policy_arn().map(str::to_string)));
                None::<()>
            },
        )
        .await?;
        Ok(arns)
    }

    /// The names of the role's inline policies.
    async fn inline_names(&self, name: &str) -> Result<Vec<String>, ProviderError> {
        let mut names = Vec::new();
        find_in_pages(
            |marker| {
                call(&self.retry, "ListRolePolicies", move || {
                    self.client
                        .list_role_policies()
                        .role_name(name)
                        .set_marker(marker.clone())
                        .send()
                })
            },
            |page| page.marker().filter(|_| page.is_truncated()),
            |page| {
                names.extend(page.policy_names().iter().cloned());
                None::<()>
            },
        )
        .await?;
        Ok(names)
    }

    /// `AttachRolePolicy`; an unknown policy is an invalid request (not a missing role).
    async fn attach(&self, name: &str, arn: &str) -> Result<(), ProviderError> {
        let attached = call(&self.retry, "AttachRolePolicy", || {
            self.client
                .attach_role_policy()
                .role_name(name)
                .policy_arn(arn)
                .send()
        })
        .await;
        match attached {
            Ok(_) => Ok(()),
            Err(ProviderError::NotFound(m)) if self.find(name).await?.is_some() => Err(
                ProviderError::InvalidRequest(format!("managed policy {arn}: {m}")),
            ),
            Err(e) => Err(e),
        }
    }

    /// `DetachRolePolicy`; a policy that is not attached (or a role that is gone) is fine.
    async fn detach(&self, name: &str, arn: &str) -> Result<(), ProviderError> {
        let detached = call(&self.retry, "DetachRolePolicy", || {
            self.client
                .detach_role_policy()
                .role_name(name)
                .policy_arn(arn)
                .send()
        })
        .await;
        missing_as_none(detached).map(|_| ())
    }

    async fn put_inline(
        &self,
        name: &str,
        policy: &str,
        document: &str,
    ) -> Result<(), ProviderError> {
        call(&self.retry, "PutRolePolicy", || {
            self.client
                .put_role_policy()
                .role_name(name)
                .policy_name(policy)
                .policy_document(document)
                .send()
        })
        .await
        .map(|_| ())
    }

    /// `DeleteRolePolicy`; a policy that is gone already is fine.
    async fn delete_inline(&self, name: &str, policy: &str) -> Result<(), ProviderError> {
        let deleted = call(&self.retry, "DeleteRolePolicy", || {
            self.client
                .delete_role_policy()
                .role_name(name)
                .policy_name(policy)
                .send()
        })
        .await;
        missing_as_none(deleted).map(|_| ())
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
        if role_fields {
            self.sync_role_fields(name, previous, props).await?;
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

    /// The fields `CreateRole` sets, from `previous` to `props`.
    async fn sync_role_fields(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let changed = |key: &str| previous.get(key) != props.get(key);
        if changed("AssumeRolePolicyDocument") {
            let document = props
                .get("AssumeRolePolicyDocument")
                .map(value_string)
                .ok_or_else(|| invalid("AssumeRolePolicyDocument is required"))?;
            call(&self.retry, "UpdateAssumeRolePolicy", || {
                self.client
                    .update_assume_role_policy()
                    .role_name(name)
                    .policy_document(&document)
                    .send()
            })
            .await?;
        }
        if changed("Description") || changed("MaxSessionDuration") {
            let description = string_of(props, "Description").unwrap_or_default();
            let duration =
                int_of(TYPE, props, "MaxSessionDuration")?.unwrap_or(DEFAULT_MAX_SESSION);
            call(&self.retry, "UpdateRole", || {
                self.client
                    .update_role()
                    .role_name(name)
                    .description(&description)
                    .max_session_duration(duration)
                    .send()
            })
            .await?;
        }
        if changed("PermissionsBoundary") {
            self.sync_boundary(name, string_of(props, "PermissionsBoundary"))
                .await?;
        }
        if changed("Tags") {
            self.sync_tags(name, &tag_map(previous)?, &tag_map(props)?)
                .await?;
        }
        Ok(())
    }

    /// Puts the permissions boundary `arn`, or deletes the role's (gone already is fine).
    async fn sync_boundary(&self, name: &str, arn: Option<String>) -> Result<(), ProviderError> {
        let Some(arn) = arn else {
            let deleted = call(&self.retry, "DeleteRolePermissionsBoundary", || {
                self.client
                    .delete_role_permissions_boundary()
                    .role_name(name)
                    .send()
            })
            .await;
            return missing_as_none(deleted).map(|_| ());
        };
        call(&self.retry, "PutRolePermissionsBoundary", || {
            self.client
                .put_role_permissions_boundary()
                .role_name(name)
                .permissions_boundary(&arn)
                .send()
        })
        .await
        .map(|_| ())
    }

    /// `CreateRole` with everything it takes from `props`.
    async fn create_role(
        &self,
        name: &str,
        props: &Properties,
    ) -> Result<Option<Role>, ProviderError> {
        let trust = props
            .get("AssumeRolePolicyDocument")
            .map(value_string)
            .ok_or_else(|| invalid("AssumeRolePolicyDocument is required"))?;
        let tags = iam_tags(tag_map(props)?)?;
        let duration = int_of(TYPE, props, "MaxSessionDuration")?;
        // Checked before the role exists, so a bad list fails at once.
        managed_arns(props)?;
        inline_policies(props)?;
        let made = call(&self.retry, "CreateRole", || {
            self.client
                .create_role()
                .role_name(name)
                .set_path(string_of(props, "Path"))
                .assume_role_policy_document(&trust)
                .set_description(string_of(props, "Description"))
                .set_max_session_duration(duration)
                .set_permissions_boundary(string_of(props, "PermissionsBoundary"))
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .send()
        })
        .await?;
        Ok(made.role().cloned())
    }

    /// The role's inline policies in the template's shape, sorted by name (`None`: the
    /// role is gone).
    async fn read_policies(&self, name: &str) -> Result<Option<Vec<Value>>, ProviderError> {
        let Some(mut names) = missing_as_none(self.inline_names(name).await)? else {
            return Ok(None);
        };
        names.sort();
        let mut policies = Vec::new();
        for policy in names {
            let got = call(&self.retry, "GetRolePolicy", || {
                self.client
                    .get_role_policy()
                    .role_name(name)
                    .policy_name(&policy)
                    .send()
            })
            .await;
            // `None`: deleted between the list and the get.
            if let Some(out) = missing_as_none(got)? {
                policies.push(json!({
                    "PolicyName": policy,
                    "PolicyDocument": document_value(out.policy_document()),
                }));
            }
        }
        Ok(Some(policies))
    }
}

impl SdkResource for IamRoleProvider {
    type Found = Role;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "RoleName";
    const NOUN: &'static str = "role";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let (name, generated) = given_or_generated(request, "RoleName", NAME_RULES);
        // A name the template gives is looked up once, before the call (outside its
        // retries): taken, it is someone else's and refused; free, a create that then
        // finds it taken met its own earlier attempt, whose answer was lost.
        crate::sdk::common::refuse_taken::<Self, _>(&name, generated, self.find(&name)).await?;
        let role = match self.create_role(&name, props).await {
            Ok(role) => {
                self.sync(&name, &Properties::new(), props, false)
                    .await
                    .map_err(in_context)?;
                match role {
                    Some(role) => role,
                    None => self.get_existing(&name).await?,
                }
            }
            Err(ProviderError::AlreadyExists(_)) => {
                // Our own role from an earlier attempt: write everything again.
                let existing = self.get_existing(&name).await?;
                if let Some(path) = string_of(props, "Path")
                    && path != existing.path()
                {
                    return Err(ProviderError::AlreadyExists(format!(
                        "{}: role {name} exists with path {}",
                        context(request, TYPE),
                        existing.path()
                    )));
                }
                self.sync(&name, &Properties::new(), props, true)
                    .await
                    .map_err(in_context)?;
                existing
            }
            Err(e) => return Err(in_context(e)),
        };
        Ok(Created {
            sensitive: false,
            attributes: attributes(&role),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        keep_name(request, TYPE, "RoleName", name, "role")?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let path = |p: &Properties| string_of(p, "Path").unwrap_or_else(|| "/".into());
        if path(&previous) != path(&request.properties) {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: Path {} -> {} needs a new role",
                context(request, TYPE),
                path(&previous),
                path(&request.properties)
            )));
        }
        self.sync(name, &previous, &request.properties, true)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        let role = self.get_existing(name).await?;
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: attributes(&role),
            replaced: false,
        })
    }

    /// Detaches the managed policies and deletes the inline ones first (IAM refuses to
    /// delete a role that still has any).
    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        for arn in self.attached(name).await? {
            self.detach(name, &arn).await?;
        }
        for policy in self.inline_names(name).await? {
            self.delete_inline(name, &policy).await?;
        }
        call(&self.retry, "DeleteRole", || {
            self.client.delete_role().role_name(name).send()
        })
        .await
        .map(drop)
    }

    /// `GetRole`, or `None` when the role does not exist.
    async fn find(&self, name: &str) -> Result<Option<Role>, ProviderError> {
        let got = call(&self.retry, "GetRole", || {
            self.client.get_role().role_name(name).send()
        })
        .await;
        Ok(missing_as_none(got)?.and_then(|out| out.role().cloned()))
    }

    fn attributes(&self, _name: &str, role: &Role) -> Attributes {
        attributes(role)
    }

    async fn state(&self, name: &str, role: Role) -> Result<CurrentState, ProviderError> {
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
        let Some(arns) = missing_as_none(self.attached(name).await)? else {
            return Ok(CurrentState::NotFound);
        };
        if !arns.is_empty() {
            state.insert("ManagedPolicyArns".into(), json!(arns));
        }
        let Some(policies) = self.read_policies(name).await? else {
            return Ok(CurrentState::NotFound);
        };
        if !policies.is_empty() {
            state.insert("Policies".into(), Value::Array(policies));
        }
        let tags = role.tags().iter();
        insert_tags(
            &mut state,
            tags.map(|t| (t.key().to_string(), t.value().to_string())),
        );
        Ok(CurrentState::Found(state))
    }
}

tagging! {
    IamRoleProvider, ProviderError::from_sdk,
    "UntagRole" => |client, name, keys| client.untag_role().role_name(name).set_tag_keys(Some(keys)),
    "TagRole" => |client, name, tags| {
        client.tag_role().role_name(name).set_tags(Some(iam_tags(tags)?))
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::physical_name;
    use crate::sdk::common::testing::props;

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
        let template = json!({
            "ManagedPolicyArns": ["arn:aws:iam::aws:policy/ReadOnlyAccess"],
            "Policies": [{"PolicyName": "p", "PolicyDocument": {"Version": "2012-10-17"}}],
            "Tags": [{"Key": "b", "Value": "2"}, {"Key": "a", "Value": 1}]
        });
        let props = props(template);
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
