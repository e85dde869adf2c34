//! AWS's defaults are written twice: in the providers (what a read leaves out, what an
//! update that drops a property sets back) and in the drift comparison's table
//! (`stackflow_core::drift::defaults_of`: a recorded default is in sync with a read that
//! leaves it out). These tests hold the two to the same values.

use serde_json::Value;
use stackflow_core::drift::defaults_of;

/// A core default as the providers' attribute tables write it (text).
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Every default core has for `ty` is in the provider's `table` with the same value, and
/// every default of the provider that core lacks is an empty attribute (a policy or an
/// id AWS leaves unset, which no template value can equal).
fn tied(ty: &str, table: &[(&str, &str)]) {
    let core = defaults_of(ty);
    assert!(!core.is_empty(), "{ty}: core has no defaults");
    for (name, value) in &core {
        let provider = table.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(provider, Some(as_text(value).as_str()), "{ty}.{name}");
    }
    for (name, value) in table {
        if !core.iter().any(|(n, _)| n == name) {
            assert_eq!(
                *value, "",
                "{ty}.{name}: a default core's drift table lacks"
            );
        }
    }
}

#[test]
fn attribute_tables_match_the_drift_defaults() {
    tied("AWS::SNS::Topic", super::sns::DEFAULTS);
    tied("AWS::SQS::Queue", super::sqs::DEFAULTS);
    tied("AWS::SNS::Subscription", super::sns_subscription::DEFAULTS);
}

#[test]
fn named_defaults_match_the_drift_defaults() {
    let of = |ty: &str, name: &str| {
        defaults_of(ty)
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("{ty}.{name}: no drift default"))
    };
    assert_eq!(
        of("AWS::IAM::Role", "MaxSessionDuration"),
        super::iam::DEFAULT_MAX_SESSION
    );
    assert_eq!(
        of("AWS::Lambda::Function", "Timeout"),
        super::lambda::DEFAULT_TIMEOUT
    );
    assert_eq!(
        of("AWS::Lambda::Function", "MemorySize"),
        super::lambda::DEFAULT_MEMORY
    );
    assert_eq!(
        of("AWS::Logs::LogGroup", "LogGroupClass"),
        super::logs::DEFAULT_CLASS
    );
}
