//! `AWS::Lambda::EventSourceMapping` through the Lambda API.
//!
//! The physical id (what `Ref` returns) and the attribute `Id` are the mapping's UUID; the
//! attribute `EventSourceMappingArn` is the ARN Lambda answers (made as
//! `arn:{partition}:lambda:{region}:{account}:event-source-mapping:{uuid}` from the
//! function's ARN when the answer carries none).
//!
//! Handled: `FunctionName`, `EventSourceArn`, `StartingPosition` (these two cannot change
//! in place: [`ProviderError::NotUpdatable`]), and `BatchSize`, `Enabled`,
//! `FilterCriteria`, `MaximumBatchingWindowInSeconds`, `FunctionResponseTypes`,
//! `MaximumRetryAttempts`, `MaximumRecordAgeInSeconds`, `BisectBatchOnFunctionError`,
//! `ParallelizationFactor`, `TumblingWindowInSeconds` and `ScalingConfig`, which
//! `UpdateEventSourceMapping` changes in place with `FunctionName`; a property the template
//! drops is sent as AWS's default (no filters: an empty `Filters` list). `FunctionName` is
//! sent only when it changed. Kafka, MQ, DocumentDB, `DestinationConfig`, `Tags` and
//! the rest are left to Cloud Control.
//!
//! `CreateEventSourceMapping` has no client token. Lambda keeps one mapping per function
//! and event source (SQS, streams), so a create first lists the function's mappings of the
//! event source: one that exists is [`ProviderError::AlreadyExists`]
//! (`SdkResource::name_taken`), and `import` without an explicit id finds it the same way,
//! which is how the engine takes back its own after an interrupted create.
//!
//! Lambda refuses a change while a mapping is `Creating` or `Updating`
//! (`ResourceInUseException`): that is retried as transient.
//!
//! `read_current_state` reports the template's properties with AWS's defaults left out
//! (`BatchSize` 10 for SQS and 100 for other sources, `Enabled` true, no filters,
//! windows 0, retries and record age -1, `ParallelizationFactor` 1) unless the template
//! spells them; `FunctionName` as the template gives it (a name, or the ARN).
//!
//! Calls: create 2 (`ListEventSourceMappings`, `CreateEventSourceMapping`); update 1;
//! delete 1.
//!
//! Emulator (fakecloud 0.51.0): mappings are metadata only (no messages are polled); the
//! answered `EventSourceMappingArn` is `{function ARN}:event-source-mapping/{uuid}`, not
//! AWS's form: it is passed on as answered. `UpdateEventSourceMapping` with a function ARN
//! as `FunctionName` records a mangled ARN (`...:function:arn:aws:lambda:...`), and with
//! `FilterCriteria` `{}` keeps the filters; `{"Filters": []}` removes them.

use aws_sdk_lambda::Client;
use aws_sdk_lambda::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_lambda::operation::get_event_source_mapping::GetEventSourceMappingOutput;
use aws_sdk_lambda::types::{
    EventSourcePosition, Filter, FilterCriteria, FunctionResponseType, ScalingConfig,
};
use serde_json::{Value, json};
use stackflow_core::partition::partition;

use super::common::{
    SdkResource, call, call_classified, context, find_in_pages, int_of, invalid, missing_as_none,
    sdk_provider, string_of,
};
use crate::error::{HttpResponse, ProviderError};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &[
    "FunctionName",
    "EventSourceArn",
    "StartingPosition",
    "BatchSize",
    "Enabled",
    "FilterCriteria",
    "MaximumBatchingWindowInSeconds",
    "FunctionResponseTypes",
    "MaximumRetryAttempts",
    "MaximumRecordAgeInSeconds",
    "BisectBatchOnFunctionError",
    "ParallelizationFactor",
    "TumblingWindowInSeconds",
    "ScalingConfig",
];

/// The properties that need a new mapping.
const CREATE_ONLY: &[&str] = &["EventSourceArn", "StartingPosition"];

/// Integer properties and AWS's value when none is given (`None`: it depends on the
/// source, see [`default_batch_size`]).
const INTEGERS: &[(&str, Option<i32>)] = &[
    ("BatchSize", None),
    ("MaximumBatchingWindowInSeconds", Some(0)),
    ("MaximumRetryAttempts", Some(-1)),
    ("MaximumRecordAgeInSeconds", Some(-1)),
    ("ParallelizationFactor", Some(1)),
    ("TumblingWindowInSeconds", Some(0)),
];

sdk_provider! {
    /// The `AWS::Lambda::EventSourceMapping` provider.
    EventSourceMappingProvider(Client), "AWS::Lambda::EventSourceMapping", HANDLED
}

/// AWS's batch size for an event source: 10 for SQS, 100 for the others.
fn default_batch_size(source: &str) -> i32 {
    if source.contains(":sqs:") { 10 } else { 100 }
}

/// What create and update send, from the template (`Some` for every setting when
/// `defaults` names the event source: an update sends dropped properties as AWS's
/// defaults).
#[derive(Debug, Clone, Default, PartialEq)]
struct Settings {
    integers: Vec<Option<i32>>,
    enabled: Option<bool>,
    bisect: Option<bool>,
    filters: Option<FilterCriteria>,
    response_types: Option<Vec<FunctionResponseType>>,
    scaling: Option<ScalingConfig>,
}

fn bool_of(props: &Properties, key: &str) -> Result<Option<bool>, ProviderError> {
    match props.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
        Some(_) => Err(invalid(TYPE, &format!("{key} must be a boolean"))),
    }
}

fn filters_of(props: &Properties) -> Option<FilterCriteria> {
    let filters = props.get("FilterCriteria")?.get("Filters")?.as_array()?;
    let filters = filters
        .iter()
        .map(|f| {
            let pattern = f.get("Pattern").map(|p| match p {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            Filter::builder().set_pattern(pattern).build()
        })
        .collect();
    Some(FilterCriteria::builder().set_filters(Some(filters)).build())
}

/// No filters: what an update sends to remove them (an empty list; fakecloud keeps the
/// filters when `Filters` is left out).
fn no_filters() -> FilterCriteria {
    FilterCriteria::builder()
        .set_filters(Some(Vec::new()))
        .build()
}

fn settings_of(props: &Properties, defaults: Option<&str>) -> Result<Settings, ProviderError> {
    let mut integers = Vec::new();
    for (key, default) in INTEGERS {
        let default = defaults.map(|source| default.unwrap_or_else(|| default_batch_size(source)));
        integers.push(int_of(TYPE, props, key)?.or(default));
    }
    let response_types = props.get("FunctionResponseTypes").and_then(Value::as_array);
    let response_types = response_types.map(|list| {
        list.iter()
            .filter_map(Value::as_str)
            .map(FunctionResponseType::from)
            .collect()
    });
    let concurrency = props.get("ScalingConfig").map(|s| {
        let max = s.get("MaximumConcurrency").and_then(Value::as_i64);
        ScalingConfig::builder()
            .set_maximum_concurrency(max.and_then(|m| i32::try_from(m).ok()))
            .build()
    });
    let on = defaults.is_some();
    Ok(Settings {
        integers,
        enabled: bool_of(props, "Enabled")?.or(on.then_some(true)),
        bisect: bool_of(props, "BisectBatchOnFunctionError")?.or(on.then_some(false)),
        filters: filters_of(props).or(on.then(no_filters)),
        response_types: response_types.or(on.then(Vec::new)),
        scaling: concurrency.or(on.then(|| ScalingConfig::builder().build())),
    })
}

/// Chains a [`Settings`] onto a create or update request builder.
macro_rules! with_settings {
    ($builder:expr, $s:expr) => {
        $builder
            .set_batch_size($s.integers[0])
            .set_maximum_batching_window_in_seconds($s.integers[1])
            .set_maximum_retry_attempts($s.integers[2])
            .set_maximum_record_age_in_seconds($s.integers[3])
            .set_parallelization_factor($s.integers[4])
            .set_tumbling_window_in_seconds($s.integers[5])
            .set_enabled($s.enabled)
            .set_bisect_batch_on_function_error($s.bisect)
            .set_filter_criteria($s.filters.clone())
            .set_function_response_types($s.response_types.clone())
            .set_scaling_config($s.scaling.clone())
    };
}

/// The `Fn::GetAtt` values: the UUID, and the ARN answered (else made of the function's).
fn attributes(uuid: &str, arn: Option<&str>, function_arn: Option<&str>) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Id".into(), json!(uuid));
    let made = function_arn.and_then(|f| {
        let parts: Vec<&str> = f.split(':').collect();
        (parts.len() >= 5).then(|| {
            let (region, account) = (parts[3], parts[4]);
            format!(
                "arn:{}:lambda:{region}:{account}:event-source-mapping:{uuid}",
                partition(region)
            )
        })
    });
    if let Some(arn) = arn.map(str::to_string).or(made) {
        a.insert("EventSourceMappingArn".into(), json!(arn));
    }
    a
}

/// Errors of calls on a mapping: `ResourceInUseException` (a change in progress) is
/// transient.
fn classify<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    if let SdkError::ServiceError(service) = &error
        && service.err().code() == Some("ResourceInUseException")
    {
        let message = service.err().message().unwrap_or("");
        return ProviderError::Transient(format!("{what}: ResourceInUseException: {message}"));
    }
    ProviderError::from_sdk(what, error)
}

fn required(props: &Properties, key: &str) -> Result<String, ProviderError> {
    string_of(props, key).ok_or_else(|| invalid(TYPE, &format!("{key} is required")))
}

impl EventSourceMappingProvider {
    /// The UUID of the function's mapping of `source`, if one exists.
    async fn listed(&self, function: &str, source: &str) -> Result<Option<String>, ProviderError> {
        let found = find_in_pages(
            |marker| {
                call(&self.retry, "ListEventSourceMappings", move || {
                    self.client
                        .list_event_source_mappings()
                        .function_name(function)
                        .event_source_arn(source)
                        .set_marker(marker.clone())
                        .send()
                })
            },
            |page| page.next_marker(),
            |page| {
                page.event_source_mappings()
                    .iter()
                    .find(|m| m.event_source_arn() == Some(source))
                    .and_then(|m| m.uuid().map(str::to_string))
            },
        );
        missing_as_none(found.await).map(Option::flatten)
    }
}

impl SdkResource for EventSourceMappingProvider {
    type Found = GetEventSourceMappingOutput;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "EventSourceArn";
    const NOUN: &'static str = "event source mapping";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let function = required(props, "FunctionName")?;
        let source = required(props, "EventSourceArn")?;
        let settings = settings_of(props, None)?;
        if self.listed(&function, &source).await?.is_some() {
            return Err(Self::name_taken(&format!("{source} -> {function}")));
        }
        let position =
            string_of(props, "StartingPosition").map(|p| EventSourcePosition::from(p.as_str()));
        let out = call_classified(&self.retry, "CreateEventSourceMapping", classify, || {
            let builder = self
                .client
                .create_event_source_mapping()
                .function_name(&function)
                .event_source_arn(&source)
                .set_starting_position(position.clone());
            with_settings!(builder, settings).send()
        })
        .await
        .map_err(|e| e.context(context(request, TYPE)))?;
        let uuid = out
            .uuid()
            .ok_or_else(|| {
                ProviderError::Other("CreateEventSourceMapping answered no UUID".into())
            })?
            .to_string();
        Ok(Created {
            sensitive: false,
            attributes: attributes(&uuid, out.event_source_mapping_arn(), out.function_arn()),
            physical_id: uuid,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let uuid = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        if let Some(key) = CREATE_ONLY
            .iter()
            .find(|k| props.get(**k) != previous.get(**k))
        {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: {key} cannot change in place",
                context(request, TYPE)
            )));
        }
        let function = required(props, "FunctionName")?;
        // Sent only when it changed: the mapping's function stays as it is otherwise.
        let function =
            (previous.get("FunctionName") != props.get("FunctionName")).then_some(function);
        let source = required(props, "EventSourceArn")?;
        let settings = settings_of(props, Some(&source))?;
        let out = call_classified(&self.retry, "UpdateEventSourceMapping", classify, || {
            let builder = self
                .client
                .update_event_source_mapping()
                .uuid(uuid)
                .set_function_name(function.clone());
            with_settings!(builder, settings).send()
        })
        .await
        .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Updated {
            sensitive: false,
            physical_id: uuid.to_string(),
            attributes: attributes(uuid, out.event_source_mapping_arn(), out.function_arn()),
            replaced: false,
        })
    }

    async fn remove(&self, uuid: &str) -> Result<(), ProviderError> {
        call_classified(&self.retry, "DeleteEventSourceMapping", classify, || {
            self.client.delete_event_source_mapping().uuid(uuid).send()
        })
        .await
        .map(drop)
    }

    /// The explicit id, else the mapping of the template's function and event source.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        if let Some(id) = &request.physical_id {
            return Ok(Some(id.clone()));
        }
        let props = &request.properties;
        match (
            string_of(props, "FunctionName"),
            string_of(props, "EventSourceArn"),
        ) {
            (Some(function), Some(source)) => self.listed(&function, &source).await,
            _ => Ok(None),
        }
    }

    /// `GetEventSourceMapping`, or `None` when the mapping does not exist (or is being
    /// deleted).
    async fn find(&self, uuid: &str) -> Result<Option<Self::Found>, ProviderError> {
        let got = call_classified(&self.retry, "GetEventSourceMapping", classify, || {
            self.client.get_event_source_mapping().uuid(uuid).send()
        })
        .await;
        Ok(missing_as_none(got)?.filter(|m| m.state() != Some("Deleting")))
    }

    fn attributes(&self, uuid: &str, found: &Self::Found) -> Attributes {
        attributes(uuid, found.event_source_mapping_arn(), found.function_arn())
    }

    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let uuid = request.require_physical_id()?;
        Ok(match self.find(uuid).await? {
            Some(found) => CurrentState::Found(state_of(&found, &request.properties)),
            None => CurrentState::NotFound,
        })
    }

    async fn state(&self, _uuid: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(&found, &Properties::new())))
    }
}

/// `FunctionName` as the template gives it: the ARN, or the name when the template gives
/// the name (or nothing).
fn function_in_template_shape(arn: &str, template: Option<&str>) -> String {
    let name = arn.split_once(":function:").map_or(arn, |(_, rest)| rest);
    match template {
        Some(given) if given == arn || given.starts_with("arn:") => arn.to_string(),
        Some(given) if given.contains(':') && arn.ends_with(given) => given.to_string(),
        _ => name.to_string(),
    }
}

/// The mapping in the template's shape, AWS's defaults left out.
fn state_of(found: &GetEventSourceMappingOutput, template: &Properties) -> Properties {
    let mut state = Properties::new();
    let source = found.event_source_arn().unwrap_or_default();
    if let Some(arn) = found.function_arn() {
        let given = template.get("FunctionName").and_then(Value::as_str);
        state.insert(
            "FunctionName".into(),
            json!(function_in_template_shape(arn, given)),
        );
    }
    if !source.is_empty() {
        state.insert("EventSourceArn".into(), json!(source));
    }
    if let Some(position) = found.starting_position() {
        state.insert("StartingPosition".into(), json!(position.as_str()));
    }
    let values = [
        found.batch_size(),
        found.maximum_batching_window_in_seconds(),
        found.maximum_retry_attempts(),
        found.maximum_record_age_in_seconds(),
        found.parallelization_factor(),
        found.tumbling_window_in_seconds(),
    ];
    for ((key, default), value) in INTEGERS.iter().zip(values) {
        let default = default.unwrap_or_else(|| default_batch_size(source));
        let spelled = template.contains_key(*key);
        if let Some(value) = value.filter(|v| *v != default || spelled) {
            state.insert((*key).to_string(), json!(value));
        }
    }
    let enabled = !matches!(found.state(), Some("Disabled" | "Disabling"));
    if !enabled || template.contains_key("Enabled") {
        state.insert("Enabled".into(), json!(enabled));
    }
    let bisect = found.bisect_batch_on_function_error().unwrap_or(false);
    if bisect || template.contains_key("BisectBatchOnFunctionError") {
        state.insert("BisectBatchOnFunctionError".into(), json!(bisect));
    }
    let filters = found
        .filter_criteria()
        .map(|c| c.filters())
        .unwrap_or_default();
    if !filters.is_empty() {
        let filters: Vec<Value> = filters
            .iter()
            .map(|f| json!({"Pattern": f.pattern().unwrap_or_default()}))
            .collect();
        state.insert("FilterCriteria".into(), json!({"Filters": filters}));
    }
    let types = found.function_response_types();
    if !types.is_empty() {
        let types: Vec<&str> = types.iter().map(FunctionResponseType::as_str).collect();
        state.insert("FunctionResponseTypes".into(), json!(types));
    }
    if let Some(max) = found.scaling_config().and_then(|s| s.maximum_concurrency()) {
        state.insert("ScalingConfig".into(), json!({"MaximumConcurrency": max}));
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn settings_and_defaults() {
        let p = props(json!({"BatchSize": "5", "Enabled": false}));
        let s = settings_of(&p, None).expect("settings");
        assert_eq!(s.integers[0], Some(5));
        assert_eq!(s.integers[1], None);
        assert_eq!(s.enabled, Some(false));
        assert_eq!(s.filters, None);
        let s = settings_of(&props(json!({})), Some("arn:aws:sqs:us-east-1:1:q")).expect("ok");
        assert_eq!(s.integers[0], Some(10));
        assert_eq!(s.integers[2], Some(-1));
        assert_eq!(s.enabled, Some(true));
        assert!(settings_of(&props(json!({"Enabled": 3})), None).is_err());
        assert_eq!(
            default_batch_size("arn:aws:kinesis:us-east-1:1:stream/s"),
            100
        );
    }

    #[test]
    fn function_names_and_arns() {
        let arn = "arn:aws:lambda:us-east-1:123456789012:function:f";
        assert_eq!(function_in_template_shape(arn, Some("f")), "f");
        assert_eq!(function_in_template_shape(arn, Some(arn)), arn);
        assert_eq!(function_in_template_shape(arn, None), "f");
        let a = attributes("u", None, Some(arn));
        assert_eq!(
            a["EventSourceMappingArn"],
            json!("arn:aws:lambda:us-east-1:123456789012:event-source-mapping:u")
        );
        let found = GetEventSourceMappingOutput::builder()
            .uuid("u")
            .function_arn(arn)
            .event_source_arn("arn:aws:sqs:us-east-1:123456789012:q")
            .batch_size(10)
            .state("Enabled")
            .maximum_retry_attempts(-1)
            .build();
        let template = props(json!({
            "FunctionName": "f",
            "EventSourceArn": "arn:aws:sqs:us-east-1:123456789012:q"
        }));
        assert_eq!(state_of(&found, &template), template);
        // A default the template spells is reported.
        let mut spelled = template.clone();
        spelled.insert("BatchSize".into(), json!(10));
        spelled.insert("Enabled".into(), json!(true));
        assert_eq!(state_of(&found, &spelled), spelled);
    }
}
