//! `AWS::StepFunctions::StateMachine` through the Step Functions API.
//!
//! The physical id (what `Ref` returns) is the state machine's ARN; the attributes are
//! `Arn`, `Name` and `StateMachineRevisionId` (`INITIAL` after a create, as CloudFormation
//! gives it, then the revision an update answers). Without a `StateMachineName` the name is
//! generated ([`crate::names::physical_name`], at most 80 characters).
//!
//! `CreateStateMachine` answers the existing state machine when everything sent is the
//! same, so a retried create of a generated name (same token, same name) gets the one the
//! first attempt made; when the first attempt's machine differs (`StateMachineAlreadyExists`)
//! the name, which holds the token's hash, is this stack's alone: it is adopted and brought
//! to the template with an update. A name the template gives is looked up once
//! (`ListStateMachines`) before the create: a state machine this stack did not make is
//! refused (`refuse_taken`).
//!
//! Handled properties: `StateMachineName`, `StateMachineType`, `Definition` (an object),
//! `DefinitionString`, `DefinitionSubstitutions` (each `${name}` replaced here before the
//! definition is sent), `RoleArn`, `LoggingConfiguration`, `TracingConfiguration` and
//! `Tags`. `DefinitionS3Location`, `EncryptionConfiguration` and the rest are left to Cloud
//! Control. `StateMachineName` and `StateMachineType` cannot change in place
//! ([`ProviderError::NotUpdatable`]); the definition, role, logging and tracing are
//! updated with `UpdateStateMachine` (a dropped logging or tracing configuration is set
//! back to off), tags with `TagResource`/`UntagResource`.
//!
//! `read_current_state` gives `StateMachineName`, `RoleArn`, the definition in the
//! template's shape (see [`definition::insert_definition`]: the template's own properties
//! when AWS holds what they make), `StateMachineType` unless `STANDARD`,
//! `LoggingConfiguration` unless off, `TracingConfiguration` unless disabled (each as the
//! template spells it when it spells the default), and `Tags`.
//! A state machine being deleted (`DELETING`) is gone.
//!
//! Calls: a create is `ListStateMachines` (named only) and `CreateStateMachine`; an update
//! is `UpdateStateMachine` and the tag calls when the tags change; a delete is
//! `DeleteStateMachine`.
//!
//! Emulator (fakecloud 0.51.0): see `tests/tests/providers_rules_alarms_states.rs`.

mod definition;

use aws_sdk_cloudcontrol::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sfn::Client;
use aws_sdk_sfn::operation::describe_state_machine::DescribeStateMachineOutput;
use aws_sdk_sfn::types::{
    CloudWatchLogsLogGroup, LogDestination, LogLevel, LoggingConfiguration, StateMachineStatus,
    StateMachineType, Tag, TracingConfiguration,
};
use serde_json::{Value, json};

use super::common::{
    SdkResource, Tagging, call_classified, context, find_in_pages, insert_tags, invalid, keep_name,
    missing_as_none, refuse_taken, sdk_provider, sdk_tags, string_of, tag_map, tagging, text,
};
use crate::error::{HttpResponse, ProviderError};
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &[
    "StateMachineName",
    "StateMachineType",
    "Definition",
    "DefinitionString",
    "DefinitionSubstitutions",
    "RoleArn",
    "LoggingConfiguration",
    "TracingConfiguration",
    "Tags",
];

/// State machine names: letters, digits, `-` and `_`, at most 80 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 80,
    extra: "-_",
    lowercase: false,
};

/// The revision id CloudFormation gives a state machine that was never updated.
const INITIAL_REVISION: &str = "INITIAL";

sdk_provider! {
    /// The `AWS::StepFunctions::StateMachine` provider.
    StateMachineProvider(Client), "AWS::StepFunctions::StateMachine", HANDLED
}

/// Step Functions' own error codes, then the shared classification.
fn classify<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let code = error.code().map(str::to_string);
    let message = format!("{what}: {}", error.message().unwrap_or_default());
    match code.as_deref() {
        Some("StateMachineDoesNotExist") => ProviderError::NotFound(message),
        Some("StateMachineAlreadyExists") => ProviderError::AlreadyExists(message),
        Some("StateMachineDeleting") => ProviderError::Transient(message),
        Some(
            "InvalidDefinition" | "InvalidArn" | "InvalidName" | "InvalidLoggingConfiguration",
        )
        | Some("InvalidTracingConfiguration" | "StateMachineTypeNotSupported") => {
            ProviderError::InvalidRequest(message)
        }
        _ => ProviderError::from_sdk(what, error),
    }
}

/// The name at the end of a state machine ARN (`...:stateMachine:NAME`).
fn name_of_arn(arn: &str) -> &str {
    arn.rsplit(':').next().unwrap_or(arn)
}

fn attributes(arn: &str, revision: Option<&str>) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Arn".into(), json!(arn));
    a.insert("Name".into(), json!(name_of_arn(arn)));
    let revision = revision.unwrap_or(INITIAL_REVISION);
    a.insert("StateMachineRevisionId".into(), json!(revision));
    a
}

/// `LoggingConfiguration`, or logging off when the template has none.
fn logging(props: &Properties) -> Result<LoggingConfiguration, ProviderError> {
    let Some(value) = props.get("LoggingConfiguration") else {
        return Ok(LoggingConfiguration::builder().level(LogLevel::Off).build());
    };
    let level = value.get("Level").and_then(text);
    let include = match value.get("IncludeExecutionData") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(s)) => Some(s == "true"),
        Some(_) => return Err(invalid(TYPE, "IncludeExecutionData must be a boolean")),
    };
    let destinations = value
        .get("Destinations")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|d| {
                    let arn = d
                        .get("CloudWatchLogsLogGroup")
                        .and_then(|g| g.get("LogGroupArn"))
                        .and_then(text);
                    let group = CloudWatchLogsLogGroup::builder()
                        .set_log_group_arn(arn)
                        .build();
                    LogDestination::builder()
                        .cloud_watch_logs_log_group(group)
                        .build()
                })
                .collect()
        });
    Ok(LoggingConfiguration::builder()
        .set_level(level.map(|l| LogLevel::from(l.as_str())))
        .set_include_execution_data(include)
        .set_destinations(destinations)
        .build())
}

/// `TracingConfiguration`, or tracing off when the template has none.
fn tracing(props: &Properties) -> TracingConfiguration {
    let enabled = props
        .get("TracingConfiguration")
        .and_then(|t| t.get("Enabled"))
        .map(|e| matches!(e, Value::Bool(true)) || e.as_str() == Some("true"))
        .unwrap_or(false);
    TracingConfiguration::builder().enabled(enabled).build()
}

fn sfn_tags(tags: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Tag>, ProviderError> {
    sdk_tags(TYPE, tags, |k, v| {
        Ok::<_, std::convert::Infallible>(Tag::builder().key(k).value(v).build())
    })
}

fn machine_type(props: &Properties) -> StateMachineType {
    let kind = string_of(props, "StateMachineType").unwrap_or_else(|| "STANDARD".into());
    StateMachineType::from(kind.as_str())
}

impl StateMachineProvider {
    /// The ARN of the state machine named `name` (`ListStateMachines`, every page).
    async fn arn_of(&self, name: &str) -> Result<Option<String>, ProviderError> {
        find_in_pages(
            |token| {
                call_classified(&self.retry, "ListStateMachines", classify, move || {
                    self.client
                        .list_state_machines()
                        .set_next_token(token.clone())
                        .send()
                })
            },
            |page| page.next_token(),
            |page| {
                page.state_machines()
                    .iter()
                    .find(|m| m.name() == name)
                    .map(|m| m.state_machine_arn().to_string())
            },
        )
        .await
    }

    /// `UpdateStateMachine` of `arn` to the template's definition, role, logging and
    /// tracing: the revision id it answers.
    async fn write(&self, arn: &str, props: &Properties) -> Result<Option<String>, ProviderError> {
        let request = self
            .client
            .update_state_machine()
            .state_machine_arn(arn)
            .definition(definition::definition(props)?)
            .set_role_arn(string_of(props, "RoleArn"))
            .logging_configuration(logging(props)?)
            .tracing_configuration(tracing(props));
        let out = call_classified(&self.retry, "UpdateStateMachine", classify, || {
            request.clone().send()
        })
        .await?;
        Ok(out.revision_id().map(str::to_string))
    }

    /// The state machine's tags.
    async fn tags(&self, arn: &str) -> Result<Vec<(String, String)>, ProviderError> {
        let out = call_classified(&self.retry, "ListTagsForResource", classify, || {
            self.client
                .list_tags_for_resource()
                .resource_arn(arn)
                .send()
        })
        .await?;
        Ok(out
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().into())))
            .collect())
    }

    /// Adopts the state machine a previous attempt of this create made under the
    /// generated `name`, bringing it to the template.
    async fn adopt(&self, name: &str, props: &Properties) -> Result<String, ProviderError> {
        let arn = self.arn_of(name).await?.ok_or_else(|| {
            ProviderError::Transient(format!("{TYPE} {name}: exists, but is not listed yet"))
        })?;
        self.write(&arn, props).await?;
        let tags = tag_map(props);
        self.sync_tags(&arn, &tag_map(&Properties::new()), &tags)
            .await?;
        Ok(arn)
    }
}

impl SdkResource for StateMachineProvider {
    type Found = DescribeStateMachineOutput;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "StateMachineName";
    const NOUN: &'static str = "state machine";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let (name, generated) = given_or_generated(request, "StateMachineName", NAME_RULES);
        let definition = definition::definition(props)?;
        let tags = sfn_tags(tag_map(props))?;
        refuse_taken::<Self, _>(&name, generated, self.arn_of(&name)).await?;
        let create = self
            .client
            .create_state_machine()
            .name(&name)
            .definition(definition)
            .set_role_arn(string_of(props, "RoleArn"))
            .r#type(machine_type(props))
            .logging_configuration(logging(props)?)
            .tracing_configuration(tracing(props))
            .set_tags((!tags.is_empty()).then_some(tags));
        let made = call_classified(&self.retry, "CreateStateMachine", classify, || {
            create.clone().send()
        })
        .await;
        let arn = match made {
            Ok(out) => out.state_machine_arn().to_string(),
            Err(ProviderError::AlreadyExists(_)) if generated => self.adopt(&name, props).await?,
            Err(ProviderError::AlreadyExists(_)) => return Err(Self::name_taken(&name)),
            Err(e) => return Err(e.context(context(request, TYPE))),
        };
        Ok(Created {
            sensitive: false,
            attributes: attributes(&arn, None),
            physical_id: arn,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let arn = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        keep_name(
            request,
            TYPE,
            "StateMachineName",
            name_of_arn(arn),
            "state machine",
        )?;
        if machine_type(props) != machine_type(&previous) {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: StateMachineType cannot change in place",
                context(request, TYPE)
            )));
        }
        let revision = self
            .write(arn, props)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        self.sync_tags(arn, &tag_map(&previous), &tag_map(props))
            .await?;
        Ok(Updated {
            sensitive: false,
            physical_id: arn.to_string(),
            attributes: attributes(arn, revision.as_deref()),
            replaced: false,
        })
    }

    async fn remove(&self, arn: &str) -> Result<(), ProviderError> {
        call_classified(&self.retry, "DeleteStateMachine", classify, || {
            self.client
                .delete_state_machine()
                .state_machine_arn(arn)
                .send()
        })
        .await
        .map(drop)
    }

    /// An explicit id may be the ARN or the name; the ARN is looked up by name.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        match (
            &request.physical_id,
            request.string_property("StateMachineName"),
        ) {
            (Some(id), _) if id.starts_with("arn:") => Ok(Some(id.clone())),
            (Some(name), _) => self.arn_of(name).await,
            (None, Some(name)) => self.arn_of(name).await,
            (None, None) => Ok(None),
        }
    }

    /// `DescribeStateMachine`; one being deleted is gone.
    async fn find(&self, arn: &str) -> Result<Option<Self::Found>, ProviderError> {
        let got = call_classified(&self.retry, "DescribeStateMachine", classify, || {
            self.client
                .describe_state_machine()
                .state_machine_arn(arn)
                .send()
        })
        .await;
        Ok(missing_as_none(got)?.filter(|m| m.status() != Some(&StateMachineStatus::Deleting)))
    }

    fn attributes(&self, arn: &str, found: &Self::Found) -> Attributes {
        attributes(arn, found.revision_id())
    }

    /// `DescribeStateMachine` and `ListTagsForResource` at once; the definition is given
    /// in the shape of the request's properties.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let arn = request.require_physical_id()?;
        let (found, tags) = tokio::join!(self.find(arn), self.tags(arn));
        let Some(found) = found? else {
            return Ok(CurrentState::NotFound);
        };
        let mut state = state_of(&found, &request.properties);
        insert_tags(&mut state, tags?);
        Ok(CurrentState::Found(state))
    }

    async fn state(&self, arn: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        let mut state = state_of(&found, &Properties::new());
        insert_tags(&mut state, self.tags(arn).await?);
        Ok(CurrentState::Found(state))
    }
}

tagging! {
    StateMachineProvider, classify,
    "UntagResource" => |client, arn, keys| {
        client.untag_resource().resource_arn(arn).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, arn, tags| {
        client.tag_resource().resource_arn(arn).set_tags(Some(sfn_tags(tags)?))
    },
}

/// The `LoggingConfiguration` in the template's shape; `None` when logging is off.
fn logging_value(config: &LoggingConfiguration) -> Option<Value> {
    let destinations: Vec<Value> = config
        .destinations()
        .iter()
        .filter_map(|d| d.cloud_watch_logs_log_group()?.log_group_arn())
        .map(|arn| json!({"CloudWatchLogsLogGroup": {"LogGroupArn": arn}}))
        .collect();
    let level = config.level().map(|l| l.as_str()).unwrap_or("OFF");
    if level == "OFF" && destinations.is_empty() {
        return None;
    }
    let mut value = serde_json::Map::new();
    if !destinations.is_empty() {
        value.insert("Destinations".into(), Value::Array(destinations));
    }
    if config.include_execution_data() {
        value.insert("IncludeExecutionData".into(), json!(true));
    }
    value.insert("Level".into(), json!(level));
    Some(Value::Object(value))
}

/// The state of a state machine (tags apart), its definition in the shape of `template`.
fn state_of(found: &DescribeStateMachineOutput, template: &Properties) -> Properties {
    let mut state = Properties::new();
    state.insert("StateMachineName".into(), json!(found.name()));
    if !found.role_arn().is_empty() {
        state.insert("RoleArn".into(), json!(found.role_arn()));
    }
    definition::insert_definition(&mut state, found.definition(), template);
    if found.r#type() != &StateMachineType::Standard {
        state.insert("StateMachineType".into(), json!(found.r#type().as_str()));
    }
    if let Some(value) = found.logging_configuration().and_then(logging_value) {
        state.insert("LoggingConfiguration".into(), value);
    }
    if found.tracing_configuration().is_some_and(|t| t.enabled()) {
        state.insert("TracingConfiguration".into(), json!({"Enabled": true}));
    }
    keep_spelled_defaults(&mut state, template);
    state
}

/// Where AWS holds a default that the template spells out (logging `OFF`, tracing
/// disabled, `IncludeExecutionData: false`), the template's spelling: a state machine no
/// one changed shows no drift.
fn keep_spelled_defaults(state: &mut Properties, template: &Properties) {
    let logging_off = logging(template)
        .ok()
        .and_then(|l| logging_value(&l))
        .is_none();
    let spelled = [
        ("LoggingConfiguration", logging_off),
        ("TracingConfiguration", !tracing(template).enabled()),
    ];
    for (key, is_default) in spelled {
        if let (false, true, Some(value)) = (state.contains_key(key), is_default, template.get(key))
        {
            state.insert(key.into(), value.clone());
        }
    }
    let include = template
        .get("LoggingConfiguration")
        .and_then(|l| l.get("IncludeExecutionData"));
    if let (Some(Value::Object(held)), Some(Value::Bool(false))) =
        (state.get_mut("LoggingConfiguration"), include)
    {
        held.entry("IncludeExecutionData").or_insert(json!(false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn logging_converts_both_ways() {
        let value = json!({
            "Destinations": [{"CloudWatchLogsLogGroup": {"LogGroupArn": "arn:aws:logs:x"}}],
            "IncludeExecutionData": true,
            "Level": "ALL"
        });
        let config = logging(&props(json!({"LoggingConfiguration": value}))).expect("valid");
        assert_eq!(logging_value(&config), Some(value));
        let off = logging(&Properties::new()).expect("valid");
        assert_eq!(logging_value(&off), None);
        assert!(!tracing(&Properties::new()).enabled());
        let on = props(json!({"TracingConfiguration": {"Enabled": true}}));
        assert!(tracing(&on).enabled());
    }

    #[test]
    fn spelled_defaults_read_as_the_template() {
        let template = props(json!({
            "LoggingConfiguration": {"Level": "OFF"},
            "TracingConfiguration": {"Enabled": false}
        }));
        let mut state = Properties::new();
        keep_spelled_defaults(&mut state, &template);
        assert_eq!(state, template);
        let template = props(json!({"LoggingConfiguration": {
            "Level": "ERROR", "IncludeExecutionData": false}}));
        let mut state = props(json!({"LoggingConfiguration": {"Level": "ERROR"}}));
        keep_spelled_defaults(&mut state, &template);
        assert_eq!(state, template);
        // What AWS holds wins where it is not the default.
        let mut state = props(json!({"TracingConfiguration": {"Enabled": true}}));
        let off = props(json!({"TracingConfiguration": {"Enabled": false}}));
        keep_spelled_defaults(&mut state, &off);
        assert_eq!(state["TracingConfiguration"], json!({"Enabled": true}));
    }

    #[test]
    fn attributes_are_cloudformation_s() {
        let arn = "arn:aws:states:us-east-1:123456789012:stateMachine:m";
        let a = attributes(arn, None);
        assert_eq!(a["Name"], json!("m"));
        assert_eq!(a["StateMachineRevisionId"], json!("INITIAL"));
        assert_eq!(
            attributes(arn, Some("r1"))["StateMachineRevisionId"],
            json!("r1")
        );
    }
}
