//! CDK context lookups: the values a CDK app asks its CLI for when it is synthesized
//! (`StringParameter.valueFromLookup`, a pinned stack's `availabilityZones`), listed in its
//! manifest's `missing` with placeholders in the templates. Each is looked up in the
//! account and region it names: in the caller's account with the caller's credentials, in
//! another through the lookup role CDK names there (`lookupRoleArn`,
//! `cdk-hnb659fds-lookup-role-<account>-<region>`). The values are saved in
//! `cdk.context.json` beside `cdk.json`, as the CDK CLI saves them, and the app runs again.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, anyhow, bail};
use aws_types::SdkConfig;
use aws_types::region::Region;
use serde_json::{Map, Value};
use stackflow_core::template::{Environment, MissingContext};
use stackflow_providers::lookups::{AwsLookups, Lookups as _};

/// The lookups stackflow does; an app that asks for another is told how to give it.
pub const PROVIDERS: [&str; 2] = ["availability-zones", "ssm"];

/// One value found for the app.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub key: String,
    pub value: Value,
    /// False for a value that must not be kept (a placeholder the app allowed for a
    /// parameter that does not exist): it is not written to `cdk.context.json`.
    pub save: bool,
}

/// Looks up each of `missing`, `caller` being the account `config` acts in.
pub async fn look_up(
    config: &SdkConfig,
    caller: &str,
    missing: &[MissingContext],
) -> anyhow::Result<Vec<Found>> {
    let mut places: BTreeMap<(String, String), AwsLookups> = BTreeMap::new();
    let mut found = Vec::new();
    for m in missing {
        if !PROVIDERS.contains(&m.provider.as_str()) {
            bail!(
                "the CDK app asks for context `{}`, from a `{}` lookup, which stackflow does not \
                 do (it does {}): run `cdk synth` in the app's folder once, which saves the value \
                 in cdk.context.json, where stackflow reads it",
                m.key,
                m.provider,
                PROVIDERS.join(" and ")
            );
        }
        let text = |k: &str| m.props.get(k).and_then(Value::as_str).map(str::to_string);
        let region = text("region")
            .or_else(|| config.region().map(|r| r.to_string()))
            .ok_or_else(|| anyhow!("context `{}` names no region, and none is set", m.key))?;
        let account = text("account").unwrap_or_else(|| caller.to_string());
        let place = (account.clone(), region.clone());
        if !places.contains_key(&place) {
            let regional = config
                .to_builder()
                .region(Region::new(region.clone()))
                .build();
            let acting = if account == caller {
                regional
            } else {
                let role = lookup_role(m, &account, &region)?;
                crate::aws::assume(&regional, &role).await
            };
            places.insert(place.clone(), AwsLookups::new(&acting));
        }
        let lookups = &places[&place];
        let looked: anyhow::Result<(Value, bool)> = match m.provider.as_str() {
            "availability-zones" => lookups
                .availability_zones(&region)
                .await
                .map(|zones| (Value::from(zones), true))
                .map_err(anyhow::Error::from),
            _ => parameter(lookups, m, &account, &region).await,
        };
        let (value, save) = looked.with_context(|| format!("looking up context `{}`", m.key))?;
        found.push(Found {
            key: m.key.clone(),
            value,
            save,
        });
    }
    Ok(found)
}

/// The lookup role of `m` in `account`, its placeholders filled in.
fn lookup_role(m: &MissingContext, account: &str, region: &str) -> anyhow::Result<String> {
    let named = m.props.get("lookupRoleArn").and_then(Value::as_str);
    let environment = Environment {
        account: Some(account.to_string()),
        region: Some(region.to_string()),
        role: None,
    };
    environment.with_role(named).role.ok_or_else(|| {
        anyhow!(
            "the CDK app asks for context `{}` in account {account}, which is not the caller's, \
             and names no lookup role to read it with there (`lookupRoleArn`): use a \
             synthesizer that names one (CDK's default does) or pass --role-arn",
            m.key
        )
    })
}

/// An SSM parameter's text (`ssm` lookup): a placeholder when the app allows it to be
/// missing (`ignoreErrorOnMissingContext`), which is not saved.
async fn parameter(
    lookups: &AwsLookups,
    m: &MissingContext,
    account: &str,
    region: &str,
) -> anyhow::Result<(Value, bool)> {
    let name = m
        .props
        .get("parameterName")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("context `{}` names no parameterName", m.key))?;
    if let Some(text) = lookups.parameter_text(name).await? {
        return Ok((Value::String(text), true));
    }
    let allowed = m.props.get("ignoreErrorOnMissingContext") == Some(&Value::Bool(true));
    match m.props.get("dummyValue") {
        Some(dummy) if allowed => Ok((dummy.clone(), false)),
        _ => bail!(
            "the CDK app looks up the SSM parameter {name} in account {account}, region \
             {region}, and there is none: create it there, or fix the name in the app"
        ),
    }
}

/// Saves the values of `found` worth keeping in `file` (`cdk.context.json`), keeping what
/// it holds.
pub fn save(file: &Path, found: &[Found]) -> anyhow::Result<()> {
    let mut saved: Map<String, Value> = match std::fs::read_to_string(file) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{}: not a JSON object", file.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot be read", file.display())),
    };
    let keep: Vec<&Found> = found.iter().filter(|f| f.save).collect();
    if keep.is_empty() {
        return Ok(());
    }
    for f in keep {
        saved.insert(f.key.clone(), f.value.clone());
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(saved))?;
    text.push('\n');
    std::fs::write(file, text).with_context(|| format!("{}: cannot be written", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn missing(provider: &str, props: Value) -> MissingContext {
        MissingContext {
            key: format!("{provider}:key"),
            provider: provider.to_string(),
            props: props.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn the_lookup_role_of_another_account_is_filled_in_for_its_partition() {
        let m = missing(
            "ssm",
            json!({"lookupRoleArn": "arn:${AWS::Partition}:iam::222222222222:role/cdk-hnb659fds-lookup-role-222222222222-cn-north-1"}),
        );
        assert_eq!(
            lookup_role(&m, "222222222222", "cn-north-1").unwrap(),
            "arn:aws-cn:iam::222222222222:role/cdk-hnb659fds-lookup-role-222222222222-cn-north-1"
        );
        let none = missing("ssm", json!({}));
        let refused = lookup_role(&none, "222222222222", "us-east-1")
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("`ssm:key` in account 222222222222")
                && refused.contains("lookupRoleArn"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_lookup_stackflow_does_not_do_is_refused_before_any_call_with_the_way_to_give_it() {
        // No endpoint answers here: the refusal comes before any call.
        let config = SdkConfig::builder()
            .region(Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let vpc = missing(
            "vpc-provider",
            json!({"account": "1", "region": "us-east-1"}),
        );
        let refused = look_up(&config, "1", &[vpc]).await.unwrap_err().to_string();
        assert_eq!(
            refused,
            "the CDK app asks for context `vpc-provider:key`, from a `vpc-provider` lookup, \
             which stackflow does not do (it does availability-zones and ssm): run `cdk synth` \
             in the app's folder once, which saves the value in cdk.context.json, where \
             stackflow reads it"
        );
    }

    #[test]
    fn values_are_saved_beside_what_the_file_holds_and_placeholders_are_not() {
        let dir = std::env::temp_dir().join(format!("lookup-save-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cdk.context.json");
        std::fs::write(&file, r#"{"kept": 1}"#).unwrap();
        let found = [
            Found {
                key: "zones".into(),
                value: json!(["a", "b"]),
                save: true,
            },
            Found {
                key: "dummy".into(),
                value: json!("dummy-value-for-/p"),
                save: false,
            },
        ];
        save(&file, &found).unwrap();
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(saved, json!({"kept": 1, "zones": ["a", "b"]}));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
