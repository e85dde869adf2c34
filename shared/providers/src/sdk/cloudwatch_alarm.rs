//! `AWS::CloudWatch::Alarm` (a metric alarm) through the CloudWatch API.
//!
//! The physical id (what `Ref` returns) is the alarm name; the one attribute is `Arn`.
//! Without an `AlarmName` the name is generated ([`crate::names::physical_name`], at most
//! 255 characters). `PutMetricAlarm` both creates and updates (it replaces the alarm's whole
//! configuration), so a retried create of a generated name (same token, same name) writes
//! the same alarm again. A name the template gives is looked up once before the first write
//! (`refuse_taken`): an alarm this stack did not make is never overwritten.
//!
//! Handled properties: the single-metric form (`MetricName`, `Namespace`, `Statistic` or
//! `ExtendedStatistic`, `Dimensions`, `Period`, `Unit`), the metric math form (`Metrics`,
//! `ThresholdMetricId`), the evaluation (`EvaluationPeriods`, `DatapointsToAlarm`,
//! `Threshold`, `ComparisonOperator`, `TreatMissingData`,
//! `EvaluateLowSampleCountPercentile`), the actions (`ActionsEnabled`, `AlarmActions`,
//! `OKActions`, `InsufficientDataActions`), `AlarmDescription` and `Tags`. Only
//! `AlarmName` cannot change in place ([`ProviderError::NotUpdatable`]); every other
//! property is written again by the update's `PutMetricAlarm`, and tags (which
//! `PutMetricAlarm` sets only when it creates) through `TagResource`/`UntagResource`.
//!
//! `read_current_state` reports the properties in the template's shape, AWS's defaults
//! left out (`ActionsEnabled` true, `TreatMissingData` `missing`, empty action and
//! dimension lists); `Threshold` is an integer when it is a whole number.
//!
//! Calls: a create is `DescribeAlarms` (named only) and `PutMetricAlarm`; an update is
//! `PutMetricAlarm` and the tag calls when the tags change; a delete is `DeleteAlarms`. The
//! `Arn` is made of the stack's id (its account) and the client's region; only when the
//! request carries no stack id of this region is it read (`DescribeAlarms`, one call more).
//! `read_current_state` sends `DescribeAlarms` and `ListTagsForResource` at once when the
//! stack's id tells the ARN.
//!
//! Emulator (fakecloud 0.51.0): see `tests/tests/providers_rules_alarms_states.rs`.

use aws_sdk_cloudwatch::Client;
use aws_sdk_cloudwatch::operation::put_metric_alarm::builders::PutMetricAlarmFluentBuilder;
use aws_sdk_cloudwatch::types::{
    AlarmType, ComparisonOperator, Dimension, Metric, MetricAlarm, MetricDataQuery, MetricStat,
    StandardUnit, Statistic, Tag,
};
use serde_json::{Value, json};

use super::common::{
    SdkResource, Tagging, call, context, insert_tags, invalid, keep_name, refuse_taken,
    sdk_provider, sdk_tags, string_of, tag_map, tagging, text, vanished,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &[
    "AlarmName",
    "AlarmDescription",
    "ActionsEnabled",
    "AlarmActions",
    "OKActions",
    "InsufficientDataActions",
    "MetricName",
    "Namespace",
    "Statistic",
    "ExtendedStatistic",
    "Dimensions",
    "Period",
    "Unit",
    "EvaluationPeriods",
    "DatapointsToAlarm",
    "Threshold",
    "ComparisonOperator",
    "TreatMissingData",
    "EvaluateLowSampleCountPercentile",
    "Metrics",
    "ThresholdMetricId",
    "Tags",
];

/// Alarm names: any printable characters, at most 255; generated ones keep to a safe set.
const NAME_RULES: NameRules = NameRules {
    max_len: 255,
    extra: "-_.",
    lowercase: false,
};

sdk_provider! {
    /// The `AWS::CloudWatch::Alarm` provider.
    AlarmProvider(Client), "AWS::CloudWatch::Alarm", HANDLED
}

/// A list of strings (`AlarmActions`, ...): `None` when absent, invalid when not a list.
fn strings(props: &Properties, key: &str) -> Result<Option<Vec<String>>, ProviderError> {
    let Some(value) = props.get(key) else {
        return Ok(None);
    };
    let list = value
        .as_array()
        .ok_or_else(|| invalid(TYPE, &format!("{key} must be a list of strings")))?;
    list.iter()
        .map(|v| text(v).ok_or_else(|| invalid(TYPE, &format!("{key} must hold strings"))))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// An integer of `value` (a number or a numeric string), `key` naming it in the error.
fn int_value(value: Option<&Value>, key: &str) -> Result<Option<i32>, ProviderError> {
    let bad = || invalid(TYPE, &format!("{key} must be an integer"));
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(bad),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// `Threshold`: a number or a numeric string.
fn threshold(props: &Properties) -> Result<Option<f64>, ProviderError> {
    let bad = || invalid(TYPE, "Threshold must be a number");
    match props.get("Threshold") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_f64().map(Some).ok_or_else(bad),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// A boolean property (`true`/`false` or their strings).
fn boolean(value: Option<&Value>, key: &str) -> Result<Option<bool>, ProviderError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) => s
            .parse()
            .map(Some)
            .map_err(|_| invalid(TYPE, &format!("{key} must be a boolean"))),
        Some(_) => Err(invalid(TYPE, &format!("{key} must be a boolean"))),
    }
}

/// A `Name`/`Value` list of dimensions.
fn dimensions(value: Option<&Value>) -> Result<Option<Vec<Dimension>>, ProviderError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let bad = || invalid(TYPE, "Dimensions must be a list of Name/Value objects");
    let list = value.as_array().ok_or_else(bad)?;
    list.iter()
        .map(|d| {
            let name = d.get("Name").and_then(text).ok_or_else(bad)?;
            let value = d.get("Value").and_then(text).ok_or_else(bad)?;
            Ok(Dimension::builder().name(name).value(value).build())
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// One `Metrics` entry (a `MetricDataQuery`).
fn query(value: &Value) -> Result<MetricDataQuery, ProviderError> {
    let get = |k: &str| value.get(k);
    let stat = match get("MetricStat") {
        None => None,
        Some(s) => {
            let metric = s.get("Metric").map(|m| {
                Ok::<_, ProviderError>(
                    Metric::builder()
                        .set_metric_name(m.get("MetricName").and_then(text))
                        .set_namespace(m.get("Namespace").and_then(text))
                        .set_dimensions(dimensions(m.get("Dimensions"))?)
                        .build(),
                )
            });
            Some(
                MetricStat::builder()
                    .set_metric(metric.transpose()?)
                    .set_period(int_value(s.get("Period"), "MetricStat.Period")?)
                    .set_stat(s.get("Stat").and_then(text))
                    .set_unit(
                        s.get("Unit")
                            .and_then(text)
                            .map(|u| StandardUnit::from(u.as_str())),
                    )
                    .build(),
            )
        }
    };
    Ok(MetricDataQuery::builder()
        .set_id(get("Id").and_then(text))
        .set_expression(get("Expression").and_then(text))
        .set_label(get("Label").and_then(text))
        .set_return_data(boolean(get("ReturnData"), "ReturnData")?)
        .set_period(int_value(get("Period"), "Period")?)
        .set_account_id(get("AccountId").and_then(text))
        .set_metric_stat(stat)
        .build())
}

/// `Metrics`: the metric math queries.
fn queries(props: &Properties) -> Result<Option<Vec<MetricDataQuery>>, ProviderError> {
    let Some(value) = props.get("Metrics") else {
        return Ok(None);
    };
    let list = value
        .as_array()
        .ok_or_else(|| invalid(TYPE, "Metrics must be a list"))?;
    list.iter().map(query).collect::<Result<_, _>>().map(Some)
}

/// The CloudWatch tags of `tags`.
fn cw_tags(tags: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Tag>, ProviderError> {
    sdk_tags(TYPE, tags, |k, v| {
        Ok::<_, std::convert::Infallible>(Tag::builder().key(k).value(v).build())
    })
}

/// `request` with every alarm property of `props` (all of them: `PutMetricAlarm` replaces
/// the whole configuration).
fn alarm_request(
    request: PutMetricAlarmFluentBuilder,
    props: &Properties,
) -> Result<PutMetricAlarmFluentBuilder, ProviderError> {
    let unit = string_of(props, "Unit").map(|u| StandardUnit::from(u.as_str()));
    let statistic = string_of(props, "Statistic").map(|s| Statistic::from(s.as_str()));
    let operator = string_of(props, "ComparisonOperator");
    Ok(request
        .set_alarm_description(string_of(props, "AlarmDescription"))
        .set_actions_enabled(boolean(props.get("ActionsEnabled"), "ActionsEnabled")?)
        .set_alarm_actions(strings(props, "AlarmActions")?)
        .set_ok_actions(strings(props, "OKActions")?)
        .set_insufficient_data_actions(strings(props, "InsufficientDataActions")?)
        .set_metric_name(string_of(props, "MetricName"))
        .set_namespace(string_of(props, "Namespace"))
        .set_statistic(statistic)
        .set_extended_statistic(string_of(props, "ExtendedStatistic"))
        .set_dimensions(dimensions(props.get("Dimensions"))?)
        .set_period(int_value(props.get("Period"), "Period")?)
        .set_unit(unit)
        .set_evaluation_periods(int_value(
            props.get("EvaluationPeriods"),
            "EvaluationPeriods",
        )?)
        .set_datapoints_to_alarm(int_value(
            props.get("DatapointsToAlarm"),
            "DatapointsToAlarm",
        )?)
        .set_threshold(threshold(props)?)
        .set_comparison_operator(operator.map(|o| ComparisonOperator::from(o.as_str())))
        .set_treat_missing_data(string_of(props, "TreatMissingData"))
        .set_evaluate_low_sample_count_percentile(string_of(
            props,
            "EvaluateLowSampleCountPercentile",
        ))
        .set_metrics(queries(props)?)
        .set_threshold_metric_id(string_of(props, "ThresholdMetricId")))
}

/// The ARN of alarm `name` in the stack's account, from the stack's id
/// (`arn:PARTITION:cloudformation:REGION:ACCOUNT:stack/...`) when it names `region`;
/// `None` when the account is not known so.
fn arn_in_stack_account(stack_id: Option<&str>, region: &str, name: &str) -> Option<String> {
    let mut parts = stack_id?.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("cloudformation"), Some(at), Some(account)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let is_account = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    (is_account && at == region && !region.is_empty())
        .then(|| format!("arn:{partition}:cloudwatch:{region}:{account}:alarm:{name}"))
}

fn arn_attributes(arn: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Arn".into(), json!(arn));
    a
}

fn attributes_of(alarm: &MetricAlarm) -> Attributes {
    let mut a = Attributes::new();
    if let Some(arn) = alarm.alarm_arn() {
        a.insert("Arn".into(), json!(arn));
    }
    a
}

impl AlarmProvider {
    /// `PutMetricAlarm` of alarm `name` with `props`; `tags` only when it creates.
    async fn put(
        &self,
        name: &str,
        props: &Properties,
        tags: Option<Vec<Tag>>,
    ) -> Result<(), ProviderError> {
        let request = alarm_request(self.client.put_metric_alarm().alarm_name(name), props)?
            .set_tags(tags.filter(|t| !t.is_empty()));
        call(&self.retry, "PutMetricAlarm", || request.clone().send())
            .await
            .map(drop)
    }

    /// The ARN of alarm `name`, which must exist now (right after a write): made of the
    /// stack's id and the client's region when they tell the account, else read
    /// (`DescribeAlarms`).
    async fn arn_now(
        &self,
        request: &ResourceRequest,
        name: &str,
    ) -> Result<String, ProviderError> {
        let region = self
            .client
            .config()
            .region()
            .map(|r| r.as_ref().to_string());
        let stack_id = request.stack_id.as_deref();
        if let Some(arn) = region.and_then(|r| arn_in_stack_account(stack_id, &r, name)) {
            return Ok(arn);
        }
        let alarm = self.find(name).await?.ok_or_else(|| vanished(TYPE, name))?;
        alarm
            .alarm_arn()
            .map(str::to_string)
            .ok_or_else(|| vanished(TYPE, name))
    }

    /// The alarm's tags.
    async fn tags(&self, arn: &str) -> Result<Vec<(String, String)>, ProviderError> {
        let out = call(&self.retry, "ListTagsForResource", || {
            self.client
                .list_tags_for_resource()
                .resource_arn(arn)
                .send()
        })
        .await?;
        Ok(out
            .tags()
            .iter()
            .filter_map(|t| {
                Some((
                    t.key()?.to_string(),
                    t.value().unwrap_or_default().to_string(),
                ))
            })
            .collect())
    }
}

impl SdkResource for AlarmProvider {
    type Found = MetricAlarm;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "AlarmName";
    const NOUN: &'static str = "alarm";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let (name, generated) = given_or_generated(request, "AlarmName", NAME_RULES);
        let tags = cw_tags(tag_map(props))?;
        refuse_taken::<Self, _>(&name, generated, self.find(&name)).await?;
        self.put(&name, props, Some(tags))
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        let arn = self.arn_now(request, &name).await?;
        Ok(Created {
            sensitive: false,
            attributes: arn_attributes(&arn),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        keep_name(request, TYPE, "AlarmName", name, "alarm")?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        self.put(name, props, None)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        let arn = self.arn_now(request, name).await?;
        self.sync_tags(&arn, &tag_map(&previous), &tag_map(props))
            .await?;
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: arn_attributes(&arn),
            replaced: false,
        })
    }

    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        call(&self.retry, "DeleteAlarms", || {
            self.client.delete_alarms().alarm_names(name).send()
        })
        .await
        .map(drop)
    }

    /// `DescribeAlarms` of the metric alarm `name`.
    async fn find(&self, name: &str) -> Result<Option<MetricAlarm>, ProviderError> {
        let out = call(&self.retry, "DescribeAlarms", || {
            self.client
                .describe_alarms()
                .alarm_names(name)
                .alarm_types(AlarmType::MetricAlarm)
                .send()
        })
        .await?;
        Ok(out
            .metric_alarms()
            .iter()
            .find(|a| a.alarm_name() == Some(name))
            .cloned())
    }

    /// `DescribeAlarms` and `ListTagsForResource` at once when the stack's id tells the
    /// ARN; else one after the other (the tags need the ARN the description holds).
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let name = request.require_physical_id()?;
        let region = self
            .client
            .config()
            .region()
            .map(|r| r.as_ref().to_string());
        let stack_id = request.stack_id.as_deref();
        let Some(arn) = region.and_then(|r| arn_in_stack_account(stack_id, &r, name)) else {
            return match self.find(name).await? {
                Some(alarm) => self.state(name, alarm).await,
                None => Ok(CurrentState::NotFound),
            };
        };
        let (found, tags) = tokio::join!(self.find(name), self.tags(&arn));
        let Some(alarm) = found? else {
            return Ok(CurrentState::NotFound);
        };
        if alarm.alarm_arn() != Some(arn.as_str()) {
            return self.state(name, alarm).await;
        }
        let mut state = state_of(name, &alarm);
        insert_tags(&mut state, tags?);
        Ok(CurrentState::Found(state))
    }

    fn attributes(&self, _name: &str, alarm: &MetricAlarm) -> Attributes {
        attributes_of(alarm)
    }

    async fn state(&self, name: &str, alarm: MetricAlarm) -> Result<CurrentState, ProviderError> {
        let tags = match alarm.alarm_arn() {
            Some(arn) => self.tags(arn).await?,
            None => Vec::new(),
        };
        let mut state = state_of(name, &alarm);
        insert_tags(&mut state, tags);
        Ok(CurrentState::Found(state))
    }
}

tagging! {
    AlarmProvider, ProviderError::from_sdk,
    "UntagResource" => |client, arn, keys| {
        client.untag_resource().resource_arn(arn).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, arn, tags| {
        client.tag_resource().resource_arn(arn).set_tags(Some(cw_tags(tags)?))
    },
}

/// A number as a template writes it: an integer when it is a whole number.
fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

fn dimensions_value(dimensions: &[Dimension]) -> Value {
    dimensions
        .iter()
        .map(|d| json!({"Name": d.name().unwrap_or_default(), "Value": d.value().unwrap_or_default()}))
        .collect()
}

/// The entries of `pairs` whose value is set, as an object.
fn object(pairs: Vec<(&str, Option<Value>)>) -> Value {
    let map: serde_json::Map<String, Value> = pairs
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), v?)))
        .collect();
    Value::Object(map)
}

fn query_value(q: &MetricDataQuery) -> Value {
    let stat = q.metric_stat().map(|s| {
        let metric = s.metric().map(|m| {
            let dims = (!m.dimensions().is_empty()).then(|| dimensions_value(m.dimensions()));
            object(vec![
                ("Dimensions", dims),
                ("MetricName", m.metric_name().map(|v| json!(v))),
                ("Namespace", m.namespace().map(|v| json!(v))),
            ])
        });
        object(vec![
            ("Metric", metric),
            ("Period", s.period().map(|v| json!(v))),
            ("Stat", s.stat().map(|v| json!(v))),
            ("Unit", s.unit().map(|v| json!(v.as_str()))),
        ])
    });
    object(vec![
        ("AccountId", q.account_id().map(|v| json!(v))),
        ("Expression", q.expression().map(|v| json!(v))),
        ("Id", q.id().map(|v| json!(v))),
        ("Label", q.label().map(|v| json!(v))),
        ("MetricStat", stat),
        ("Period", q.period().map(|v| json!(v))),
        ("ReturnData", q.return_data().map(|v| json!(v))),
    ])
}

/// A list property, left out when empty.
fn list(values: &[String]) -> Option<Value> {
    (!values.is_empty()).then(|| json!(values))
}

/// The state of alarm `name` (tags apart), AWS's defaults left out.
fn state_of(name: &str, a: &MetricAlarm) -> Properties {
    let s = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(|v| json!(v));
    let pairs: Vec<(&str, Option<Value>)> = vec![
        ("AlarmName", Some(json!(name))),
        ("AlarmDescription", s(a.alarm_description())),
        (
            "ActionsEnabled",
            a.actions_enabled().filter(|e| !e).map(|e| json!(e)),
        ),
        ("AlarmActions", list(a.alarm_actions())),
        ("OKActions", list(a.ok_actions())),
        (
            "InsufficientDataActions",
            list(a.insufficient_data_actions()),
        ),
        ("MetricName", s(a.metric_name())),
        ("Namespace", s(a.namespace())),
        ("Statistic", a.statistic().map(|v| json!(v.as_str()))),
        ("ExtendedStatistic", s(a.extended_statistic())),
        (
            "Dimensions",
            (!a.dimensions().is_empty()).then(|| dimensions_value(a.dimensions())),
        ),
        ("Period", a.period().map(|v| json!(v))),
        ("Unit", a.unit().map(|v| json!(v.as_str()))),
        (
            "EvaluationPeriods",
            a.evaluation_periods().map(|v| json!(v)),
        ),
        (
            "DatapointsToAlarm",
            a.datapoints_to_alarm().map(|v| json!(v)),
        ),
        ("Threshold", a.threshold().map(number)),
        (
            "ComparisonOperator",
            a.comparison_operator().map(|v| json!(v.as_str())),
        ),
        (
            "TreatMissingData",
            s(a.treat_missing_data().filter(|t| *t != "missing")),
        ),
        (
            "EvaluateLowSampleCountPercentile",
            s(a.evaluate_low_sample_count_percentile()),
        ),
        (
            "Metrics",
            (!a.metrics().is_empty()).then(|| a.metrics().iter().map(query_value).collect()),
        ),
        ("ThresholdMetricId", s(a.threshold_metric_id())),
    ];
    match object(pairs) {
        Value::Object(map) => map,
        _ => Properties::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn metric_math_converts_both_ways() {
        let metrics = json!([
            {"Expression": "d / 60", "Id": "expr_1", "ReturnData": true},
            {"Id": "d", "ReturnData": false, "MetricStat": {
                "Metric": {"Dimensions": [{"Name": "QueueName", "Value": "q"}],
                    "MetricName": "Visible", "Namespace": "AWS/SQS"},
                "Period": 300, "Stat": "Maximum"}}
        ]);
        let p = props(json!({"Metrics": metrics}));
        let parsed = queries(&p).expect("valid").expect("some");
        let back: Vec<Value> = parsed.iter().map(query_value).collect();
        assert_eq!(Value::Array(back), metrics);
        assert!(queries(&props(json!({"Metrics": {}}))).is_err());
    }

    #[test]
    fn state_leaves_defaults_out() {
        let alarm = MetricAlarm::builder()
            .alarm_name("a")
            .actions_enabled(true)
            .treat_missing_data("missing")
            .threshold(100.0)
            .evaluation_periods(3)
            .build();
        let state = state_of("a", &alarm);
        assert_eq!(
            Value::Object(state.clone()),
            json!({"AlarmName": "a", "Threshold": 100, "EvaluationPeriods": 3})
        );
        assert!(tag_map(&state).is_empty());
        assert_eq!(number(0.5), json!(0.5));
        assert_eq!(
            threshold(&props(json!({"Threshold": "2.5"}))),
            Ok(Some(2.5))
        );
    }
}
