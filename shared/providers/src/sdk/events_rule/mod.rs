//! `AWS::Events::Rule` through the EventBridge API.
//!
//! The physical id (what `Ref` returns) is CloudFormation's: the rule name for a rule on
//! the default bus, `{EventBusName}|{Name}` for a rule on another bus (`EventBusName` as
//! the template gives it, a name or an ARN); the one attribute is `Arn`. Without a `Name`
//! the name is generated ([`crate::names::physical_name`], at most 64 characters).
//!
//! `PutRule` both creates and updates (it writes the whole rule), and `PutTargets` adds or
//! replaces targets by id, so a retried create of a generated name (same token, same name)
//! writes the same rule and targets again. A name the template gives is looked up once
//! (`DescribeRule`) before the first write: a rule this stack did not make is refused
//! (`refuse_taken`), never overwritten.
//!
//! Handled properties: `Name`, `EventBusName`, `Description`, `EventPattern` (an object or
//! its JSON text), `ScheduleExpression`, `State`, `RoleArn` and `Targets` (the fields
//! listed in [`targets`]). `Name` and `EventBusName` cannot change in place
//! ([`ProviderError::NotUpdatable`]). An update writes the rule (`PutRule`), removes the
//! targets whose id the template dropped (`RemoveTargets`, ids from the previous
//! properties), then writes the template's targets (`PutTargets`). A delete lists the
//! targets, removes them, then deletes the rule (EventBridge refuses to delete a rule that
//! has targets).
//!
//! `read_current_state` gives `Name`, `EventBusName` (when not the default bus),
//! `Description`, `EventPattern` (as an object), `ScheduleExpression`, `RoleArn`, `State`
//! (left out when `ENABLED`, AWS's default) and `Targets` in the template's shape.
//!
//! Calls: a create is `DescribeRule` (named only), `PutRule`, `PutTargets` (when there are
//! targets); an update is `PutRule`, `RemoveTargets` (when some were dropped), `PutTargets`;
//! a delete is `ListTargetsByRule`, `RemoveTargets` (when there are targets), `DeleteRule`;
//! `read_current_state` sends `DescribeRule` and `ListTargetsByRule` at once.
//!
//! Emulator (fakecloud 0.51.0): see `tests/tests/providers_rules_alarms_states.rs`.

mod targets;

use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::operation::describe_rule::DescribeRuleOutput;
use aws_sdk_eventbridge::types::{RuleState, Target};
use serde_json::{Value, json};

use super::common::{
    SdkResource, call, context, keep_name, refuse_taken, sdk_provider, string_of, value_string,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &[
    "Name",
    "EventBusName",
    "Description",
    "EventPattern",
    "ScheduleExpression",
    "State",
    "RoleArn",
    "Targets",
];

/// Rule names: letters, digits, `.`, `-` and `_`, at most 64 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 64,
    extra: "-_.",
    lowercase: false,
};

/// The most targets one `PutTargets` takes.
const TARGETS_PER_CALL: usize = 10;

sdk_provider! {
    /// The `AWS::Events::Rule` provider.
    EventRuleProvider(Client), "AWS::Events::Rule", HANDLED
}

/// A rule: its bus (`None`: the default bus) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RuleId {
    bus: Option<String>,
    name: String,
}

impl RuleId {
    /// The rule `name` on the template's bus (`default` is the default bus).
    fn new(bus: Option<String>, name: String) -> RuleId {
        RuleId {
            bus: bus.filter(|b| b != "default"),
            name,
        }
    }

    /// The rule a physical id names (`bus|name` or `name`).
    fn parse(id: &str) -> RuleId {
        match id.split_once('|') {
            Some((bus, name)) => RuleId::new(Some(bus.to_string()), name.to_string()),
            None => RuleId::new(None, id.to_string()),
        }
    }

    /// The rule a rule ARN names (`...:rule/NAME` on the default bus,
    /// `...:rule/BUS/NAME` on another); `None` for anything else.
    fn of_arn(arn: &str) -> Option<RuleId> {
        let (_, path) = arn.strip_prefix("arn:")?.split_once(":rule/")?;
        Some(match path.split_once('/') {
            Some((bus, name)) => RuleId::new(Some(bus.to_string()), name.to_string()),
            None => RuleId::new(None, path.to_string()),
        })
    }

    /// The physical id, as CloudFormation's `Ref` gives it.
    fn physical_id(&self) -> String {
        match &self.bus {
            Some(bus) => format!("{bus}|{}", self.name),
            None => self.name.clone(),
        }
    }
}

fn attributes(arn: Option<&str>) -> Attributes {
    let mut a = Attributes::new();
    if let Some(arn) = arn {
        a.insert("Arn".into(), json!(arn));
    }
    a
}

impl EventRuleProvider {
    /// `PutRule` of `rule` with the template's properties: the rule's ARN.
    async fn put_rule(&self, rule: &RuleId, props: &Properties) -> Result<String, ProviderError> {
        let state = string_of(props, "State").map(|s| RuleState::from(s.as_str()));
        let request = self
            .client
            .put_rule()
            .name(&rule.name)
            .set_event_bus_name(rule.bus.clone())
            .set_description(string_of(props, "Description"))
            .set_event_pattern(props.get("EventPattern").map(value_string))
            .set_schedule_expression(string_of(props, "ScheduleExpression"))
            .set_role_arn(string_of(props, "RoleArn"))
            .set_state(state);
        let out = call(&self.retry, "PutRule", || request.clone().send()).await?;
        out.rule_arn()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::Other("PutRule answered no RuleArn".into()))
    }

    /// `PutTargets` of `targets` (in calls of at most ten); a failed entry is an error.
    async fn put_targets(&self, rule: &RuleId, targets: Vec<Target>) -> Result<(), ProviderError> {
        for chunk in targets.chunks(TARGETS_PER_CALL) {
            let request = self
                .client
                .put_targets()
                .rule(&rule.name)
                .set_event_bus_name(rule.bus.clone())
                .set_targets(Some(chunk.to_vec()));
            let out = call(&self.retry, "PutTargets", || request.clone().send()).await?;
            if let Some(failed) = out.failed_entries().first() {
                return Err(ProviderError::classify(
                    failed.error_code(),
                    &format!(
                        "PutTargets: target {}: {}",
                        failed.target_id().unwrap_or_default(),
                        failed.error_message().unwrap_or_default()
                    ),
                    None,
                ));
            }
        }
        Ok(())
    }

    /// `RemoveTargets` of `ids` (in calls of at most ten); a failed entry is an error.
    async fn remove_targets(&self, rule: &RuleId, ids: &[String]) -> Result<(), ProviderError> {
        for chunk in ids.chunks(TARGETS_PER_CALL) {
            let request = self
                .client
                .remove_targets()
                .rule(&rule.name)
                .set_event_bus_name(rule.bus.clone())
                .set_ids(Some(chunk.to_vec()));
            let out = call(&self.retry, "RemoveTargets", || request.clone().send()).await?;
            if let Some(failed) = out.failed_entries().first() {
                return Err(ProviderError::classify(
                    failed.error_code(),
                    &format!(
                        "RemoveTargets: target {}: {}",
                        failed.target_id().unwrap_or_default(),
                        failed.error_message().unwrap_or_default()
                    ),
                    None,
                ));
            }
        }
        Ok(())
    }

    /// Every target of `rule` (`ListTargetsByRule`, all pages).
    async fn list_targets(&self, rule: &RuleId) -> Result<Vec<Target>, ProviderError> {
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = call(&self.retry, "ListTargetsByRule", || {
                self.client
                    .list_targets_by_rule()
                    .rule(&rule.name)
                    .set_event_bus_name(rule.bus.clone())
                    .set_next_token(token.clone())
                    .send()
            })
            .await?;
            all.extend(out.targets().iter().cloned());
            match out.next_token().filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next.to_string()),
                None => return Ok(all),
            }
        }
    }

    /// `DescribeRule` of `rule`, or `None` when it does not exist.
    async fn describe(&self, rule: &RuleId) -> Result<Option<DescribeRuleOutput>, ProviderError> {
        let got = call(&self.retry, "DescribeRule", || {
            self.client
                .describe_rule()
                .name(&rule.name)
                .set_event_bus_name(rule.bus.clone())
                .send()
        })
        .await;
        super::common::missing_as_none(got)
    }
}

/// Refuses a change of the bus a rule is on.
fn keep_bus(request: &ResourceRequest, rule: &RuleId) -> Result<(), ProviderError> {
    let wanted = RuleId::new(
        string_of(&request.properties, "EventBusName"),
        String::new(),
    );
    if wanted.bus != rule.bus {
        return Err(ProviderError::NotUpdatable(format!(
            "{}: EventBusName cannot change in place",
            context(request, TYPE)
        )));
    }
    Ok(())
}

impl SdkResource for EventRuleProvider {
    type Found = DescribeRuleOutput;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "Name";
    const NOUN: &'static str = "rule";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let (name, generated) = given_or_generated(request, "Name", NAME_RULES);
        let rule = RuleId::new(string_of(props, "EventBusName"), name);
        let targets = targets::targets(props)?;
        refuse_taken::<Self, _>(&rule.name, generated, self.describe(&rule)).await?;
        let arn = self
            .put_rule(&rule, props)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        self.put_targets(&rule, targets)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(Some(&arn)),
            physical_id: rule.physical_id(),
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let rule = RuleId::parse(request.require_physical_id()?);
        keep_name(request, TYPE, "Name", &rule.name, "rule")?;
        keep_bus(request, &rule)?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let targets = targets::targets(props)?;
        let arn = self
            .put_rule(&rule, props)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        let kept = targets::target_ids(props);
        let dropped: Vec<String> = targets::target_ids(&previous)
            .into_iter()
            .filter(|id| !kept.contains(id))
            .collect();
        self.remove_targets(&rule, &dropped)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        self.put_targets(&rule, targets)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Updated {
            sensitive: false,
            physical_id: rule.physical_id(),
            attributes: attributes(Some(&arn)),
            replaced: false,
        })
    }

    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        let rule = RuleId::parse(id);
        let ids: Vec<String> = self
            .list_targets(&rule)
            .await?
            .iter()
            .map(|t| t.id().to_string())
            .collect();
        self.remove_targets(&rule, &ids).await?;
        call(&self.retry, "DeleteRule", || {
            self.client
                .delete_rule()
                .name(&rule.name)
                .set_event_bus_name(rule.bus.clone())
                .send()
        })
        .await
        .map(drop)
    }

    /// The explicit id (a rule ARN too, as CloudFormation's import names a rule), else the
    /// template's `Name` on its `EventBusName`.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        if let Some(id) = &request.physical_id {
            return Ok(Some(match RuleId::of_arn(id) {
                Some(rule) => rule.physical_id(),
                None => id.clone(),
            }));
        }
        let props = &request.properties;
        Ok(string_of(props, "Name")
            .map(|name| RuleId::new(string_of(props, "EventBusName"), name).physical_id()))
    }

    async fn find(&self, id: &str) -> Result<Option<DescribeRuleOutput>, ProviderError> {
        self.describe(&RuleId::parse(id)).await
    }

    /// `DescribeRule` and `ListTargetsByRule` at once: both need only the id.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let rule = RuleId::parse(request.require_physical_id()?);
        let (found, targets) = tokio::join!(self.describe(&rule), self.list_targets(&rule));
        match found? {
            Some(found) => Ok(CurrentState::Found(state_of(&rule, &found, &targets?))),
            None => Ok(CurrentState::NotFound),
        }
    }

    fn attributes(&self, _id: &str, found: &DescribeRuleOutput) -> Attributes {
        attributes(found.arn())
    }

    async fn state(
        &self,
        id: &str,
        found: DescribeRuleOutput,
    ) -> Result<CurrentState, ProviderError> {
        let rule = RuleId::parse(id);
        let targets = self.list_targets(&rule).await?;
        Ok(CurrentState::Found(state_of(&rule, &found, &targets)))
    }
}

/// The state of `rule` from its description and its targets, AWS's defaults left out.
fn state_of(rule: &RuleId, found: &DescribeRuleOutput, targets: &[Target]) -> Properties {
    let mut state = Properties::new();
    state.insert("Name".into(), json!(rule.name));
    if let Some(bus) = &rule.bus {
        state.insert("EventBusName".into(), json!(bus));
    }
    let text = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(|v| json!(v));
    let pattern = found
        .event_pattern()
        .filter(|p| !p.is_empty())
        .map(|p| serde_json::from_str(p).unwrap_or_else(|_| json!(p)));
    let rule_state = found
        .state()
        .map(|s| s.as_str())
        .filter(|s| *s != "ENABLED");
    let fields = [
        ("Description", text(found.description())),
        ("EventPattern", pattern),
        ("ScheduleExpression", text(found.schedule_expression())),
        ("RoleArn", text(found.role_arn())),
        ("State", rule_state.map(|s| json!(s))),
    ];
    for (key, value) in fields {
        if let Some(value) = value {
            state.insert(key.into(), value);
        }
    }
    if !targets.is_empty() {
        let mut list: Vec<Value> = targets.iter().map(targets::target_value).collect();
        list.sort_by(|a, b| a["Id"].as_str().cmp(&b["Id"].as_str()));
        state.insert("Targets".into(), Value::Array(list));
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_cloudformation_refs() {
        let on_default = RuleId::new(Some("default".into()), "r".into());
        assert_eq!(on_default.physical_id(), "r");
        let custom = RuleId::new(Some("orders".into()), "r".into());
        assert_eq!(custom.physical_id(), "orders|r");
        assert_eq!(RuleId::parse("orders|r"), custom);
        assert_eq!(RuleId::parse("r"), on_default);
        let arn = "arn:aws:events:us-east-1:123456789012:rule";
        assert_eq!(RuleId::of_arn(&format!("{arn}/orders/r")), Some(custom));
        assert_eq!(RuleId::of_arn(&format!("{arn}/r")), Some(on_default));
        assert_eq!(RuleId::of_arn("r"), None);
    }

    #[test]
    fn state_leaves_enabled_out_and_parses_the_pattern() {
        let found = DescribeRuleOutput::builder()
            .name("r")
            .event_pattern(r#"{"source":["a"]}"#)
            .state(RuleState::Enabled)
            .build();
        let rule = RuleId::new(Some("bus".into()), "r".into());
        let state = state_of(&rule, &found, &[]);
        assert_eq!(
            Value::Object(state),
            json!({"Name": "r", "EventBusName": "bus", "EventPattern": {"source": ["a"]}})
        );
    }
}
