//! What the emulator holds, asked through the AWS APIs directly (never through stackflow,
//! never through a proxy): whether a resource exists, and which resources of a type a
//! test made (their names carry a tag), to find duplicates and orphans.
//!
//! fakecloud's Cloud Control API only sees what was made through Cloud Control, so the
//! service's own API is asked for the types stackflow makes with the SDK (SQS, SNS, SSM,
//! S3, DynamoDB, IAM roles, Lambda, CloudWatch Logs: this crate's own clients), the SDK
//! provider's `read_current_state` for the other types stackflow makes with the SDK (its
//! service's own Describe/Get calls, with the recorded properties: some ids alone find
//! nothing, e.g. a queue policy's), and Cloud Control for the rest.

use std::fmt;

use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use serde_json::{Map, Value};
use stackflow_providers::router::Providers;
use stackflow_providers::{CurrentState, ResourceRequest};

use crate::Emulator;

/// What a check gets wrong, as a message.
pub type Check<T> = Result<T, String>;

/// The clients of the emulator.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// stackflow's providers, whose SDK providers read the types this crate has no
    /// client for.
    providers: std::sync::Arc<Providers>,
    cloudcontrol: aws_sdk_cloudcontrol::Client,
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    ssm: aws_sdk_ssm::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    iam: aws_sdk_iam::Client,
    lambda: aws_sdk_lambda::Client,
    logs: aws_sdk_cloudwatchlogs::Client,
    s3: aws_sdk_s3::Client,
}

/// `Ok(Some(answer))`, `Ok(None)` when the error's code is one of `not_found`.
fn found<T, E, R>(result: Result<T, SdkError<E, R>>, not_found: &[&str]) -> Check<Option<T>>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: fmt::Debug + 'static,
{
    match result {
        Ok(answer) => Ok(Some(answer)),
        Err(e) if e.code().is_some_and(|c| not_found.contains(&c)) => Ok(None),
        Err(e) => Err(format!("{}", DisplayErrorContext(&e))),
    }
}

fn failed(e: impl std::error::Error) -> String {
    format!("{}", DisplayErrorContext(&e))
}

const RESOURCE_NOT_FOUND: &[&str] = &["ResourceNotFoundException"];
const NO_QUEUE: &[&str] = &[
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
];

/// The types whose resources [`Inventory::tagged`] lists through the service's API.
pub const SDK_TYPES: &[&str] = &[
    "AWS::SQS::Queue",
    "AWS::SNS::Topic",
    "AWS::SSM::Parameter",
    "AWS::S3::Bucket",
    "AWS::DynamoDB::Table",
    "AWS::IAM::Role",
    "AWS::Lambda::Function",
    "AWS::Logs::LogGroup",
];

impl Inventory {
    /// Clients of `emulator`'s own endpoint.
    pub async fn new(emulator: &Emulator) -> Inventory {
        let config = emulator.sdk_config().await;
        Inventory {
            providers: std::sync::Arc::new(Providers::from_config(&config, None)),
            cloudcontrol: aws_sdk_cloudcontrol::Client::new(&config),
            sqs: aws_sdk_sqs::Client::new(&config),
            sns: aws_sdk_sns::Client::new(&config),
            ssm: aws_sdk_ssm::Client::new(&config),
            dynamodb: aws_sdk_dynamodb::Client::new(&config),
            iam: aws_sdk_iam::Client::new(&config),
            lambda: aws_sdk_lambda::Client::new(&config),
            logs: aws_sdk_cloudwatchlogs::Client::new(&config),
            s3: emulator.s3().await,
        }
    }

    /// Whether the resource of type `ty` with the physical id `id` exists: asked through
    /// the service's API for [`SDK_TYPES`] made by the SDK (`sdk`), else Cloud Control.
    pub async fn exists(&self, ty: &str, id: &str, sdk: bool) -> Check<bool> {
        self.exists_recorded(ty, id, sdk, &Map::new()).await
    }

    /// [`Inventory::exists`] for a resource recorded with `properties`: a type made by
    /// the SDK that is not one of [`SDK_TYPES`] is read by its SDK provider, with them.
    pub async fn exists_recorded(
        &self,
        ty: &str,
        id: &str,
        sdk: bool,
        properties: &Map<String, Value>,
    ) -> Check<bool> {
        if !sdk {
            return self.cloud_control_exists(ty, id).await;
        }
        if !SDK_TYPES.contains(&ty) {
            return self.provider_exists(ty, id, properties).await;
        }
        Ok(match ty {
            "AWS::SQS::Queue" => found(
                self.sqs.get_queue_attributes().queue_url(id).send().await,
                NO_QUEUE,
            )?
            .is_some(),
            "AWS::SNS::Topic" => found(
                self.sns.get_topic_attributes().topic_arn(id).send().await,
                &["NotFound", "NotFoundException"],
            )?
            .is_some(),
            "AWS::SSM::Parameter" => found(
                self.ssm.get_parameter().name(id).send().await,
                &["ParameterNotFound"],
            )?
            .is_some(),
            "AWS::S3::Bucket" => found(
                self.s3.head_bucket().bucket(id).send().await,
                &["NotFound", "NoSuchBucket"],
            )?
            .is_some(),
            "AWS::DynamoDB::Table" => found(
                self.dynamodb.describe_table().table_name(id).send().await,
                RESOURCE_NOT_FOUND,
            )?
            .is_some(),
            "AWS::IAM::Role" => found(
                self.iam.get_role().role_name(id).send().await,
                &["NoSuchEntity"],
            )?
            .is_some(),
            "AWS::Lambda::Function" => found(
                self.lambda.get_function().function_name(id).send().await,
                RESOURCE_NOT_FOUND,
            )?
            .is_some(),
            "AWS::Logs::LogGroup" => self.log_groups().await?.iter().any(|g| g == id),
            _ => self.cloud_control_exists(ty, id).await?,
        })
    }

    async fn provider_exists(
        &self,
        ty: &str,
        id: &str,
        properties: &Map<String, Value>,
    ) -> Check<bool> {
        let Some(provider) = self.providers.registry.sdk_provider(ty) else {
            return self.cloud_control_exists(ty, id).await;
        };
        let mut request = ResourceRequest::new("inventory", "Check", ty, properties.clone());
        request.physical_id = Some(id.to_string());
        match provider.read_current_state(&request).await {
            Ok(CurrentState::Found(_)) => Ok(true),
            Ok(CurrentState::NotFound) => Ok(false),
            Ok(other) => Err(format!("{ty} {id}: {other:?}")),
            Err(e) => Err(format!("{ty} {id}: {e}")),
        }
    }

    /// Deletes through the type's SDK provider (a type this crate has no client for).
    async fn provider_delete(&self, ty: &str, id: &str) -> Check<()> {
        let Some(provider) = self.providers.registry.sdk_provider(ty) else {
            return Err(format!("{ty}: no SDK provider to delete it with"));
        };
        let mut request = ResourceRequest::new("inventory", "Cleanup", ty, Map::new());
        request.physical_id = Some(id.to_string());
        provider
            .delete(&request)
            .await
            .map(drop)
            .map_err(|e| format!("{ty} {id}: {e}"))
    }

    async fn cloud_control_exists(&self, ty: &str, id: &str) -> Check<bool> {
        let answer = self
            .cloudcontrol
            .get_resource()
            .type_name(ty)
            .identifier(id)
            .send()
            .await;
        Ok(found(answer, RESOURCE_NOT_FOUND)?.is_some())
    }

    /// Deletes a resource (one a destroy kept, or an orphan): through the service's API
    /// for the [`SDK_TYPES`] made by the SDK (`sdk`), else through Cloud Control, waiting
    /// for the request to finish.
    pub async fn delete(&self, ty: &str, id: &str, sdk: bool) -> Check<()> {
        match ty {
            "AWS::S3::Bucket" if sdk => drop(
                self.s3
                    .delete_bucket()
                    .bucket(id)
                    .send()
                    .await
                    .map_err(failed)?,
            ),
            "AWS::SQS::Queue" if sdk => drop(
                self.sqs
                    .delete_queue()
                    .queue_url(id)
                    .send()
                    .await
                    .map_err(failed)?,
            ),
            "AWS::DynamoDB::Table" if sdk => drop(
                self.dynamodb
                    .delete_table()
                    .table_name(id)
                    .send()
                    .await
                    .map_err(failed)?,
            ),
            "AWS::Logs::LogGroup" if sdk => drop(
                self.logs
                    .delete_log_group()
                    .log_group_name(id)
                    .send()
                    .await
                    .map_err(failed)?,
            ),
            "AWS::SSM::Parameter" if sdk => drop(
                self.ssm
                    .delete_parameter()
                    .name(id)
                    .send()
                    .await
                    .map_err(failed)?,
            ),
            "AWS::SNS::Topic" if sdk => drop(
                self.sns
                    .delete_topic()
                    .topic_arn(id)
                    .send()
                    .await
                    .map_err(failed)?,
            ),
            "AWS::IAM::Role" if sdk => drop(
                self.iam
                    .delete_role()
                    .role_name(id)
                    .send()
                    .await
                    .map_err(failed)?,
            ),
            "AWS::Lambda::Function" if sdk => drop(
                self.lambda
                    .delete_function()
                    .function_name(id)
                    .send()
                    .await
                    .map_err(failed)?,
            ),
            _ if sdk => return self.provider_delete(ty, id).await,
            _ => self.cloud_control_delete(ty, id).await?,
        }
        Ok(())
    }

    async fn cloud_control_delete(&self, ty: &str, id: &str) -> Check<()> {
        use aws_sdk_cloudcontrol::types::OperationStatus;
        let started = self
            .cloudcontrol
            .delete_resource()
            .type_name(ty)
            .identifier(id)
            .send()
            .await;
        let mut event = started.map_err(failed)?.progress_event().cloned();
        for _ in 0..300 {
            match event.as_ref().and_then(|p| p.operation_status()) {
                Some(OperationStatus::Success) => return Ok(()),
                Some(OperationStatus::Failed | OperationStatus::CancelComplete) => {
                    return Err(format!("Cloud Control DeleteResource {ty} {id}: {event:?}"));
                }
                _ => {}
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let token = event
                .as_ref()
                .and_then(|p| p.request_token())
                .unwrap_or_default();
            let status = self
                .cloudcontrol
                .get_resource_request_status()
                .request_token(token)
                .send()
                .await;
            event = status.map_err(failed)?.progress_event().cloned();
        }
        Err(format!(
            "Cloud Control DeleteResource {ty} {id}: not done in 30 s: {event:?}"
        ))
    }

    /// The physical ids of the resources of `ty` (one of [`SDK_TYPES`]) whose name holds
    /// `tag`, as stackflow records them (a queue's URL, a topic's ARN, else the name).
    pub async fn tagged(&self, ty: &str, tag: &str) -> Check<Vec<String>> {
        let mut ids = match ty {
            "AWS::SQS::Queue" => self.queues().await?,
            "AWS::SNS::Topic" => self.topics().await?,
            "AWS::SSM::Parameter" => self.parameters().await?,
            "AWS::S3::Bucket" => {
                let answer = self.s3.list_buckets().send().await.map_err(failed)?;
                let names = answer.buckets().iter().filter_map(|b| b.name());
                names.map(str::to_string).collect()
            }
            "AWS::DynamoDB::Table" => self.tables().await?,
            "AWS::IAM::Role" => self.roles().await?,
            "AWS::Lambda::Function" => self.functions().await?,
            "AWS::Logs::LogGroup" => self.log_groups().await?,
            _ => return Err(format!("{ty}: not listed through its service")),
        };
        // A queue's name is the last part of its URL (whose host and port say where it
        // was asked for), a topic's the last part of its ARN.
        let tag = tag.to_ascii_lowercase();
        ids.retain(|id| {
            let name = match ty {
                "AWS::SQS::Queue" => id.rsplit('/').next().unwrap_or(id),
                "AWS::SNS::Topic" => id.rsplit(':').next().unwrap_or(id),
                _ => id,
            };
            name.to_ascii_lowercase().contains(&tag)
        });
        ids.sort();
        Ok(ids)
    }

    /// The identifiers Cloud Control lists for `ty` (what was made through it).
    pub async fn cloud_control(&self, ty: &str) -> Check<Vec<String>> {
        let mut ids = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .cloudcontrol
                .list_resources()
                .type_name(ty)
                .set_next_token(token)
                .send()
                .await
                .map_err(failed)?;
            let found = page.resource_descriptions().iter();
            ids.extend(found.filter_map(|d| d.identifier().map(str::to_string)));
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => break,
            }
        }
        ids.sort();
        Ok(ids)
    }

    async fn queues(&self) -> Check<Vec<String>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self.sqs.list_queues().set_next_token(token).send().await;
            let page = page.map_err(failed)?;
            out.extend(page.queue_urls().iter().cloned());
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    async fn topics(&self) -> Check<Vec<String>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self.sns.list_topics().set_next_token(token).send().await;
            let page = page.map_err(failed)?;
            out.extend(
                page.topics()
                    .iter()
                    .filter_map(|t| t.topic_arn().map(str::to_string)),
            );
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    async fn parameters(&self) -> Check<Vec<String>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .ssm
                .describe_parameters()
                .set_next_token(token)
                .send()
                .await;
            let page = page.map_err(failed)?;
            out.extend(
                page.parameters()
                    .iter()
                    .filter_map(|p| p.name().map(str::to_string)),
            );
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    async fn tables(&self) -> Check<Vec<String>> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .dynamodb
                .list_tables()
                .set_exclusive_start_table_name(start)
                .send()
                .await;
            let page = page.map_err(failed)?;
            out.extend(page.table_names().iter().cloned());
            match page.last_evaluated_table_name() {
                Some(t) => start = Some(t.to_string()),
                None => return Ok(out),
            }
        }
    }

    async fn roles(&self) -> Check<Vec<String>> {
        let mut out = Vec::new();
        let mut marker = None;
        loop {
            let page = self.iam.list_roles().set_marker(marker).send().await;
            let page = page.map_err(failed)?;
            out.extend(page.roles().iter().map(|r| r.role_name().to_string()));
            match page.marker() {
                Some(m) if page.is_truncated() => marker = Some(m.to_string()),
                _ => return Ok(out),
            }
        }
    }

    async fn functions(&self) -> Check<Vec<String>> {
        let mut out = Vec::new();
        let mut marker = None;
        loop {
            let page = self.lambda.list_functions().set_marker(marker).send().await;
            let page = page.map_err(failed)?;
            out.extend(
                page.functions()
                    .iter()
                    .filter_map(|f| f.function_name().map(str::to_string)),
            );
            match page.next_marker() {
                Some(m) if !m.is_empty() => marker = Some(m.to_string()),
                _ => return Ok(out),
            }
        }
    }

    async fn log_groups(&self) -> Check<Vec<String>> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .logs
                .describe_log_groups()
                .set_next_token(token)
                .send()
                .await
                .map_err(failed)?;
            out.extend(
                page.log_groups()
                    .iter()
                    .filter_map(|g| g.log_group_name().map(str::to_string)),
            );
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }
}

/// Whether a recorded value and the one read from AWS agree: equal, where a number or a
/// boolean and its text count as equal, and an object read from AWS may hold more keys
/// (defaults) than the recorded one.
pub fn same_value(recorded: &serde_json::Value, read: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (recorded, read) {
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .all(|(k, v)| y.get(k).is_none_or(|w| same_value(v, w))),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_value(v, w))
        }
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => {
            n.to_string() == *s
        }
        (Value::Bool(v), Value::String(s)) | (Value::String(s), Value::Bool(v)) => {
            v.to_string() == *s
        }
        _ => recorded == read,
    }
}
