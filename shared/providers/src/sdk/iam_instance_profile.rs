//! `AWS::IAM::InstanceProfile` through the IAM API.
//!
//! The physical id (and `Ref`) is the instance profile's name; the attribute is `Arn`.
//! Without an `InstanceProfileName` the name is generated ([`crate::names::physical_name`],
//! at most 128 characters of letters, digits and `+=,.@_-`); such a name is ours alone, so
//! a create that finds it taken (a retry after a lost answer) adopts the profile and
//! brings its roles to the template's. A name the template gives is never taken over: it
//! is looked up first (`GetInstanceProfile`) and a taken one is refused (`name_taken`);
//! taken after the look-up, it is this create's own earlier call.
//!
//! Handled properties: `InstanceProfileName` and `Path` (create-only, as in
//! CloudFormation: a change is [`ProviderError::NotUpdatable`]) and `Roles` (role names;
//! IAM allows one role per profile; roles are removed before others are added, so a
//! swap works in place).
//!
//! Delete removes the roles first (IAM refuses to delete a profile that holds one). A
//! create whose role cannot be added deletes the profile it made, so nothing is left
//! behind.
//!
//! `read_current_state` reports `InstanceProfileName`, `Path` unless `/`, and `Roles`
//! (always: the template requires it), sorted.
//!
//! Calls: create `GetInstanceProfile` (named only) + `CreateInstanceProfile` + 1
//! `AddRoleToInstanceProfile` per role; update 1 remove or add per changed role +
//! `GetInstanceProfile`; delete `GetInstanceProfile` + 1 `RemoveRoleFromInstanceProfile`
//! per role + `DeleteInstanceProfile`.
//!
//! Emulator (fakecloud 0.51.0): no quirk met; the same calls as against AWS. What the
//! emulator cannot show is listed in the test file `providers_iam_policies.rs`.

use std::collections::BTreeSet;

use aws_sdk_iam::Client;
use aws_sdk_iam::types::InstanceProfile;
use serde_json::{Value, json};

use super::common::{
    self, SdkResource, call, context, keep_name, missing_as_none, refuse_taken, sdk_provider,
    string_of, vanished,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &["InstanceProfileName", "Path", "Roles"];

/// Instance profile names: letters, digits and `+=,.@_-`, at most 128 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 128,
    extra: "-_+=,.@",
    lowercase: false,
};

sdk_provider! {
    /// The `AWS::IAM::InstanceProfile` provider.
    IamInstanceProfileProvider(Client), "AWS::IAM::InstanceProfile", HANDLED
}

fn invalid(what: &str) -> ProviderError {
    common::invalid(TYPE, what)
}

/// The template's `Roles`: role names.
fn roles(props: &Properties) -> Result<BTreeSet<String>, ProviderError> {
    let Some(list) = props.get("Roles") else {
        return Ok(BTreeSet::new());
    };
    let not_names = || invalid("Roles must be a list of role names");
    list.as_array()
        .ok_or_else(not_names)?
        .iter()
        .map(|r| r.as_str().map(str::to_string).ok_or_else(not_names))
        .collect()
}

fn held(profile: &InstanceProfile) -> BTreeSet<String> {
    let roles = profile.roles().iter();
    roles.map(|r| r.role_name().to_string()).collect()
}

fn attributes(profile: &InstanceProfile) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Arn".into(), json!(profile.arn()));
    a
}

fn path(props: &Properties) -> String {
    string_of(props, "Path").unwrap_or_else(|| "/".into())
}

impl IamInstanceProfileProvider {
    async fn get_existing(&self, name: &str) -> Result<InstanceProfile, ProviderError> {
        self.find(name).await?.ok_or_else(|| vanished(TYPE, name))
    }

    async fn add_role(&self, name: &str, role: &str) -> Result<(), ProviderError> {
        let added = call(&self.retry, "AddRoleToInstanceProfile", || {
            let r = self.client.add_role_to_instance_profile();
            r.instance_profile_name(name).role_name(role).send()
        })
        .await;
        added.map(drop).map_err(|e| match e {
            ProviderError::NotFound(m) => invalid(&format!("role {role}: {m}")),
            other => other,
        })
    }

    /// Removes `role` from the profile (not there, or gone, is fine).
    async fn remove_role(&self, name: &str, role: &str) -> Result<(), ProviderError> {
        let removed = call(&self.retry, "RemoveRoleFromInstanceProfile", || {
            let r = self.client.remove_role_from_instance_profile();
            r.instance_profile_name(name).role_name(role).send()
        })
        .await;
        missing_as_none(removed).map(drop)
    }

    /// Brings the profile's roles from `old` to `new`: removals first (one role a profile).
    async fn sync_roles(
        &self,
        name: &str,
        old: &BTreeSet<String>,
        new: &BTreeSet<String>,
    ) -> Result<(), ProviderError> {
        for role in old.difference(new) {
            self.remove_role(name, role).await?;
        }
        for role in new.difference(old) {
            self.add_role(name, role).await?;
        }
        Ok(())
    }

    /// `CreateInstanceProfile`: the new profile, or `None` when the name is taken.
    async fn create_profile(
        &self,
        name: &str,
        props: &Properties,
    ) -> Result<Option<InstanceProfile>, ProviderError> {
        let made = call(&self.retry, "CreateInstanceProfile", || {
            self.client
                .create_instance_profile()
                .instance_profile_name(name)
                .set_path(string_of(props, "Path"))
                .send()
        })
        .await;
        match made {
            Ok(out) => Ok(out.instance_profile().cloned()),
            Err(ProviderError::AlreadyExists(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl SdkResource for IamInstanceProfileProvider {
    type Found = InstanceProfile;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "InstanceProfileName";
    const NOUN: &'static str = "instance profile";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let (name, generated) = given_or_generated(request, "InstanceProfileName", NAME_RULES);
        let wanted = roles(props)?;
        refuse_taken::<Self, _>(&name, generated, self.find(&name)).await?;
        let made = self
            .create_profile(&name, props)
            .await
            .map_err(in_context)?;
        let fresh = made.is_some();
        // Taken since the look-up (or a generated name): this create's own profile.
        let profile = match made {
            Some(profile) => profile,
            None => self.get_existing(&name).await?,
        };
        if path(props) != profile.path() {
            return Err(in_context(ProviderError::AlreadyExists(format!(
                "instance profile {name} exists with path {}",
                profile.path()
            ))));
        }
        if let Err(e) = self.sync_roles(&name, &held(&profile), &wanted).await {
            if fresh {
                let _ = self.remove(&name).await;
            }
            return Err(in_context(e));
        }
        Ok(Created {
            sensitive: false,
            attributes: attributes(&profile),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        keep_name(
            request,
            TYPE,
            "InstanceProfileName",
            name,
            "instance profile",
        )?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        if path(&previous) != path(&request.properties) {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: Path {} -> {} needs a new instance profile",
                context(request, TYPE),
                path(&previous),
                path(&request.properties)
            )));
        }
        let old = roles(&previous).unwrap_or_default();
        let new = roles(&request.properties)?;
        self.sync_roles(name, &old, &new)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        let profile = self.get_existing(name).await?;
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: attributes(&profile),
            replaced: false,
        })
    }

    /// Removes the roles first (IAM refuses to delete a profile that holds one).
    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        let profile = self
            .find(name)
            .await?
            .ok_or_else(|| ProviderError::NotFound(format!("instance profile {name}")))?;
        for role in held(&profile) {
            self.remove_role(name, &role).await?;
        }
        call(&self.retry, "DeleteInstanceProfile", || {
            let r = self.client.delete_instance_profile();
            r.instance_profile_name(name).send()
        })
        .await
        .map(drop)
    }

    /// `GetInstanceProfile`, or `None` when the profile does not exist.
    async fn find(&self, name: &str) -> Result<Option<InstanceProfile>, ProviderError> {
        let got = call(&self.retry, "GetInstanceProfile", || {
            let r = self.client.get_instance_profile();
            r.instance_profile_name(name).send()
        })
        .await;
        Ok(missing_as_none(got)?.and_then(|out| out.instance_profile().cloned()))
    }

    fn attributes(&self, _name: &str, profile: &InstanceProfile) -> Attributes {
        attributes(profile)
    }

    async fn state(
        &self,
        _name: &str,
        profile: InstanceProfile,
    ) -> Result<CurrentState, ProviderError> {
        let mut state = Properties::new();
        let name = profile.instance_profile_name();
        state.insert("InstanceProfileName".into(), json!(name));
        if profile.path() != "/" && !profile.path().is_empty() {
            state.insert("Path".into(), json!(profile.path()));
        }
        let roles: Vec<Value> = held(&profile).into_iter().map(Value::String).collect();
        state.insert("Roles".into(), Value::Array(roles));
        Ok(CurrentState::Found(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn roles_parse() {
        let p = props(json!({"Roles": ["b", "a"]}));
        let r = roles(&p).unwrap_or_default();
        assert_eq!(r.into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(roles(&props(json!({"Roles": "a"}))).is_err());
        assert!(roles(&props(json!({}))).is_ok_and(|r| r.is_empty()));
        assert_eq!(path(&props(json!({}))), "/");
    }
}
