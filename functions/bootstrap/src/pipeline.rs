//! **PipelineJob**: a CodePipeline Lambda invoke action that deploys a stack and reports
//! on it. The first invocation reads the action's input artifact (with the job's own
//! artifact credentials, which are never logged nor returned), starts the deploy
//! (execution `cp-<job id>`, so a job invoked again starts nothing twice) and answers
//! `PutJobSuccessResult` with a continuation token (the execution's ARN): CodePipeline
//! invokes the action again while the deploy runs, and each later invocation answers
//! with the same token until the execution ends, then `PutJobSuccessResult` (output
//! variables `DeployId`, `Execution`) or `PutJobFailureResult` with the failed resources.
//!
//! The action's `UserParameters` (JSON): `{"stack": "orders", "file": "template.json"}`:
//! `file` is the template's path inside the artifact; without it the artifact is a
//! zipped `cdk.out` and `stack` names one of its stacks. `"parameters": {"Name":
//! "value"}` and `"artifact": "<input artifact name>"` (else the first) are optional.

use aws_sdk_codepipeline::types::{ExecutionDetails, FailureDetails, FailureType};
use aws_sdk_sfn::types::ExecutionStatus;
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Value, json};
use stackflow_engine::sfn::triggers::start::execution_name;
use stackflow_engine::sfn::triggers::{Launch, Source, unzip};
use stackflow_engine::tasks::{ErrorKind, TaskError, Tasks};
use stackflow_events::EventStore;

/// The Lambda event of a CodePipeline invoke action.
#[derive(Deserialize)]
pub struct JobEvent {
    /// The job.
    #[serde(rename = "CodePipeline.job")]
    pub job: Job,
}

/// A CodePipeline job.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// Its id (`PutJob*Result` name it).
    pub id: String,
    /// The pipeline's account.
    #[serde(default)]
    pub account_id: String,
    /// What the action has.
    pub data: JobData,
}

/// A job's data.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobData {
    /// The action's configuration (`UserParameters`).
    pub action_configuration: ActionConfiguration,
    /// The input artifacts.
    #[serde(default)]
    pub input_artifacts: Vec<Artifact>,
    /// The credentials that read the artifacts: never logged.
    pub artifact_credentials: Option<ArtifactCredentials>,
    /// The token of the last `PutJobSuccessResult`, on a continuation.
    #[serde(default)]
    pub continuation_token: Option<String>,
}

/// `actionConfiguration`.
#[derive(Deserialize)]
pub struct ActionConfiguration {
    /// `FunctionName`, `UserParameters`.
    pub configuration: IndexMap<String, String>,
}

/// An input artifact.
#[derive(Deserialize)]
pub struct Artifact {
    /// Its name.
    pub name: String,
    /// Where it is.
    pub location: Location,
}

/// An artifact's location.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// The S3 object.
    pub s3_location: S3Location,
}

/// An S3 object.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct S3Location {
    /// The bucket.
    pub bucket_name: String,
    /// The key.
    pub object_key: String,
}

/// The job's temporary credentials for its artifacts.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactCredentials {
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
}

impl std::fmt::Debug for ArtifactCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArtifactCredentials(***)")
    }
}

/// `UserParameters`, read as JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserParameters {
    /// The stack.
    pub stack: String,
    /// The template's path in the artifact; none: the artifact is a `cdk.out`.
    #[serde(default)]
    pub file: Option<String>,
    /// The input artifact's name; none: the first.
    #[serde(default)]
    pub artifact: Option<String>,
    /// Parameter values.
    #[serde(default)]
    pub parameters: IndexMap<String, String>,
}

/// The clients the handler uses besides the engine's.
pub struct PipelineClients {
    /// CodePipeline (`PutJob*Result`).
    pub codepipeline: aws_sdk_codepipeline::Client,
    /// The configuration an artifact reader is made from (with the job's credentials).
    pub config: aws_types::SdkConfig,
    /// The deploy state machine's ARN.
    pub machine: String,
}

/// Runs one invocation of the action; the answer says what was reported. An error is
/// returned only when CodePipeline could not be told (Lambda retries the invocation).
pub async fn pipeline_job<S: EventStore + 'static>(
    tasks: &Tasks<S>,
    clients: &PipelineClients,
    payload: Value,
) -> Result<Value, TaskError> {
    let event: JobEvent = serde_json::from_value(payload).map_err(|e| {
        TaskError::new(
            ErrorKind::Input,
            format!("task PipelineJob: not a CodePipeline job: {e}"),
        )
    })?;
    let job = event.job;
    let outcome = match &job.data.continuation_token {
        None => begin(tasks, clients, &job).await,
        Some(token) => follow(tasks, clients, &job, token).await,
    };
    let report = match outcome {
        Ok(report) => report,
        Err(e) => Report::Failed(format!("{}: {}", e.name(), e.message)),
    };
    report.send(&clients.codepipeline, &job.id).await
}

/// What the job is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// Still running: the continuation token (the execution's ARN).
    Running(String),
    /// Deployed: the deploy id and the execution.
    Succeeded {
        deploy_id: String,
        execution: String,
        summary: String,
    },
    /// The message (the failed resources).
    Failed(String),
}

/// CodePipeline's limit on a failure message.
const MESSAGE_LIMIT: usize = 5000;

impl Report {
    async fn send(
        self,
        client: &aws_sdk_codepipeline::Client,
        job: &str,
    ) -> Result<Value, TaskError> {
        let aws =
            |what: &str, e: String| TaskError::new(ErrorKind::Aws, format!("{what} {job}: {e}"));
        match self {
            Report::Running(token) => {
                client
                    .put_job_success_result()
                    .job_id(job)
                    .continuation_token(&token)
                    .send()
                    .await
                    .map_err(|e| aws("PutJobSuccessResult", err(e)))?;
                Ok(json!({"job": job, "status": "running", "execution": token}))
            }
            Report::Succeeded {
                deploy_id,
                execution,
                summary,
            } => {
                client
                    .put_job_success_result()
                    .job_id(job)
                    .execution_details(
                        ExecutionDetails::builder()
                            .summary(summary)
                            .external_execution_id(&deploy_id)
                            .build(),
                    )
                    .output_variables("DeployId", &deploy_id)
                    .output_variables("Execution", &execution)
                    .send()
                    .await
                    .map_err(|e| aws("PutJobSuccessResult", err(e)))?;
                Ok(json!({"job": job, "status": "succeeded", "deployId": deploy_id}))
            }
            Report::Failed(message) => {
                let message = truncate(&message, MESSAGE_LIMIT);
                let details = FailureDetails::builder()
                    .r#type(FailureType::JobFailed)
                    .message(&message)
                    .build()
                    .map_err(|e| aws("PutJobFailureResult", e.to_string()))?;
                client
                    .put_job_failure_result()
                    .job_id(job)
                    .failure_details(details)
                    .send()
                    .await
                    .map_err(|e| aws("PutJobFailureResult", err(e)))?;
                Ok(json!({"job": job, "status": "failed", "message": message}))
            }
        }
    }
}

fn err<E: std::error::Error + Send + Sync + 'static>(
    e: aws_sdk_codepipeline::error::SdkError<E>,
) -> String {
    stackflow_providers::error::error_chain(&e).to_string()
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

fn input(message: String) -> TaskError {
    TaskError::new(ErrorKind::Input, format!("task PipelineJob: {message}"))
}

fn user_parameters(job: &Job) -> Result<UserParameters, TaskError> {
    let raw = job
        .data
        .action_configuration
        .configuration
        .get("UserParameters")
        .ok_or_else(|| input("the action has no UserParameters (JSON with a stack)".into()))?;
    serde_json::from_str(raw).map_err(|e| input(format!("UserParameters: {e}")))
}

/// The first invocation: the artifact read, the deploy started.
async fn begin<S: EventStore + 'static>(
    tasks: &Tasks<S>,
    clients: &PipelineClients,
    job: &Job,
) -> Result<Report, TaskError> {
    let params = user_parameters(job)?;
    let artifact = match &params.artifact {
        Some(name) => job.data.input_artifacts.iter().find(|a| &a.name == name),
        None => job.data.input_artifacts.first(),
    }
    .ok_or_else(|| input("the action has no such input artifact".into()))?;
    let zip = read_artifact(clients, job, &artifact.location.s3_location).await?;
    let source = match &params.file {
        Some(file) => {
            let entries = unzip::entries(&zip).map_err(|e| input(format!("the artifact: {e}")))?;
            let wanted = file.trim_start_matches("./");
            let entry = entries.iter().find(|e| e.name == wanted).ok_or_else(|| {
                input(format!("the artifact {} has no file {file}", artifact.name))
            })?;
            let bytes =
                unzip::read(&zip, entry).map_err(|e| input(format!("the artifact: {e}")))?;
            let name = wanted.rsplit('/').next().unwrap_or(wanted).to_string();
            Source::Bytes { file: name, bytes }
        }
        None => Source::Bytes {
            file: format!("{}.zip", artifact.name),
            bytes: zip,
        },
    };
    let launch = Launch {
        stack: params.stack.clone(),
        name: execution_name("cp", &job.id),
        source,
        parameters: Some(params.parameters),
        account: Some(job.account_id.clone()).filter(|a| !a.is_empty()),
        no_rollback: false,
    };
    let launched = tasks.launch(&clients.machine, launch).await?;
    Ok(Report::Running(launched.execution))
}

/// Reads the artifact with the job's own credentials (a client made for this call).
async fn read_artifact(
    clients: &PipelineClients,
    job: &Job,
    at: &S3Location,
) -> Result<Vec<u8>, TaskError> {
    let creds = job
        .data
        .artifact_credentials
        .as_ref()
        .ok_or_else(|| input("the job has no artifact credentials".into()))?;
    let provider = aws_credential_types::Credentials::new(
        &creds.access_key_id,
        &creds.secret_access_key,
        creds.session_token.clone(),
        None,
        "codepipeline-job",
    );
    let conf = aws_sdk_s3::config::Builder::from(&clients.config)
        .credentials_provider(provider)
        .force_path_style(clients.config.endpoint_url().is_some())
        .build();
    let s3 = aws_sdk_s3::Client::from_conf(conf);
    let what = format!("GetObject s3://{}/{}", at.bucket_name, at.object_key);
    let out = s3
        .get_object()
        .bucket(&at.bucket_name)
        .key(&at.object_key)
        .send()
        .await
        .map_err(|e| {
            TaskError::new(
                ErrorKind::Aws,
                format!("{what}: {}", stackflow_providers::error::error_chain(&e)),
            )
        })?;
    let length = out.content_length;
    stackflow_engine::sfn::read_body(
        out.body,
        length,
        stackflow_engine::sfn::MAX_OBJECT_BYTES,
        &what,
    )
    .await
}

/// A continuation: how the execution `token` names is doing.
async fn follow<S: EventStore + 'static>(
    tasks: &Tasks<S>,
    _clients: &PipelineClients,
    job: &Job,
    token: &str,
) -> Result<Report, TaskError> {
    let params = user_parameters(job)?;
    let d = tasks
        .sfn
        .describe_execution()
        .execution_arn(token)
        .send()
        .await
        .map_err(|e| {
            TaskError::new(
                ErrorKind::Aws,
                format!(
                    "DescribeExecution {token}: {}",
                    stackflow_providers::error::error_chain(&e)
                ),
            )
        })?;
    let deploy_id = token.rsplit(':').next().unwrap_or(token).to_string();
    match d.status.clone() {
        ExecutionStatus::Running | ExecutionStatus::PendingRedrive => {
            Ok(Report::Running(token.to_string()))
        }
        ExecutionStatus::Succeeded => Ok(Report::Succeeded {
            summary: format!("stackflow deployed {} ({deploy_id})", params.stack),
            deploy_id,
            execution: token.to_string(),
        }),
        status => {
            let failed = tasks.failed_resources(&params.stack, &deploy_id).await?;
            let mut message = format!(
                "the deploy of {} ({deploy_id}) ended {}",
                params.stack,
                status.as_str().to_ascii_lowercase()
            );
            if let Some(cause) = d.error() {
                message.push_str(&format!(" ({cause})"));
            }
            if failed.is_empty() {
                message.push_str("; no resource failed (see the execution)");
            } else {
                message.push_str(&format!("; failed: {}", failed.join("; ")));
            }
            Ok(Report::Failed(message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample pipeline's Lambda action invokes the function the engine's template
    /// makes (engine name `stackflow`): Lambda function names are case-sensitive.
    #[test]
    fn the_sample_pipeline_names_the_function_the_template_makes() {
        let sample: Value =
            serde_json::from_str(include_str!("../../../infra/pipeline.sample.json")).unwrap();
        let template = include_str!("../../../infra/engine.yaml");
        let named: Vec<&str> = sample["pipeline"]["stages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["actions"].as_array().unwrap().iter())
            .filter_map(|a| a["configuration"]["FunctionName"].as_str())
            .collect();
        assert_eq!(named, vec!["stackflow-pipelinejob"]);
        assert!(template.contains("FunctionName: !Sub \"${EngineName}-pipelinejob\""));
        assert!(
            template.contains("Default: stackflow"),
            "the engine's default name"
        );
    }

    fn job(token: Option<&str>) -> Value {
        json!({"CodePipeline.job": {
        "id": "11111111-2222-3333-4444-555555555555",
        "accountId": "123456789012",
        "data": {
            "actionConfiguration": {"configuration": {
                "FunctionName": "stackflow-pipelinejob",
                "UserParameters": "{\"stack\": \"orders\", \"file\": \"template.json\"}"}},
            "inputArtifacts": [{"name": "BuildOutput", "revision": null,
                "location": {"type": "S3", "s3Location": {
                    "bucketName": "artifacts", "objectKey": "p/BuildOutput/abc.zip"}}}],
            "outputArtifacts": [],
            "artifactCredentials": {"accessKeyId": "AKIAEXAMPLEKEY",
                "secretAccessKey": "sEcReT/artifact+key", "sessionToken": "tOkEn"},
            "continuationToken": token
        }}})
    }

    #[test]
    fn a_job_reads_and_never_shows_its_credentials() {
        let e: JobEvent = serde_json::from_value(job(None)).unwrap();
        let shown = format!("{:?}", e.job.data.artifact_credentials);
        assert_eq!(shown, "Some(ArtifactCredentials(***))");
        let p = user_parameters(&e.job).unwrap();
        assert_eq!(
            (p.stack.as_str(), p.file.as_deref()),
            ("orders", Some("template.json"))
        );
        let e: JobEvent = serde_json::from_value(job(Some("arn:x"))).unwrap();
        assert_eq!(e.job.data.continuation_token.as_deref(), Some("arn:x"));
    }

    #[test]
    fn a_long_failure_message_is_cut_at_the_limit() {
        let long = "é".repeat(4000);
        let cut = truncate(&long, MESSAGE_LIMIT);
        assert!(cut.len() <= MESSAGE_LIMIT && cut.ends_with("..."));
        assert_eq!(truncate("short", MESSAGE_LIMIT), "short");
    }

    #[test]
    fn bad_user_parameters_are_an_input_error() {
        let mut v = job(None);
        v["CodePipeline.job"]["data"]["actionConfiguration"]["configuration"]["UserParameters"] =
            json!("{\"stak\": \"orders\"}");
        let e: JobEvent = serde_json::from_value(v).unwrap();
        let err = user_parameters(&e.job).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Input);
        assert!(!err.message.contains("sEcReT"));
    }

    #[test]
    fn the_sample_job_reads() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events/pipelinejob.json");
        let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let e: JobEvent = serde_json::from_value(v).unwrap();
        assert_eq!(user_parameters(&e.job).unwrap().stack, "orders");
        assert!(e.job.data.continuation_token.is_none());
    }
}
