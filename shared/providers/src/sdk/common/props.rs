//! Reading template properties the way CloudFormation accepts them, and the messages of
//! the errors about them.

use serde_json::Value;

use crate::error::ProviderError;
use crate::provider::{Attributes, Properties, ResourceRequest};

/// A value as a string: strings, numbers and booleans (as CloudFormation accepts them).
pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A property as a string (numbers and booleans too, as CloudFormation accepts them).
pub(crate) fn string_of(props: &Properties, key: &str) -> Option<String> {
    props.get(key).and_then(text)
}

/// A property as a string when it is a string or a number.
pub(crate) fn string_or_number_of(props: &Properties, key: &str) -> Option<String> {
    match props.get(key)? {
        Value::Bool(_) => None,
        other => text(other),
    }
}

/// A value as the text an API takes: a string as it is, anything else as JSON.
pub(crate) fn value_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An integer property of `type_name` (a numeric string too); anything else is invalid.
pub(crate) fn int_of(
    type_name: &str,
    props: &Properties,
    key: &str,
) -> Result<Option<i32>, ProviderError> {
    let not_an_integer = || invalid(type_name, &format!("{key} must be an integer"));
    match props.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(not_an_integer),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| not_an_integer()),
        Some(_) => Err(not_an_integer()),
    }
}

/// An [`ProviderError::InvalidRequest`] about a `type_name` resource.
/// The `Fn::GetAtt` values of a type whose one attribute is `Id`, the physical id.
pub(crate) fn id_attributes(id: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Id".into(), serde_json::json!(id));
    a
}

pub(crate) fn invalid(type_name: &str, what: &str) -> ProviderError {
    ProviderError::InvalidRequest(format!("{type_name}: {what}"))
}

/// The context of an operation's errors: `{logicalId} ({type_name})`.
pub(crate) fn context(request: &ResourceRequest, type_name: &str) -> String {
    format!("{} ({type_name})", request.logical_id)
}

/// The error when the resource `id`, just written, cannot be found.
pub(crate) fn vanished(type_name: &str, id: &str) -> ProviderError {
    ProviderError::NotFound(format!(
        "{type_name} {id} vanished right after it was written"
    ))
}

/// Refuses an update that renames the resource `current` through `property`: a new name
/// needs a new `noun`.
pub(crate) fn keep_name(
    request: &ResourceRequest,
    type_name: &str,
    property: &str,
    current: &str,
    noun: &str,
) -> Result<(), ProviderError> {
    match request.string_property(property) {
        Some(wanted) if wanted != current => Err(ProviderError::NotUpdatable(format!(
            "{}: {property} {current} -> {wanted} needs a new {noun}",
            context(request, type_name)
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sdk::common::calls::missing_as_none;
    use crate::sdk::common::testing::props;

    #[test]
    fn accessors_read_cloudformation_values() {
        let p = props(json!({"S": "x", "N": 5, "B": true, "O": {}, "I": "7", "Bad": 1.5}));
        assert_eq!(string_of(&p, "N").as_deref(), Some("5"));
        assert_eq!(string_of(&p, "B").as_deref(), Some("true"));
        assert_eq!(string_of(&p, "O"), None);
        assert_eq!(string_or_number_of(&p, "B"), None);
        assert_eq!(string_or_number_of(&p, "S").as_deref(), Some("x"));
        assert_eq!(int_of("T", &p, "I"), Ok(Some(7)));
        assert_eq!(int_of("T", &p, "Missing"), Ok(None));
        assert!(matches!(
            int_of("T", &p, "Bad"),
            Err(ProviderError::InvalidRequest(m)) if m == "T: Bad must be an integer"
        ));
        assert_eq!(value_string(&json!({"a": 1})), r#"{"a":1}"#);
    }

    #[test]
    fn names_stay_or_need_a_new_resource() {
        let mut r = ResourceRequest::new("s", "Q", "AWS::X::Y", props(json!({"Name": "n2"})));
        assert!(keep_name(&r, "AWS::X::Y", "Name", "n2", "thing").is_ok());
        match keep_name(&r, "AWS::X::Y", "Name", "n1", "thing") {
            Err(ProviderError::NotUpdatable(m)) => {
                assert_eq!(m, "Q (AWS::X::Y): Name n1 -> n2 needs a new thing");
            }
            other => panic!("{other:?}"),
        }
        r.properties.clear();
        assert!(keep_name(&r, "AWS::X::Y", "Name", "n1", "thing").is_ok());
        assert!(matches!(
            missing_as_none::<()>(Err(ProviderError::NotFound("x".into()))),
            Ok(None)
        ));
    }
}
