//! **Start**: a deploy started by an EventBridge event. EventBridge cannot name a Step
//! Functions execution, so this handler names it after the event's id: a redelivered
//! event (EventBridge delivers at least once) finds its execution and starts nothing.
//!
//! Two events start a deploy:
//! - S3's `Object Created` for the engine's bucket, for an object under
//!   `deploy/<stack>/`: a template (`.json`, `.yaml`, `.yml`, `.template`) or a zipped
//!   `cdk.out` (`.zip`); a `deploy/<stack>/parameters.json` beside a template holds its
//!   parameter values (`{"Name": "value"}`) and starts nothing itself;
//! - `Deploy Requested` (source `stackflow`), whose detail is [`DeployRequested`].

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stackflow_events::EventStore;

use super::super::errors::{ErrorKind, TaskError};
use super::super::tasks::Tasks;
use super::{Launch, Source};

/// An EventBridge event as a Lambda target receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct BusEvent {
    /// The envelope's version (`"0"`).
    #[serde(default)]
    pub version: String,
    /// The event's id: the same on every delivery of one event.
    pub id: String,
    /// What happened (`Object Created`, `Deploy Requested`).
    pub detail_type: String,
    /// Who sent it (`aws.s3`, `stackflow`).
    pub source: String,
    /// The account it was sent in.
    #[serde(default)]
    pub account: String,
    /// When.
    #[serde(default)]
    pub time: String,
    /// The region.
    #[serde(default)]
    pub region: String,
    /// The resources it concerns.
    #[serde(default)]
    pub resources: Vec<String>,
    /// The event's own fields.
    pub detail: Value,
}

/// The detail of a `Deploy Requested` event (source `stackflow`), version `"1"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeployRequested {
    /// The schema's version: `"1"`.
    pub version: String,
    /// The stack to deploy.
    pub stack: String,
    /// The key, in the engine's bucket, of its template or zipped `cdk.out`.
    pub key: String,
    /// Parameter values (a `NoEcho` one is better kept in SSM or Secrets Manager and
    /// referenced: an event's detail is not secret).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub parameters: IndexMap<String, String>,
    /// Keep what a failed deploy made.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_rollback: bool,
}

/// The detail-type of a deploy request.
pub const DEPLOY_REQUESTED: &str = "Deploy Requested";

/// Why an event starts no deploy (it is answered, not failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoDeploy {
    #[error("s3://{bucket}/{key} is not in the engine's bucket")]
    NotOurBucket { bucket: String, key: String },
    #[error("{0} is not a template or a zipped cdk.out under deploy/<stack>/")]
    NotStaged(String),
    #[error(
        "a Deploy Requested event for stack {stack} names {key}: it deploys only a template or \
         zipped cdk.out under deploy/{stack}/"
    )]
    OtherStack { stack: String, key: String },
    #[error("an event {kind:?} from {sender:?} does not start a deploy")]
    NotADeployEvent { kind: String, sender: String },
    #[error("an event from account {account:?} does not start a deploy in account {own}")]
    OtherAccount { account: String, own: String },
}

/// What the event asks for: a launch, or nothing (why).
pub fn launch_of(event: &BusEvent, bucket: &str) -> Result<Result<Launch, NoDeploy>, TaskError> {
    let name = execution_name("ev", &event.id);
    let account = Some(event.account.clone()).filter(|a| !a.is_empty());
    match (event.source.as_str(), event.detail_type.as_str()) {
        ("aws.s3", "Object Created") => {
            let at = |p: &str| event.detail.pointer(p).and_then(Value::as_str);
            let (Some(b), Some(key)) = (at("/bucket/name"), at("/object/key")) else {
                return Err(input(
                    "an Object Created event without bucket.name and object.key",
                ));
            };
            if b != bucket {
                return Ok(Err(NoDeploy::NotOurBucket {
                    bucket: b.to_string(),
                    key: key.to_string(),
                }));
            }
            let Some(stack) = stack_of_key(key) else {
                return Ok(Err(NoDeploy::NotStaged(key.to_string())));
            };
            Ok(Ok(Launch {
                stack,
                name,
                source: Source::Object(key.to_string()),
                parameters: None,
                account,
                no_rollback: false,
            }))
        }
        (_, DEPLOY_REQUESTED) => {
            let d: DeployRequested = serde_json::from_value(event.detail.clone())
                .map_err(|e| input(&format!("a Deploy Requested event's detail: {e}")))?;
            if d.version != "1" {
                return Err(input(&format!(
                    "a Deploy Requested event of version {:?}: this engine reads version \"1\"",
                    d.version
                )));
            }
            // An event deploys only what a deployer put under deploy/<its stack>/: the
            // bucket lets no one else write there.
            if stack_of_key(&d.key).as_deref() != Some(d.stack.as_str()) {
                return Ok(Err(NoDeploy::OtherStack {
                    stack: d.stack,
                    key: d.key,
                }));
            }
            Ok(Ok(Launch {
                stack: d.stack,
                name,
                source: Source::Object(d.key),
                parameters: Some(d.parameters),
                account,
                no_rollback: d.no_rollback,
            }))
        }
        (source, kind) => Ok(Err(NoDeploy::NotADeployEvent {
            kind: kind.to_string(),
            sender: source.to_string(),
        })),
    }
}

/// `Err` saying why when `event` was not sent in the account of `machine` (the deploy
/// state machine's ARN, `arn:<partition>:states:<region>:<account>:...`): a bus that
/// takes other accounts' events does not let them start a deploy here.
pub fn from_own_account(event: &BusEvent, machine: &str) -> Result<(), NoDeploy> {
    let own = machine.split(':').nth(4).unwrap_or_default();
    if own.is_empty() || event.account == own {
        Ok(())
    } else {
        Err(NoDeploy::OtherAccount {
            account: event.account.clone(),
            own: own.to_string(),
        })
    }
}

fn input(message: &str) -> TaskError {
    TaskError::new(ErrorKind::Input, format!("task Start: {message}"))
}

/// The stack an object under `deploy/<stack>/` deploys, when it is a template or a zip
/// (not `parameters.json`).
pub fn stack_of_key(key: &str) -> Option<String> {
    let rest = key.strip_prefix("deploy/")?;
    let (stack, file) = rest.split_once('/')?;
    let valid = !stack.is_empty()
        && stack.len() <= 128
        && stack.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && stack.starts_with(|c: char| c.is_ascii_alphabetic());
    let file = file.rsplit('/').next().unwrap_or_default();
    let kinds = [".json", ".yaml", ".yml", ".template", ".zip"];
    let deploys = file != "parameters.json" && kinds.iter().any(|k| file.ends_with(k));
    (valid && deploys).then(|| stack.to_string())
}

/// An execution name made of `prefix` and `id`: Step Functions allows 80 characters of
/// letters, digits, `-` and `_`; any other character becomes `-`, and a longer name keeps
/// its start and a digest of the whole id (two ids never share a name).
pub fn execution_name(prefix: &str, id: &str) -> String {
    use sha2::{Digest, Sha256};
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = format!("{prefix}-{clean}");
    if name.len() <= 80 && clean == id {
        return name;
    }
    let digest = Sha256::digest(id.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let keep = 80 - 17;
    format!("{}-{hex}", &name[..name.len().min(keep)])
}

impl<S: EventStore + 'static> Tasks<S> {
    /// **Start**: the deploy `event` asks for, on the deploy state machine `machine`
    /// (its ARN), named after the event's id.
    pub async fn start(&self, machine: &str, event: BusEvent) -> Result<Value, TaskError> {
        let launch = match from_own_account(&event, machine) {
            Ok(()) => launch_of(&event, &self.bucket)?,
            Err(why) => Err(why),
        };
        match launch {
            Ok(launch) => {
                let started = self.launch(machine, launch).await?;
                Ok(serde_json::to_value(started).unwrap_or(Value::Null))
            }
            Err(why) => {
                let why = why.to_string();
                tracing::info!(event = %event.id, why, "the event starts no deploy");
                Ok(serde_json::json!({"started": false, "reason": why}))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3_event(key: &str) -> BusEvent {
        serde_json::from_value(serde_json::json!({
            "version": "0", "id": "6f0e2a40-1b7c-4f7a-9d1e-2c7c5d2a9b10",
            "detail-type": "Object Created", "source": "aws.s3",
            "account": "123456789012", "time": "2026-01-01T00:00:00Z", "region": "us-east-1",
            "resources": ["arn:aws:s3:::engine"],
            "detail": {"version": "0", "bucket": {"name": "engine"},
                       "object": {"key": key, "size": 10}}
        }))
        .unwrap()
    }

    #[test]
    fn an_object_under_deploy_names_its_stack() {
        assert_eq!(
            stack_of_key("deploy/orders/template.json").unwrap(),
            "orders"
        );
        assert_eq!(stack_of_key("deploy/orders/cdk.out.zip").unwrap(), "orders");
        assert_eq!(
            stack_of_key("deploy/Orders-2/app.template.yaml").unwrap(),
            "Orders-2"
        );
        for key in [
            "deploy/orders/parameters.json",
            "deploy/orders/readme.txt",
            "inputs/orders/x.json",
            "deploy/template.json",
            "deploy//t.json",
            "deploy/9lives/t.json",
            "deploy/a_b/t.json",
        ] {
            assert_eq!(stack_of_key(key), None, "{key}");
        }
    }

    #[test]
    fn the_execution_is_named_after_the_event_id() {
        let e = s3_event("deploy/orders/template.json");
        let launch = launch_of(&e, "engine").unwrap().unwrap();
        assert_eq!(launch.name, "ev-6f0e2a40-1b7c-4f7a-9d1e-2c7c5d2a9b10");
        assert_eq!(launch.stack, "orders");
        assert_eq!(launch.account.as_deref(), Some("123456789012"));
        // The same event delivered again: the same name.
        assert_eq!(
            launch_of(&e.clone(), "engine").unwrap().unwrap().name,
            launch.name
        );
    }

    #[test]
    fn a_long_or_odd_id_still_makes_a_valid_unique_name() {
        let a = execution_name("ev", &"a/b".repeat(40));
        let b = execution_name("ev", &"a/c".repeat(40));
        for n in [&a, &b] {
            assert!(n.len() <= 80, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            );
        }
        assert_ne!(a, b);
        assert_ne!(execution_name("ev", "a/b"), execution_name("ev", "a:b"));
    }

    #[test]
    fn other_buckets_keys_and_events_start_nothing() {
        let e = s3_event("deploy/orders/template.json");
        assert!(launch_of(&e, "other").unwrap().is_err());
        let e = s3_event("deploy/orders/parameters.json");
        assert!(launch_of(&e, "engine").unwrap().is_err());
        let mut e = s3_event("deploy/orders/template.json");
        e.detail_type = "Object Deleted".into();
        assert!(launch_of(&e, "engine").unwrap().is_err());
    }

    #[test]
    fn a_deploy_request_is_read_with_its_version() {
        let mut e = s3_event("x");
        e.source = "stackflow".into();
        e.detail_type = DEPLOY_REQUESTED.into();
        e.detail = serde_json::json!({"version": "1", "stack": "orders",
            "key": "deploy/orders/template.yaml", "parameters": {"Env": "prod"}});
        let launch = launch_of(&e, "engine").unwrap().unwrap();
        assert_eq!(
            launch.source,
            Source::Object("deploy/orders/template.yaml".into())
        );
        assert_eq!(launch.parameters.unwrap()["Env"], "prod");
        e.detail["version"] = "2".into();
        let err = launch_of(&e, "engine").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Input);
        e.detail = serde_json::json!({"version": "1", "stack": "orders", "kee": "x"});
        assert!(launch_of(&e, "engine").is_err(), "a misspelt field");
    }

    /// A deploy request names only what a deployer staged under deploy/<its stack>/ (the
    /// bucket lets no one else write there), and comes from the engine's own account.
    #[test]
    fn a_deploy_request_deploys_only_what_is_staged_for_its_stack_in_this_account() {
        let mut e = s3_event("x");
        e.source = "stackflow".into();
        e.detail_type = DEPLOY_REQUESTED.into();
        for key in [
            "inputs/orders/x.json",
            "deploy/payments/template.yaml",
            "custom-resource-responses/orders.json",
            "deploy/orders/parameters.json",
        ] {
            e.detail = serde_json::json!({"version": "1", "stack": "orders", "key": key});
            let why = launch_of(&e, "engine").unwrap().unwrap_err().to_string();
            assert!(why.contains("under deploy/orders/"), "{key}: {why}");
        }
        let machine = "arn:aws:states:us-east-1:123456789012:stateMachine:stackflow-deploy";
        assert_eq!(from_own_account(&e, machine), Ok(()));
        e.account = "999999999999".into();
        let why = from_own_account(&e, machine).unwrap_err().to_string();
        assert!(why.contains("account \"999999999999\""), "{why}");
    }
}
