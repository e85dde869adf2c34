//! The custom resource protocol itself, without any AWS call: the request document
//! CloudFormation sends ([`build_request`]), the identifiers in it ([`request_id`],
//! [`stack_arn`]), the handler's response ([`parse_response`]) and the physical id rules
//! ([`default_physical_id`]).

use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::ProviderError;
use crate::provider::{Attributes, Properties, ResourceRequest};
use crate::registry::is_custom_type;

/// The largest response CloudFormation accepts, in bytes.
pub const MAX_RESPONSE_BYTES: usize = 4096;

/// The longest `ServiceTimeout` CloudFormation accepts, in seconds.
pub const MAX_SERVICE_TIMEOUT_SECS: u64 = 3600;

/// The `RequestType` of a custom resource request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestType {
    /// A create.
    Create,
    /// An update.
    Update,
    /// A delete.
    Delete,
}

impl RequestType {
    /// The protocol's name: `Create`, `Update`, `Delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestType::Create => "Create",
            RequestType::Update => "Update",
            RequestType::Delete => "Delete",
        }
    }
}

/// Where a `ServiceToken` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceTarget {
    /// A Lambda function (ARN, optionally qualified): invoked with `InvocationType=Event`.
    Lambda(Arn),
    /// An SNS topic: the request is published to it.
    Sns(Arn),
}

impl ServiceTarget {
    /// The target of `service_token`, or an [`ProviderError::InvalidRequest`] when it is
    /// neither a Lambda function ARN nor an SNS topic ARN.
    pub fn parse(service_token: &str) -> Result<ServiceTarget, ProviderError> {
        let invalid = || {
            ProviderError::InvalidRequest(format!(
                "ServiceToken {service_token:?} is neither a Lambda function ARN nor an SNS \
                 topic ARN"
            ))
        };
        let arn = Arn::parse(service_token).ok_or_else(invalid)?;
        match arn.service.as_str() {
            "lambda" if arn.resource.starts_with("function:") => Ok(ServiceTarget::Lambda(arn)),
            "sns" if !arn.resource.is_empty() && !arn.resource.contains(':') => {
                Ok(ServiceTarget::Sns(arn))
            }
            _ => Err(invalid()),
        }
    }

    /// The ARN.
    pub fn arn(&self) -> &Arn {
        match self {
            ServiceTarget::Lambda(arn) | ServiceTarget::Sns(arn) => arn,
        }
    }
}

/// The parts of an ARN (`arn:partition:service:region:account:resource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arn {
    /// The whole ARN.
    pub text: String,
    /// `aws`, `aws-cn`, ...
    pub partition: String,
    /// `lambda`, `sns`, ...
    pub service: String,
    /// The region.
    pub region: String,
    /// The account id.
    pub account: String,
    /// Everything after the account.
    pub resource: String,
}

impl Arn {
    /// The parts of `text`, or `None` when it is not an ARN with a region and an account.
    pub fn parse(text: &str) -> Option<Arn> {
        let mut parts = text.splitn(6, ':');
        if parts.next()? != "arn" {
            return None;
        }
        let partition = parts.next()?.to_string();
        let service = parts.next()?.to_string();
        let region = parts.next()?.to_string();
        let account = parts.next()?.to_string();
        let resource = parts.next()?.to_string();
        if partition.is_empty() || service.is_empty() || region.is_empty() || account.is_empty() {
            return None;
        }
        Some(Arn {
            text: text.to_string(),
            partition,
            service,
            region,
            account,
            resource,
        })
    }
}

/// A handler's answer, read from the response object.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomResponse {
    /// `SUCCESS` (true) or `FAILED` (false).
    pub success: bool,
    /// The `Reason` (required by CloudFormation for `FAILED`).
    pub reason: Option<String>,
    /// The `PhysicalResourceId`, when the handler sent one.
    pub physical_id: Option<String>,
    /// The `Data`: the `Fn::GetAtt` values.
    pub data: Map<String, Value>,
    /// `NoEcho`: the handler asks that `Data` is never shown.
    pub no_echo: bool,
}

/// What a response must match.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The request's `RequestId`.
    pub request_id: &'a str,
    /// The request's `LogicalResourceId`.
    pub logical_id: &'a str,
}

/// The generated identifiers of one request.
#[derive(Debug, Clone, Copy)]
pub struct RequestIds<'a> {
    /// The `RequestId`.
    pub request_id: &'a str,
    /// The `StackId`.
    pub stack_id: &'a str,
    /// The `ResponseURL`.
    pub response_url: &'a str,
}

/// The `ServiceToken` property, or an [`ProviderError::InvalidRequest`].
pub fn service_token(properties: &Properties) -> Result<&str, ProviderError> {
    match properties.get("ServiceToken") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(other) => Err(ProviderError::InvalidRequest(format!(
            "ServiceToken must be a non-empty string, not {other}"
        ))),
        None => Err(ProviderError::InvalidRequest(
            "a custom resource needs the property ServiceToken".into(),
        )),
    }
}

/// A valid `ServiceTimeout` property (whole seconds from 1 to 3600, a number or a string).
pub fn service_timeout(properties: &Properties) -> Option<Duration> {
    let secs = match properties.get("ServiceTimeout")? {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (1..=MAX_SERVICE_TIMEOUT_SECS)
        .contains(&secs)
        .then(|| Duration::from_secs(secs))
}

/// The `RequestId` of `request` as a `kind` request: a UUID-shaped hash of the stack, the
/// logical id, the request type and the token, so every retry of one action (same token)
/// reuses it.
pub fn request_id(request: &ResourceRequest, kind: RequestType) -> String {
    hash_uuid(&format!(
        "stackflow-custom-request\0{}\0{}\0{}\0{}",
        request.stack_name,
        request.logical_id,
        kind.as_str(),
        request.token
    ))
}

/// The physical id of a created resource whose handler sent none:
/// `{stack}-{logicalId}-{12 hex digits}` (see the module documentation).
pub fn default_physical_id(stack_name: &str, logical_id: &str, request_id: &str) -> String {
    let hash = hex(&Sha256::digest(request_id.as_bytes()));
    format!("{stack_name}-{logical_id}-{}", &hash[..12])
}

/// `value` as CloudFormation hands properties to a custom resource: numbers and booleans
/// turned into strings, at any depth.
pub fn cloudformation_strings(value: &Value) -> Value {
    match value {
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Number(n) => Value::String(n.to_string()),
        Value::Array(items) => Value::Array(items.iter().map(cloudformation_strings).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), cloudformation_strings(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// CloudFormation's request for `request` as a `kind` request.
pub fn build_request(
    kind: RequestType,
    request: &ResourceRequest,
    ids: &RequestIds<'_>,
) -> Result<Value, ProviderError> {
    let token = service_token(&request.properties)?;
    let mut event = Map::new();
    event.insert("RequestType".into(), kind.as_str().into());
    event.insert("ServiceToken".into(), token.into());
    event.insert("ResponseURL".into(), ids.response_url.into());
    event.insert("StackId".into(), ids.stack_id.into());
    event.insert("RequestId".into(), ids.request_id.into());
    event.insert(
        "LogicalResourceId".into(),
        request.logical_id.clone().into(),
    );
    event.insert("ResourceType".into(), request.resource_type.clone().into());
    event.insert(
        "ResourceProperties".into(),
        cloudformation_strings(&Value::Object(request.properties.clone())),
    );
    match kind {
        RequestType::Create => {}
        RequestType::Update => {
            let previous = request.previous_properties.as_ref().ok_or_else(|| {
                ProviderError::InvalidRequest(format!(
                    "{} ({}): an update needs the previous properties",
                    request.logical_id, request.resource_type
                ))
            })?;
            if let Ok(old_token) = service_token(previous)
                && old_token != token
            {
                return Err(ProviderError::InvalidRequest(format!(
                    "{} ({}): modifying the ServiceToken is not allowed ({old_token} -> {token})",
                    request.logical_id, request.resource_type
                )));
            }
            event.insert(
                "PhysicalResourceId".into(),
                request.require_physical_id()?.into(),
            );
            event.insert(
                "OldResourceProperties".into(),
                cloudformation_strings(&Value::Object(previous.clone())),
            );
        }
        RequestType::Delete => {
            event.insert(
                "PhysicalResourceId".into(),
                request.require_physical_id()?.into(),
            );
        }
    }
    Ok(Value::Object(event))
}

/// Reads a handler's response. Errors: not JSON, too large, a `Status` other than
/// `SUCCESS`/`FAILED`, a `Data` that is not an object, or a `RequestId` /
/// `LogicalResourceId` that is not the request's.
pub fn parse_response(
    body: &[u8],
    expected: &Expected<'_>,
) -> Result<CustomResponse, ProviderError> {
    let bad = |what: String| {
        ProviderError::InvalidRequest(format!(
            "invalid custom resource response (RequestId {}): {what}",
            expected.request_id
        ))
    };
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(bad(format!(
            "it is {} bytes; at most {MAX_RESPONSE_BYTES} are accepted",
            body.len()
        )));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| bad(format!("not JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(bad("not a JSON object".into()));
    };
    let string = |name: &str| -> Result<Option<String>, ProviderError> {
        match map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(bad(format!("{name} is not a string: {other}"))),
        }
    };
    if let Some(id) = string("RequestId")?
        && id != expected.request_id
    {
        return Err(bad(format!("it answers RequestId {id}")));
    }
    if let Some(id) = string("LogicalResourceId")?
        && id != expected.logical_id
    {
        return Err(bad(format!(
            "it answers LogicalResourceId {id}, not {}",
            expected.logical_id
        )));
    }
    let success = match string("Status")?.as_deref() {
        Some("SUCCESS") => true,
        Some("FAILED") => false,
        Some(other) => {
            return Err(bad(format!(
                "Status {other:?} is neither SUCCESS nor FAILED"
            )));
        }
        None => return Err(bad("no Status".into())),
    };
    let data = match map.get("Data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(data)) => data.clone(),
        Some(other) => return Err(bad(format!("Data is not an object: {other}"))),
    };
    let no_echo = match map.get("NoEcho") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
        Some(other) => return Err(bad(format!("NoEcho is not a boolean: {other}"))),
    };
    Ok(CustomResponse {
        success,
        reason: string("Reason")?,
        physical_id: string("PhysicalResourceId")?,
        data,
        no_echo,
    })
}

/// The error of a `FAILED` response.
pub(super) fn failure(
    request: &ResourceRequest,
    kind: RequestType,
    response: &CustomResponse,
) -> ProviderError {
    ProviderError::Other(format!(
        "{} ({}): the custom resource handler reported FAILED for {}: {}",
        request.logical_id,
        request.resource_type,
        kind.as_str(),
        response.reason.as_deref().unwrap_or("(no Reason given)")
    ))
}

/// The `Fn::GetAtt` values of a response's `Data`.
pub(super) fn attributes(data: &Map<String, Value>) -> Attributes {
    data.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The `StackId` ARN of `stack_name` in (partition, region, account): CloudFormation's
/// shape, with a uuid derived from the stack name (stable across deploys).
pub fn stack_arn((partition, region, account): (&str, &str, &str), stack_name: &str) -> String {
    format!(
        "arn:{partition}:cloudformation:{region}:{account}:stack/{stack_name}/{}",
        hash_uuid(&format!("stackflow-stack\0{stack_name}"))
    )
}

/// A UUID (version 8, RFC 9562 "custom") made of the SHA-256 of `text`.
fn hash_uuid(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// A random `RequestId` (for a request without a token: no idempotency is possible).
pub(super) fn random_request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Refuses a resource type the custom resource provider does not handle.
pub(super) fn check_type(request: &ResourceRequest) -> Result<(), ProviderError> {
    if is_custom_type(&request.resource_type) {
        Ok(())
    } else {
        Err(ProviderError::InvalidRequest(format!(
            "{}: the custom resource provider does not handle {}",
            request.logical_id, request.resource_type
        )))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sdk::common::testing::props;

    const TOPIC: &str = "arn:aws:sns:eu-west-1:111122223333:handlers";
    const FUNCTION: &str = "arn:aws:lambda:us-east-1:111122223333:function:handler:live";

    fn request(properties: Value) -> ResourceRequest {
        let mut r = ResourceRequest::new("app", "Thing", "Custom::Thing", props(properties));
        r.token = "deploy-7-Thing-create".into();
        r
    }

    fn ids<'a>() -> RequestIds<'a> {
        RequestIds {
            request_id: "rid",
            stack_id: "sid",
            response_url: "http://127.0.0.1:1/b/k?X-Amz-Signature=s",
        }
    }

    #[test]
    fn service_tokens_route_to_lambda_or_sns() {
        match ServiceTarget::parse(FUNCTION) {
            Ok(ServiceTarget::Lambda(arn)) => {
                assert_eq!(arn.region, "us-east-1");
                assert_eq!(arn.account, "111122223333");
                assert_eq!(arn.resource, "function:handler:live");
            }
            other => panic!("{other:?}"),
        }
        match ServiceTarget::parse(TOPIC) {
            Ok(ServiceTarget::Sns(arn)) => assert_eq!(arn.region, "eu-west-1"),
            other => panic!("{other:?}"),
        }
        for bad in [
            "handler",
            "arn:aws:sqs:us-east-1:1:queue",
            "arn:aws:lambda:us-east-1:1:layer:x",
            "arn:aws:sns:us-east-1:1:topic:subscription-id",
            "arn:aws:sns::1:topic",
        ] {
            assert!(
                matches!(
                    ServiceTarget::parse(bad),
                    Err(ProviderError::InvalidRequest(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn create_request_has_cloudformation_fields_and_string_values() {
        let r = request(json!({
            "ServiceToken": TOPIC,
            "Count": 3,
            "Enabled": true,
            "Nested": {"List": [1, false, "x", null]}
        }));
        let event = build_request(RequestType::Create, &r, &ids()).unwrap();
        assert_eq!(
            event,
            json!({
                "RequestType": "Create",
                "ServiceToken": TOPIC,
                "ResponseURL": "http://127.0.0.1:1/b/k?X-Amz-Signature=s",
                "StackId": "sid",
                "RequestId": "rid",
                "LogicalResourceId": "Thing",
                "ResourceType": "Custom::Thing",
                "ResourceProperties": {
                    "ServiceToken": TOPIC,
                    "Count": "3",
                    "Enabled": "true",
                    "Nested": {"List": ["1", "false", "x", null]}
                }
            })
        );
        assert!(event.get("PhysicalResourceId").is_none());
        assert!(event.get("OldResourceProperties").is_none());
    }

    #[test]
    fn update_and_delete_requests_carry_the_physical_id() {
        let mut r = request(json!({"ServiceToken": TOPIC, "V": 2}));
        assert!(matches!(
            build_request(RequestType::Update, &r, &ids()),
            Err(ProviderError::InvalidRequest(_))
        ));
        r.previous_properties = json!({"ServiceToken": TOPIC, "V": 1}).as_object().cloned();
        r.physical_id = Some("phys-1".into());
        let event = build_request(RequestType::Update, &r, &ids()).unwrap();
        assert_eq!(event["RequestType"], "Update");
        assert_eq!(event["PhysicalResourceId"], "phys-1");
        assert_eq!(
            event["OldResourceProperties"],
            json!({"ServiceToken": TOPIC, "V": "1"})
        );
        assert_eq!(
            event["ResourceProperties"],
            json!({"ServiceToken": TOPIC, "V": "2"})
        );

        let event = build_request(RequestType::Delete, &r, &ids()).unwrap();
        assert_eq!(event["RequestType"], "Delete");
        assert_eq!(event["PhysicalResourceId"], "phys-1");
        assert!(event.get("OldResourceProperties").is_none());

        r.physical_id = None;
        assert!(build_request(RequestType::Delete, &r, &ids()).is_err());
    }

    #[test]
    fn changing_the_service_token_or_omitting_it_is_refused() {
        let mut r = request(json!({"ServiceToken": TOPIC}));
        r.previous_properties = json!({"ServiceToken": FUNCTION}).as_object().cloned();
        r.physical_id = Some("p".into());
        match build_request(RequestType::Update, &r, &ids()) {
            Err(ProviderError::InvalidRequest(m)) => assert!(m.contains("ServiceToken"), "{m}"),
            other => panic!("{other:?}"),
        }
        let r = request(json!({"X": 1}));
        assert!(matches!(
            build_request(RequestType::Create, &r, &ids()),
            Err(ProviderError::InvalidRequest(_))
        ));
    }

    #[test]
    fn request_ids_are_deterministic_per_action() {
        let r = request(json!({"ServiceToken": TOPIC}));
        let a = request_id(&r, RequestType::Create);
        assert_eq!(a, request_id(&r.clone(), RequestType::Create));
        assert_ne!(a, request_id(&r, RequestType::Delete));
        let mut other = r.clone();
        other.token = "deploy-8-Thing-create".into();
        assert_ne!(a, request_id(&other, RequestType::Create));
        // UUID-shaped: 8-4-4-4-12 lowercase hex, version 8, RFC variant.
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('8'), "{a}");
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{a}");
        assert_ne!(random_request_id(), random_request_id());
    }

    #[test]
    fn default_physical_ids_are_stable_and_distinct() {
        let a = default_physical_id("app", "Thing", "r1");
        assert!(
            a.starts_with("app-Thing-") && a.len() == "app-Thing-".len() + 12,
            "{a}"
        );
        assert_eq!(a, default_physical_id("app", "Thing", "r1"));
        assert_ne!(a, default_physical_id("app", "Thing", "r2"));
    }

    #[test]
    fn service_timeout_only_when_valid() {
        let p = props;
        assert_eq!(
            service_timeout(&p(json!({"ServiceTimeout": 30}))),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            service_timeout(&p(json!({"ServiceTimeout": "45"}))),
            Some(Duration::from_secs(45))
        );
        assert_eq!(service_timeout(&p(json!({"ServiceTimeout": 0}))), None);
        assert_eq!(service_timeout(&p(json!({"ServiceTimeout": 3601}))), None);
        assert_eq!(service_timeout(&p(json!({}))), None);
    }

    fn expected<'a>() -> Expected<'a> {
        Expected {
            request_id: "rid",
            logical_id: "Thing",
        }
    }

    #[test]
    fn parses_success_with_data_and_no_echo() {
        let body = json!({
            "Status": "SUCCESS",
            "PhysicalResourceId": "thing-1",
            "StackId": "sid",
            "RequestId": "rid",
            "LogicalResourceId": "Thing",
            "NoEcho": "true",
            "Data": {"Endpoint": "https://x", "Port": 443}
        })
        .to_string();
        let got = parse_response(body.as_bytes(), &expected()).unwrap();
        assert!(got.success);
        assert!(got.no_echo);
        assert_eq!(got.physical_id.as_deref(), Some("thing-1"));
        assert_eq!(got.reason, None);
        let attrs = attributes(&got.data);
        assert_eq!(attrs.get("Endpoint"), Some(&json!("https://x")));
        assert_eq!(attrs.get("Port"), Some(&json!(443)));
    }

    #[test]
    fn parses_failed_and_minimal_responses() {
        let got = parse_response(
            br#"{"Status":"FAILED","Reason":"quota exceeded","PhysicalResourceId":""}"#,
            &expected(),
        )
        .unwrap();
        assert!(!got.success);
        assert_eq!(got.reason.as_deref(), Some("quota exceeded"));
        assert_eq!(got.physical_id, None);
        assert!(got.data.is_empty());
        assert!(!got.no_echo);
        let r = request(json!({"ServiceToken": TOPIC}));
        let e = failure(&r, RequestType::Create, &got);
        assert!(e.to_string().contains("quota exceeded"), "{e}");
        assert!(!e.is_retryable());
    }

    #[test]
    fn rejects_invalid_responses() {
        let big = format!(
            r#"{{"Status":"SUCCESS","Data":{{"X":"{}"}}}}"#,
            "a".repeat(MAX_RESPONSE_BYTES)
        );
        for body in [
            "not json".to_string(),
            "[1]".to_string(),
            r#"{"Reason":"no status"}"#.to_string(),
            r#"{"Status":"OK"}"#.to_string(),
            r#"{"Status":"SUCCESS","Data":[1]}"#.to_string(),
            r#"{"Status":"SUCCESS","NoEcho":5}"#.to_string(),
            r#"{"Status":"SUCCESS","RequestId":"other"}"#.to_string(),
            r#"{"Status":"SUCCESS","LogicalResourceId":"Other"}"#.to_string(),
            r#"{"Status":"SUCCESS","PhysicalResourceId":7}"#.to_string(),
            big,
        ] {
            assert!(
                matches!(
                    parse_response(body.as_bytes(), &expected()),
                    Err(ProviderError::InvalidRequest(_))
                ),
                "{body}"
            );
        }
    }

    #[test]
    fn hashed_ids_are_version_8_uuids() {
        let id = hash_uuid("x");
        assert_eq!(id, hash_uuid("x"));
        let parsed = uuid::Uuid::parse_str(&id).expect("a UUID");
        assert_eq!(parsed.get_version_num(), 8);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(
            stack_arn(("aws", "us-east-1", "1"), "app"),
            format!(
                "arn:aws:cloudformation:us-east-1:1:stack/app/{}",
                hash_uuid("stackflow-stack\0app")
            )
        );
    }

    #[test]
    fn only_custom_types_are_handled() {
        assert!(check_type(&request(json!({}))).is_ok());
        let mut r = request(json!({}));
        r.resource_type = "AWS::SQS::Queue".into();
        assert!(matches!(
            check_type(&r),
            Err(ProviderError::InvalidRequest(_))
        ));
    }
}
