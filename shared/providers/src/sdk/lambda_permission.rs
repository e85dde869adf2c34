//! `AWS::Lambda::Permission` through the Lambda API: one statement of a function's
//! resource policy (`AddPermission`, `GetPolicy`, `RemovePermission`).
//!
//! The physical id (what `Ref` returns) and the attribute `Id` are the statement id, a
//! name made for the resource ([`crate::names::physical_name`] of the stack, the logical id
//! and the create's token, at most 100 letters, digits, `-` and `_`), as CloudFormation
//! makes one. Every property needs a new permission ([`ProviderError::NotUpdatable`]): an
//! update that changes nothing answers the same id, any change is a replacement.
//!
//! Handled: `FunctionName` (name, ARN or partial ARN, qualifier included), `Action`,
//! `Principal`, `SourceArn`, `SourceAccount`, `PrincipalOrgID`, `EventSourceToken`,
//! `FunctionUrlAuthType`. (`InvokedViaFunctionUrl` is left to Cloud Control.)
//!
//! The statement id holds the hash of the create's token, so it is this stack's alone: a
//! retried create whose `AddPermission` finds the id taken (`ResourceConflictException`
//! "already exists": an attempt whose answer was lost) takes the statement as made. Other
//! `ResourceConflictException`s (the function is being updated) are retried.
//!
//! Delete, `read_current_state` and `import` need the function: they take it from the
//! request's `FunctionName` (the engine sends the recorded properties); a delete without it
//! leaves the statement and says so (`Deleted::Skipped`). `import` finds a
//! permission only by an explicit id (the statement id). `read_current_state` reports the
//! statement in the template's shape: `Principal` as the account id when AWS holds the
//! account's root ARN and the template gives the id, the conditions as `SourceArn`,
//! `SourceAccount`, `PrincipalOrgID`, `EventSourceToken` and `FunctionUrlAuthType`, and
//! the template's own `FunctionName` text (the statement's `Resource` is the function's
//! ARN whatever form the template used).
//!
//! Calls: create 1 (`AddPermission`; 2 with `GetPolicy` on a replay); update none; delete 1.
//!
//! Emulator (fakecloud 0.51.0): a function whose last statement was removed answers an
//! empty policy (AWS answers `ResourceNotFoundException`); both read as "no statement".

use aws_sdk_lambda::Client;
use aws_sdk_lambda::error::{ProvideErrorMetadata, SdkError};
use serde_json::{Map, Value, json};

use super::common::id_attributes as attributes;
use super::common::{
    SdkResource, call, call_classified, context, invalid, missing_as_none, sdk_provider, string_of,
};
use crate::error::{HttpResponse, ProviderError};
use crate::names::{NameRules, generated_name};
use crate::provider::{Attributes, Created, CurrentState, Deleted, Imported};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &[
    "FunctionName",
    "Action",
    "Principal",
    "SourceArn",
    "SourceAccount",
    "PrincipalOrgID",
    "EventSourceToken",
    "FunctionUrlAuthType",
];

/// The properties read from the statement's `Condition`: (property, condition key).
const CONDITIONS: &[(&str, &str)] = &[
    ("SourceArn", "aws:sourcearn"),
    ("SourceAccount", "aws:sourceaccount"),
    ("PrincipalOrgID", "aws:principalorgid"),
    ("EventSourceToken", "lambda:eventsourcetoken"),
    ("FunctionUrlAuthType", "lambda:functionurlauthtype"),
];

/// Statement ids: letters, digits, `-` and `_`, at most 100 characters.
const SID_RULES: NameRules = NameRules {
    max_len: 100,
    extra: "-_",
    lowercase: false,
};

sdk_provider! {
    /// The `AWS::Lambda::Permission` provider.
    LambdaPermissionProvider(Client), "AWS::Lambda::Permission", HANDLED
}

fn function_of(request: &ResourceRequest) -> Result<String, ProviderError> {
    string_of(&request.properties, "FunctionName")
        .ok_or_else(|| invalid(TYPE, "FunctionName is required"))
}

/// `AddPermission`'s errors: a statement id that exists is [`ProviderError::AlreadyExists`]
/// (the generic classification takes `ResourceConflictException` for a transient one).
fn classify_add<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    if let SdkError::ServiceError(service) = &error {
        let e = service.err();
        let exists = e.message().is_some_and(|m| m.contains("already exists"));
        if e.code() == Some("ResourceConflictException") && exists {
            return ProviderError::AlreadyExists(format!("{what}: {}", e.message().unwrap_or("")));
        }
    }
    ProviderError::from_sdk(what, error)
}

/// The statement `sid` of a policy text, if it holds one.
fn statement(policy: &str, sid: &str) -> Option<Map<String, Value>> {
    let policy: Value = serde_json::from_str(policy).ok()?;
    let statements = match policy.get("Statement")? {
        Value::Array(list) => list.clone(),
        one => vec![one.clone()],
    };
    statements
        .into_iter()
        .filter_map(|s| s.as_object().cloned())
        .find(|s| s.get("Sid").and_then(Value::as_str) == Some(sid))
}

/// The template's `Principal` of a statement's principal; `given` (the template's) decides
/// between an account id and its root ARN.
fn principal_of(principal: &Value, given: Option<&str>) -> Option<String> {
    let text = match principal {
        Value::String(s) => s.clone(),
        Value::Object(o) => o.values().next().and_then(Value::as_str)?.to_string(),
        _ => return None,
    };
    let account = text
        .strip_prefix("arn:")
        .and_then(|rest| rest.split(':').nth(3).map(str::to_string))
        .filter(|_| text.ends_with(":root"));
    match (account, given) {
        (Some(account), Some(given)) if given == account => Some(account),
        _ => Some(text),
    }
}

/// The statement in the template's shape; `template` gives `FunctionName` and the form of
/// `Principal`.
fn state_of(statement: &Map<String, Value>, template: &Properties) -> Properties {
    let mut state = Properties::new();
    let function = template
        .get("FunctionName")
        .cloned()
        .or_else(|| statement.get("Resource").cloned());
    if let Some(function) = function {
        state.insert("FunctionName".into(), function);
    }
    if let Some(action) = statement.get("Action") {
        state.insert("Action".into(), action.clone());
    }
    let given = template.get("Principal").and_then(Value::as_str);
    if let Some(principal) = statement
        .get("Principal")
        .and_then(|p| principal_of(p, given))
    {
        state.insert("Principal".into(), json!(principal));
    }
    let conditions = statement.get("Condition").and_then(Value::as_object);
    for operator in conditions.into_iter().flat_map(|c| c.values()) {
        let Some(values) = operator.as_object() else {
            continue;
        };
        for (key, value) in values {
            let lower = key.to_ascii_lowercase();
            if let Some((property, _)) = CONDITIONS.iter().find(|(_, k)| *k == lower) {
                state.insert((*property).to_string(), value.clone());
            }
        }
    }
    state
}

impl LambdaPermissionProvider {
    /// The statement `sid` of `function`'s policy; `None` when the function, its policy
    /// or the statement is gone.
    async fn statement(
        &self,
        function: &str,
        sid: &str,
    ) -> Result<Option<Map<String, Value>>, ProviderError> {
        let got = call(&self.retry, "GetPolicy", || {
            self.client.get_policy().function_name(function).send()
        })
        .await;
        Ok(missing_as_none(got)?
            .and_then(|out| out.policy().map(str::to_string))
            .and_then(|policy| statement(&policy, sid)))
    }

    async fn add(
        &self,
        function: &str,
        sid: &str,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let get = |key: &str| string_of(props, key);
        let action = get("Action").ok_or_else(|| invalid(TYPE, "Action is required"))?;
        let principal = get("Principal").ok_or_else(|| invalid(TYPE, "Principal is required"))?;
        let auth = get("FunctionUrlAuthType")
            .map(|a| aws_sdk_lambda::types::FunctionUrlAuthType::from(a.as_str()));
        call_classified(&self.retry, "AddPermission", classify_add, || {
            self.client
                .add_permission()
                .function_name(function)
                .statement_id(sid)
                .action(&action)
                .principal(&principal)
                .set_source_arn(get("SourceArn"))
                .set_source_account(get("SourceAccount"))
                .set_principal_org_id(get("PrincipalOrgID"))
                .set_event_source_token(get("EventSourceToken"))
                .set_function_url_auth_type(auth.clone())
                .send()
        })
        .await
        .map(drop)
    }
}

impl SdkResource for LambdaPermissionProvider {
    type Found = Map<String, Value>;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "Id";
    const NOUN: &'static str = "permission";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let function = function_of(request)?;
        let sid = generated_name(request, SID_RULES);
        match self.add(&function, &sid, &request.properties).await {
            Ok(()) => {}
            // The id is this create's own: an earlier attempt made the statement.
            Err(ProviderError::AlreadyExists(_))
                if self.statement(&function, &sid).await?.is_some() => {}
            Err(e) => return Err(e.context(context(request, TYPE))),
        }
        Ok(Created {
            sensitive: false,
            attributes: attributes(&sid),
            physical_id: sid,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let sid = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        if let Some(key) = HANDLED
            .iter()
            .find(|k| request.properties.get(**k) != previous.get(**k))
        {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: {key} cannot change in place",
                context(request, TYPE)
            )));
        }
        Ok(Updated {
            sensitive: false,
            physical_id: sid.to_string(),
            attributes: attributes(sid),
            replaced: false,
        })
    }

    /// Not used: the function comes with the request (see `delete`).
    async fn remove(&self, sid: &str) -> Result<(), ProviderError> {
        Err(invalid(
            TYPE,
            &format!("{sid}: a delete needs the FunctionName"),
        ))
    }

    async fn delete(&self, request: &ResourceRequest) -> Result<Deleted, ProviderError> {
        let sid = request.require_physical_id()?;
        let Ok(function) = function_of(request) else {
            return Ok(Deleted::Skipped {
                reason: format!(
                    "{}: no recorded FunctionName, so the statement {sid} cannot be found: it \
                     is left in place",
                    context(request, TYPE)
                ),
            });
        };
        let removed = call(&self.retry, "RemovePermission", || {
            self.client
                .remove_permission()
                .function_name(&function)
                .statement_id(sid)
                .send()
        })
        .await;
        Deleted::unless_missing(removed).map_err(|e| e.context(context(request, TYPE)))
    }

    /// Not used: the function comes with the request (see `read`).
    async fn find(&self, _sid: &str) -> Result<Option<Self::Found>, ProviderError> {
        Ok(None)
    }

    fn attributes(&self, sid: &str, _found: &Self::Found) -> Attributes {
        attributes(sid)
    }

    /// The explicit id (a statement id) when the request's function holds it.
    async fn import(&self, request: &ResourceRequest) -> Result<Imported, ProviderError> {
        let (Some(sid), Ok(function)) = (request.physical_id.clone(), function_of(request)) else {
            return Ok(Imported::NotDeployedYet);
        };
        Ok(match self.statement(&function, &sid).await? {
            Some(_) => Imported::Found {
                attributes: attributes(&sid),
                physical_id: sid,
            },
            None => Imported::NotDeployedYet,
        })
    }

    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let sid = request.require_physical_id()?;
        let function = function_of(request)?;
        Ok(match self.statement(&function, sid).await? {
            Some(found) => CurrentState::Found(state_of(&found, &request.properties)),
            None => CurrentState::NotFound,
        })
    }

    async fn state(&self, _sid: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(&found, &Properties::new())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn statements_read_back_in_the_template_shape() {
        let policy = json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Sid": "other", "Effect": "Allow", "Principal": "*",
                "Action": "lambda:GetFunction", "Resource": "arn:f"
            }, {
                "Sid": "mine", "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
                "Action": "lambda:InvokeFunction",
                "Resource": "arn:aws:lambda:us-east-1:123456789012:function:f",
                "Condition": {
                    "ArnLike": {"AWS:SourceArn": "arn:aws:sns:us-east-1:123456789012:t"},
                    "StringEquals": {"AWS:SourceAccount": "123456789012"}
                }
            }]
        })
        .to_string();
        let found = statement(&policy, "mine").expect("the statement");
        let template = props(json!({
            "FunctionName": "f",
            "Action": "lambda:InvokeFunction",
            "Principal": "111122223333",
            "SourceArn": "arn:aws:sns:us-east-1:123456789012:t",
            "SourceAccount": "123456789012"
        }));
        assert_eq!(state_of(&found, &template), template);
        let as_arn = principal_of(&found["Principal"], None);
        assert_eq!(as_arn.as_deref(), Some("arn:aws:iam::111122223333:root"));
        assert_eq!(
            principal_of(&json!({"Service": "s3.amazonaws.com"}), None).as_deref(),
            Some("s3.amazonaws.com")
        );
        assert!(statement(&policy, "none").is_none());
        let sid = crate::names::physical_name(&"s".repeat(200), "Perm", "t", "", SID_RULES);
        assert!(sid.len() <= 100, "{sid}");
    }
}
