//! The CDK corpus (`tests/fixtures/corpus/`) deployed end to end with the `stackflow`
//! binary against the local emulator (fakecloud, one per test binary, see
//! `stackflow_tests::emulator`).
//!
//! For every case the emulator can serve, [`corpus_deploys_and_destroys_cleanly`]:
//!
//! 1. `deploy` exits 0 and every stack succeeds;
//! 2. `diff --json` right after plans a `no-op` for every resource;
//! 3. a second `deploy` says "no changes" for every stack and records no new
//!    `ResourceIntent` event (so it made no AWS write call);
//! 4. every resource recorded in the state (nested stacks' included) is asked for through
//!    the AWS APIs, which must see it: this proves that the checks below can see it;
//! 5. `destroy` of each stack, in reverse dependency order, exits 0; the state is empty
//!    afterwards;
//! 6. through the AWS APIs again (never through stackflow's state): every resource is
//!    gone, except those whose `DeletionPolicy` keeps them (`Retain`,
//!    `RetainExceptOnCreate`, and `Snapshot`, which stackflow keeps too): they must still
//!    exist. They are then deleted through the SDK.
//!
//! Each case runs to its end and the test reports every failing case at once.
//!
//! [`replacement_v1_then_v2_replaces_updates_adds_and_removes`] deploys `replacement-v1`
//! and then `replacement-v2` over it, and checks the second deploy's counts and the
//! per-resource actions against the plan (`diff --json`) and the AWS APIs.
//!
//! # How a resource is looked up
//!
//! fakecloud's Cloud Control API only sees what was created through Cloud Control: it
//! answers `ResourceNotFoundException` for a queue or a role that stackflow created
//! through the service's own API. So the service SDK is asked wherever the test has
//! one (SQS, SNS, SSM, Secrets Manager, DynamoDB, IAM, Lambda, CloudWatch Logs, S3); any
//! other type stackflow has an SDK provider for (EC2, KMS, EventBridge, Step Functions,
//! IAM policies, queue and bucket policies, ...) is asked through that provider's
//! `read_current_state`, which calls the service's own API (this crate's tests have no
//! client for most of those services); Cloud Control `GetResource` is asked for the rest
//! (Lambda versions/aliases/URLs, ...). Nested stacks (`AWS::CloudFormation::Stack`) have
//! no AWS object of their own: the resources of the child stack (`<parent>-<logicalId>`)
//! are checked instead.
//!
//! # Cases the emulator cannot serve (not run here)
//!
//! - `apigw-lambda`: its `AWS::ApiGateway::Account` deploys through its SDK provider
//!   (`tests/tests/providers_apigateway.rs`), but fakecloud's Cloud Control refuses the
//!   `AWS::ApiGateway::UsagePlan` without a `UsagePlanName` ("GeneralServiceException:
//!   UsagePlanName is required"), which AWS makes optional.
//! - `cidr-split-select`: `AWS::EC2::VPCCidrBlock`, same answer.
//! - `cloudwatch-alarm`: `AWS::CloudWatch::CompositeAlarm`, same answer.
//! - `custom-resource-provider` and `s3-autodelete-objects`: Lambda-backed custom
//!   resources, whose functions are made from code published to the CDK bootstrap bucket;
//!   fakecloud keeps no code for a function created from an S3 object, so they run in
//!   `tests/tests/custom_resources_corpus.rs`, through a proxy that inlines that code,
//!   with the handlers' code running through the emulator's container stand-in.
//! - `language-extensions`: the `AWS::LanguageExtensions` transform is not supported
//!   yet (stackflow refuses the template before any AWS call).
//!
//! # Names
//!
//! Single-stack cases are deployed from their template file under a fresh stack name
//! (`--stack`), so the physical names derived from it never collide. Multi-stack and
//! nested cases are deployed from their `cdk.out` directory under the corpus' stack
//! names, once per emulator. Names written in the templates (the EventBridge bus
//! `corpus-bus`, the KMS aliases `alias/corpus/*`, the replacement buckets) are fixed:
//! point `STACKFLOW_TEST_ENDPOINT` at an emulator only once, or at a fresh one.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use serde_json::Value;
use stackflow_tests::emulator::{Emulator, unique_name};

// ---------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------

/// How a case is deployed.
enum Source {
    /// The one template of a single-stack case, deployed under a fresh stack name.
    Template(&'static str),
    /// The `cdk.out` directory, under the corpus' stack names (dependency order).
    Assembly(&'static [&'static str]),
}

/// What must exist before a case deploys, and the parameters it takes.
#[derive(Clone, Copy)]
enum Needs {
    Nothing,
    /// `noecho-parameter`: the three parameters (the user name made unique).
    NoEchoParameters,
    /// `secrets-dynamic-ref`: the SSM parameters and the secret that its dynamic
    /// references read.
    DynamicReferenceTargets,
}

struct Case {
    /// The directory under `tests/fixtures/corpus/`.
    dir: &'static str,
    source: Source,
    needs: Needs,
}

const fn single(dir: &'static str, template: &'static str) -> Case {
    Case {
        dir,
        source: Source::Template(template),
        needs: Needs::Nothing,
    }
}

const CASES: &[Case] = &[
    Case {
        dir: "cross-stack-export-import",
        source: Source::Assembly(&["ExportProducerStack", "ImportConsumerStack"]),
        needs: Needs::Nothing,
    },
    single("deep-chain-50", "DeepChain50Stack.template.json"),
    Case {
        dir: "dependson-explicit",
        source: Source::Assembly(&["DependsOnExplicitStack", "DependsOnLaterStack"]),
        needs: Needs::Nothing,
    },
    single("dynamodb-gsi", "DynamoDbGsiStack.template.json"),
    single(
        "eventbridge-rule-lambda",
        "EventBridgeRuleLambdaStack.template.json",
    ),
    single("kms-key-alias", "KmsKeyAliasStack.template.json"),
    single(
        "lambda-role-loggroup",
        "LambdaRoleLogGroupStack.template.json",
    ),
    single("mappings-findinmap", "MappingsFindInMapStack.template.json"),
    Case {
        dir: "nested-stack",
        source: Source::Assembly(&["NestedParentStack"]),
        needs: Needs::Nothing,
    },
    Case {
        needs: Needs::NoEchoParameters,
        ..single("noecho-parameter", "NoEchoParameterStack.template.json")
    },
    single("params-conditions", "ParamsConditionsStack.template.json"),
    single(
        "removal-policy-retain",
        "RemovalPolicyRetainStack.template.json",
    ),
    single("s3-bucket-policy", "S3BucketPolicyStack.template.json"),
    Case {
        needs: Needs::DynamicReferenceTargets,
        ..single(
            "secrets-dynamic-ref",
            "SecretsDynamicRefStack.template.json",
        )
    },
    single(
        "sqs-sns-subscription",
        "SqsSnsSubscriptionStack.template.json",
    ),
    single(
        "stepfunctions-statemachine",
        "StepFunctionsStack.template.json",
    ),
    single("sub-getatt-nesting", "SubGetAttNestingStack.template.json"),
    single("vpc-two-az-nat", "VpcTwoAzNatStack.template.json"),
    single("wide-200", "Wide200Stack.template.json"),
];

fn corpus(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/corpus")
        .join(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------------
// Running the CLI
// ---------------------------------------------------------------------------------------

/// What a test case gets wrong, as a message.
type Check<T = ()> = Result<T, String>;

fn ensure(ok: bool, message: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { Err(message()) }
}

/// The `stackflow` binary on the emulator, with its own local store.
struct Cli {
    endpoint: String,
    store: PathBuf,
}

/// One finished `stackflow` run.
struct Run {
    command: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn tail(s: &str) -> &str {
            let start = s.len().saturating_sub(4000);
            let start = (start..=s.len())
                .find(|&i| s.is_char_boundary(i))
                .unwrap_or(0);
            &s[start..]
        }
        write!(
            f,
            "`{}` exited {:?}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
            self.command,
            self.code,
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }
}

impl Run {
    /// Exit 0, or the whole run as the failure.
    fn success(self) -> Check<Run> {
        if self.code == Some(0) {
            Ok(self)
        } else {
            Err(format!("expected exit 0: {self}"))
        }
    }

    fn json(&self) -> Check<Value> {
        serde_json::from_str(&self.stdout).map_err(|e| format!("stdout is not JSON ({e}): {self}"))
    }
}

impl Cli {
    fn new(emulator: &Emulator, name: &str) -> Cli {
        let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("corpus-deploy")
            .join(unique_name(name));
        Cli {
            endpoint: emulator.endpoint().to_string(),
            store,
        }
    }

    async fn run(&self, args: &[&str]) -> Run {
        let store = format!("local:{}", self.store.display());
        let mut all = vec!["--endpoint-url", &self.endpoint, "--store", &store];
        all.extend_from_slice(args);
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_stackflow"))
            .args(&all)
            .current_dir(env!("CARGO_TARGET_TMPDIR"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", std::env::temp_dir())
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("STACKFLOW_YES", "1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .output()
            .await
            .expect("the stackflow binary runs");
        Run {
            command: format!("stackflow {}", args.join(" ")),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `state show --stack S --json`.
    async fn state(&self, stack: &str) -> Check<Value> {
        self.run(&["state", "show", "--stack", stack, "--json"])
            .await
            .success()?
            .json()
    }

    /// How many `ResourceIntent` events the stack's log holds.
    async fn intents(&self, stack: &str) -> Check<usize> {
        let run = self
            .run(&["events", "--stack", stack, "--json"])
            .await
            .success()?;
        let mut n = 0;
        for line in run.stdout.lines().filter(|l| !l.trim().is_empty()) {
            let event: Value = serde_json::from_str(line)
                .map_err(|e| format!("an event line is not JSON ({e}): {line}"))?;
            if event["event"]["type"] == "ResourceIntent" {
                n += 1;
            }
        }
        Ok(n)
    }

    /// The resources of a stack and of its nested stacks, from the recorded state.
    async fn resources(&self, stack: &str) -> Check<Vec<Resource>> {
        let mut out = Vec::new();
        let mut todo = vec![stack.to_string()];
        while let Some(stack) = todo.pop() {
            let state = self.state(&stack).await?;
            let Some(resources) = state["resources"].as_object() else {
                return Err(format!("state of {stack} has no resources: {state}"));
            };
            for (logical_id, r) in resources {
                let resource = Resource {
                    stack: stack.clone(),
                    logical_id: logical_id.clone(),
                    ty: r["type"].as_str().unwrap_or_default().to_string(),
                    physical_id: r["physicalId"].as_str().unwrap_or_default().to_string(),
                    provider: r["provider"].as_str().unwrap_or_default().to_string(),
                    deletion_policy: r["deletionPolicy"].as_str().map(str::to_string),
                    properties: r["properties"].clone(),
                };
                if resource.is_nested_stack() {
                    todo.push(format!("{stack}-{logical_id}"));
                }
                out.push(resource);
            }
        }
        Ok(out)
    }
}

/// The stack names of a `deploy --json` or `destroy --json` report, with their status.
fn report_statuses(report: &Value) -> BTreeMap<String, String> {
    report["stacks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["stack"].as_str().unwrap_or_default().to_string(),
                s["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// `logical id -> action` of every resource of a `diff --json` plan, per stack.
fn plan_actions(plan: &Value) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for stack in plan["stacks"].as_array().into_iter().flatten() {
        let actions = stack["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r["logicalId"].as_str().unwrap_or_default().to_string(),
                    r["action"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        out.insert(
            stack["stack"].as_str().unwrap_or_default().to_string(),
            actions,
        );
    }
    out
}

// ---------------------------------------------------------------------------------------
// Asking AWS
// ---------------------------------------------------------------------------------------

/// A resource as the state recorded it.
#[derive(Clone, Debug)]
struct Resource {
    stack: String,
    logical_id: String,
    ty: String,
    physical_id: String,
    provider: String,
    deletion_policy: Option<String>,
    /// The recorded properties: what finds a queue policy's queues and a permission's
    /// function.
    properties: Value,
}

impl Resource {
    /// Whether destroy leaves it in AWS.
    fn kept_on_destroy(&self) -> bool {
        matches!(
            self.deletion_policy.as_deref(),
            Some("Retain" | "RetainExceptOnCreate" | "Snapshot")
        )
    }

    fn is_nested_stack(&self) -> bool {
        self.ty == "AWS::CloudFormation::Stack"
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} ({}, {} via {})",
            self.stack, self.logical_id, self.ty, self.physical_id, self.provider
        )
    }
}

/// The SDK clients of the emulator.
struct Aws {
    cloudcontrol: aws_sdk_cloudcontrol::Client,
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    ssm: aws_sdk_ssm::Client,
    secrets: aws_sdk_secretsmanager::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    iam: aws_sdk_iam::Client,
    lambda: aws_sdk_lambda::Client,
    logs: aws_sdk_cloudwatchlogs::Client,
    s3: aws_sdk_s3::Client,
    /// stackflow's own providers: a type with an SDK provider and no client here is asked
    /// through that provider's read.
    providers: stackflow_providers::Providers,
}

/// `Ok(Some(answer))`, `Ok(None)` when the error's code is one of `not_found`, else the
/// error.
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

const RESOURCE_NOT_FOUND: &[&str] = &["ResourceNotFoundException"];

impl Aws {
    async fn new(emulator: &Emulator) -> Aws {
        let config = emulator.sdk_config().await;
        Aws {
            cloudcontrol: aws_sdk_cloudcontrol::Client::new(&config),
            sqs: aws_sdk_sqs::Client::new(&config),
            sns: aws_sdk_sns::Client::new(&config),
            ssm: aws_sdk_ssm::Client::new(&config),
            secrets: aws_sdk_secretsmanager::Client::new(&config),
            dynamodb: aws_sdk_dynamodb::Client::new(&config),
            providers: stackflow_providers::Providers::from_config(&config, None),
            iam: aws_sdk_iam::Client::new(&config),
            lambda: aws_sdk_lambda::Client::new(&config),
            logs: aws_sdk_cloudwatchlogs::Client::new(&config),
            s3: emulator.s3().await,
        }
    }

    /// Whether AWS has the recorded resource `r`: [`Aws::exists`], except for the types
    /// whose physical id alone does not find them (their SDK providers' own ids): a queue
    /// policy has a queue of its recorded `Queues` holding a `Policy`; a Lambda permission is
    /// a statement (`Sid` = the physical id) of its recorded function's policy.
    async fn exists_recorded(&self, r: &Resource) -> Check<bool> {
        let text = |key: &str| r.properties[key].as_str().unwrap_or_default().to_string();
        match r.ty.as_str() {
            "AWS::SQS::QueuePolicy" => {
                let queues = r.properties["Queues"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for url in queues.iter().filter_map(Value::as_str) {
                    let got = self
                        .sqs
                        .get_queue_attributes()
                        .queue_url(url)
                        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::Policy)
                        .send()
                        .await;
                    let not_found = [
                        "AWS.SimpleQueueService.NonExistentQueue",
                        "QueueDoesNotExist",
                    ];
                    let held = found(got, &not_found)?.and_then(|a| {
                        a.attributes()?
                            .get(&aws_sdk_sqs::types::QueueAttributeName::Policy)
                            .cloned()
                    });
                    if held.is_some_and(|p| !p.is_empty()) {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            "AWS::Lambda::Permission" => {
                let got = self
                    .lambda
                    .get_policy()
                    .function_name(text("FunctionName"))
                    .send();
                let policy = found(got.await, RESOURCE_NOT_FOUND)?;
                let policy = policy.and_then(|p| p.policy().map(str::to_string));
                let policy: Value = policy
                    .and_then(|p| serde_json::from_str(&p).ok())
                    .unwrap_or_default();
                let statements = policy["Statement"].as_array().cloned().unwrap_or_default();
                Ok(statements
                    .iter()
                    .any(|s| s["Sid"] == r.physical_id.as_str()))
            }
            // An inline policy's physical id is a made-up name: its SDK provider reads it
            // by the recorded PolicyName on the recorded Roles, Users and Groups.
            "AWS::IAM::Policy" => {
                use stackflow_providers::{CurrentState, ResourceRequest};
                let Some(provider) = self.providers.registry.sdk_provider(&r.ty) else {
                    return Err(format!("no SDK provider for {}", r.ty));
                };
                let props = r.properties.as_object().cloned().unwrap_or_default();
                let mut request = ResourceRequest::new("corpus", "Check", &r.ty, props);
                request.physical_id = Some(r.physical_id.clone());
                match provider.read_current_state(&request).await {
                    Ok(CurrentState::Found(_)) => Ok(true),
                    Ok(CurrentState::NotFound) => Ok(false),
                    Ok(CurrentState::CannotRead(why)) => Err(format!("{r}: {why}")),
                    Err(e) => Err(format!("{r}: {e}")),
                }
            }
            _ => self.exists(&r.ty, &r.physical_id).await,
        }
    }

    /// Whether AWS has the resource: asked through the service's SDK where the test has
    /// one, else through Cloud Control.
    async fn exists(&self, ty: &str, id: &str) -> Check<bool> {
        let exists = match ty {
            "AWS::SQS::Queue" => found(
                self.sqs
                    .get_queue_attributes()
                    .queue_url(id)
                    .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                    .send()
                    .await,
                &[
                    "AWS.SimpleQueueService.NonExistentQueue",
                    "QueueDoesNotExist",
                ],
            )?
            .is_some(),
            "AWS::SNS::Topic" => found(
                self.sns.get_topic_attributes().topic_arn(id).send().await,
                &["NotFound", "NotFoundException"],
            )?
            .is_some(),
            "AWS::SNS::Subscription" => found(
                self.sns
                    .get_subscription_attributes()
                    .subscription_arn(id)
                    .send()
                    .await,
                &["NotFound", "NotFoundException"],
            )?
            .is_some(),
            "AWS::SSM::Parameter" => found(
                self.ssm.get_parameter().name(id).send().await,
                &["ParameterNotFound"],
            )?
            .is_some(),
            // A secret scheduled for deletion counts as gone.
            "AWS::SecretsManager::Secret" => found(
                self.secrets.describe_secret().secret_id(id).send().await,
                RESOURCE_NOT_FOUND,
            )?
            .is_some_and(|s| s.deleted_date().is_none()),
            "AWS::DynamoDB::Table" | "AWS::DynamoDB::GlobalTable" => found(
                self.dynamodb.describe_table().table_name(id).send().await,
                RESOURCE_NOT_FOUND,
            )?
            .is_some(),
            "AWS::IAM::Role" => found(
                self.iam.get_role().role_name(id).send().await,
                &["NoSuchEntity"],
            )?
            .is_some(),
            "AWS::IAM::User" => found(
                self.iam.get_user().user_name(id).send().await,
                &["NoSuchEntity"],
            )?
            .is_some(),
            "AWS::Lambda::Function" => found(
                self.lambda.get_function().function_name(id).send().await,
                RESOURCE_NOT_FOUND,
            )?
            .is_some(),
            // One being deleted counts as gone.
            "AWS::Lambda::EventSourceMapping" => found(
                self.lambda.get_event_source_mapping().uuid(id).send().await,
                RESOURCE_NOT_FOUND,
            )?
            .is_some_and(|m| m.state() != Some("Deleting")),
            // The physical id is the bucket.
            "AWS::S3::BucketPolicy" => found(
                self.s3.get_bucket_policy().bucket(id).send().await,
                &["NoSuchBucketPolicy", "NoSuchBucket"],
            )?
            .is_some(),
            "AWS::Logs::LogGroup" => {
                let answer = self
                    .logs
                    .describe_log_groups()
                    .log_group_name_prefix(id)
                    .send()
                    .await
                    .map_err(|e| format!("{}", DisplayErrorContext(&e)))?;
                answer
                    .log_groups()
                    .iter()
                    .any(|g| g.log_group_name() == Some(id))
            }
            "AWS::S3::Bucket" => found(
                self.s3.head_bucket().bucket(id).send().await,
                &["NotFound", "NoSuchBucket"],
            )?
            .is_some(),
            // Cloud Control's GetResource knows only what Cloud Control made: a resource
            // made through its service's API is read by its SDK provider.
            ty if self.providers.registry.sdk_provider(ty).is_some() => {
                self.read_exists(ty, id).await?
            }
            _ => found(
                self.cloudcontrol
                    .get_resource()
                    .type_name(ty)
                    .identifier(id)
                    .send()
                    .await,
                RESOURCE_NOT_FOUND,
            )?
            .is_some(),
        };
        Ok(exists)
    }

    /// Whether the resource `id` of type `ty` exists, as its SDK provider reads it.
    async fn read_exists(&self, ty: &str, id: &str) -> Check<bool> {
        use stackflow_providers::{CurrentState, ResourceRequest};
        let Some(provider) = self.providers.registry.sdk_provider(ty) else {
            return Err(format!("no SDK provider for {ty}"));
        };
        let mut request = ResourceRequest::new("corpus", "Check", ty, Default::default());
        request.physical_id = Some(id.to_string());
        match provider.read_current_state(&request).await {
            Ok(CurrentState::Found(_)) => Ok(true),
            Ok(CurrentState::NotFound) => Ok(false),
            Ok(CurrentState::CannotRead(why)) => Err(format!("{ty} {id}: {why}")),
            Err(e) => Err(format!("{ty} {id}: {e}")),
        }
    }

    /// Deletes the resource `id` of type `ty` with its SDK provider.
    async fn provider_delete(&self, ty: &str, id: &str) -> Check {
        use stackflow_providers::ResourceRequest;
        let Some(provider) = self.providers.registry.sdk_provider(ty) else {
            return Err(format!("no SDK provider for {ty}"));
        };
        let mut request = ResourceRequest::new("corpus", "Cleanup", ty, Default::default());
        request.physical_id = Some(id.to_string());
        provider
            .delete(&request)
            .await
            .map(drop)
            .map_err(|e| format!("{ty} {id}: {e}"))
    }

    /// Deletes a resource that destroy kept, through the service's SDK (Cloud Control
    /// for the other types).
    async fn delete(&self, ty: &str, id: &str) -> Check {
        let e = |e: &dyn std::error::Error| format!("{}", DisplayErrorContext(e));
        match ty {
            "AWS::S3::Bucket" => {
                self.s3
                    .delete_bucket()
                    .bucket(id)
                    .send()
                    .await
                    .map_err(|x| e(&x))?;
            }
            "AWS::SQS::Queue" => {
                self.sqs
                    .delete_queue()
                    .queue_url(id)
                    .send()
                    .await
                    .map_err(|x| e(&x))?;
            }
            "AWS::DynamoDB::Table" | "AWS::DynamoDB::GlobalTable" => {
                self.dynamodb
                    .delete_table()
                    .table_name(id)
                    .send()
                    .await
                    .map_err(|x| e(&x))?;
            }
            "AWS::Logs::LogGroup" => {
                self.logs
                    .delete_log_group()
                    .log_group_name(id)
                    .send()
                    .await
                    .map_err(|x| e(&x))?;
            }
            // What an SDK provider made, Cloud Control does not know: its provider deletes it.
            ty if self.providers.registry.sdk_provider(ty).is_some() => {
                self.provider_delete(ty, id).await?;
            }
            _ => {
                let started = self
                    .cloudcontrol
                    .delete_resource()
                    .type_name(ty)
                    .identifier(id)
                    .send()
                    .await
                    .map_err(|x| e(&x))?;
                let mut event = started.progress_event().cloned();
                let deadline = Instant::now() + Duration::from_secs(30);
                use aws_sdk_cloudcontrol::types::OperationStatus;
                loop {
                    let status = event.as_ref().and_then(|p| p.operation_status().cloned());
                    match status {
                        Some(OperationStatus::Success) => break,
                        Some(OperationStatus::Failed | OperationStatus::CancelComplete) => {
                            return Err(format!("Cloud Control DeleteResource: {event:?}"));
                        }
                        _ if Instant::now() > deadline => {
                            return Err(format!(
                                "Cloud Control DeleteResource timed out: {event:?}"
                            ));
                        }
                        _ => {}
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let token = event
                        .as_ref()
                        .and_then(|p| p.request_token())
                        .unwrap_or_default()
                        .to_string();
                    event = self
                        .cloudcontrol
                        .get_resource_request_status()
                        .request_token(token)
                        .send()
                        .await
                        .map_err(|x| e(&x))?
                        .progress_event()
                        .cloned();
                }
            }
        }
        Ok(())
    }

    /// The SSM parameters and the secret that `secrets-dynamic-ref` reads, with the
    /// versions it asks for.
    async fn create_dynamic_reference_targets(&self) -> Check {
        let e = |e: &dyn std::error::Error| format!("{}", DisplayErrorContext(e));
        use aws_sdk_ssm::types::ParameterType;
        let mut puts: Vec<(&str, String, ParameterType)> = vec![
            (
                "/corpus/config/latest",
                "latest-value".into(),
                ParameterType::String,
            ),
            ("/x/y", "x-y-value".into(), ParameterType::String),
            (
                "/corpus/tag-value",
                "tag-value".into(),
                ParameterType::String,
            ),
        ];
        // `{{resolve:ssm-secure:/corpus/secure/password:2}}`: version 2 at least.
        for v in 1..=2 {
            puts.push((
                "/corpus/secure/password",
                format!("Secure-Passw0rd-v{v}!"),
                ParameterType::SecureString,
            ));
        }
        // `{{resolve:ssm:/corpus/config/endpoint:3}}`: version 3 at least.
        for v in 1..=3 {
            puts.push((
                "/corpus/config/endpoint",
                format!("endpoint-v{v}.example.com"),
                ParameterType::String,
            ));
        }
        for (name, value, ty) in puts {
            self.ssm
                .put_parameter()
                .name(name)
                .value(value)
                .r#type(ty)
                .overwrite(true)
                .send()
                .await
                .map_err(|x| e(&x))?;
        }
        let secret = r#"{"password":"External-Passw0rd!"}"#;
        let created = self
            .secrets
            .create_secret()
            .name("corpus/external-secret")
            .secret_string(secret)
            .send()
            .await;
        match created {
            Ok(_) => {}
            Err(err) if err.code() == Some("ResourceExistsException") => {
                self.secrets
                    .put_secret_value()
                    .secret_id("corpus/external-secret")
                    .secret_string(secret)
                    .send()
                    .await
                    .map_err(|x| e(&x))?;
            }
            Err(err) => return Err(e(&err)),
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The corpus test
// ---------------------------------------------------------------------------------------

/// What `deploy` and `diff` are given, and the stacks that deploys, in dependency order.
struct Target {
    args: Vec<String>,
    stacks: Vec<String>,
}

impl Target {
    /// A template file deployed as `stack`.
    fn template(file: &str, stack: &str) -> Target {
        Target {
            args: vec![corpus(file), "--stack".into(), stack.into()],
            stacks: vec![stack.into()],
        }
    }

    async fn run(&self, cli: &Cli, command: &str, extra: &[&str]) -> Run {
        let mut args = vec![command];
        args.extend(self.args.iter().map(String::as_str));
        args.extend_from_slice(extra);
        cli.run(&args).await
    }
}

/// `deploy --json` exits 0 and every stack succeeds.
async fn deploy(cli: &Cli, target: &Target) -> Check<Value> {
    let deploy = target.run(cli, "deploy", &["--json"]).await.success()?;
    let report = deploy.json()?;
    let statuses = report_statuses(&report);
    for stack in &target.stacks {
        ensure(
            statuses.get(stack).map(String::as_str) == Some("succeeded"),
            || format!("deploy: stack {stack} did not succeed: {deploy}"),
        )?;
    }
    Ok(report)
}

/// After a deploy: the plan is empty, deploying again changes nothing and makes no AWS
/// write call, and AWS sees every resource. Returns the resources (nested stacks'
/// included), as recorded.
async fn settled(cli: &Cli, aws: &Aws, target: &Target) -> Check<Vec<Resource>> {
    // The plan right after is empty.
    let diff = target.run(cli, "diff", &["--json"]).await.success()?;
    let plan = plan_actions(&diff.json()?);
    for stack in &target.stacks {
        let Some(actions) = plan.get(stack) else {
            return Err(format!("diff: no plan for stack {stack}: {diff}"));
        };
        let changes: Vec<_> = actions.iter().filter(|(_, a)| *a != "no-op").collect();
        ensure(changes.is_empty(), || {
            format!("diff after deploy: {stack} is not all no-op: {changes:?}\n{diff}")
        })?;
    }

    let mut resources = Vec::new();
    for stack in &target.stacks {
        resources.extend(cli.resources(stack).await?);
    }
    let streams: BTreeSet<&str> = resources.iter().map(|r| r.stack.as_str()).collect();

    // Deploying again changes nothing and records no intent to call AWS.
    let mut intents = BTreeMap::new();
    for stack in &streams {
        intents.insert(*stack, cli.intents(stack).await?);
    }
    let again = target.run(cli, "deploy", &[]).await.success()?;
    for stack in &target.stacks {
        let said = again
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with(&format!("deploy {stack} no changes in")))
            .nth(1)
            .is_some_and(|next| next.contains("no AWS write call was made"));
        ensure(said, || {
            format!("second deploy: {stack} did not say no changes: {again}")
        })?;
    }
    for (stack, before) in &intents {
        let after = cli.intents(stack).await?;
        ensure(after == *before, || {
            format!(
                "second deploy of {stack} recorded {} new ResourceIntent events: {again}",
                after.abs_diff(*before)
            )
        })?;
    }

    // AWS sees every resource: the checks after destroy can tell.
    for r in resources.iter().filter(|r| !r.is_nested_stack()) {
        let exists = aws
            .exists_recorded(r)
            .await
            .map_err(|e| format!("asking AWS for {r}: {e}"))?;
        ensure(exists, || {
            format!("after deploy, AWS does not see {r} (the check cannot see it)")
        })?;
    }
    Ok(resources)
}

/// `destroy` of each stack in reverse dependency order; then the state is empty, and in
/// AWS every resource is gone except those their DeletionPolicy keeps, which are then
/// deleted through the SDK.
async fn destroy(cli: &Cli, aws: &Aws, target: &Target, resources: &[Resource]) -> Check {
    for stack in target.stacks.iter().rev() {
        let destroy = cli
            .run(&["destroy", "--stack", stack, "--json"])
            .await
            .success()?;
        let report = destroy.json()?;
        let status = report_statuses(&report);
        ensure(
            status.get(stack).map(String::as_str) == Some("succeeded"),
            || format!("destroy {stack} did not succeed: {destroy}"),
        )?;
        let kept = resources
            .iter()
            .filter(|r| &r.stack == stack && r.kept_on_destroy())
            .count() as u64;
        let retained = &report["stacks"][0]["retained"];
        ensure(retained.as_u64() == Some(kept), || {
            format!("destroy {stack}: {retained} retained, expected {kept}: {destroy}")
        })?;
    }
    let streams: BTreeSet<&str> = resources.iter().map(|r| r.stack.as_str()).collect();
    for stack in streams {
        let state = cli.state(stack).await?;
        let left = state["resources"]
            .as_object()
            .map_or(usize::MAX, |m| m.len());
        ensure(left == 0, || {
            format!("after destroy the state of {stack} still has resources: {state:#}")
        })?;
    }

    let mut wrong = Vec::new();
    for r in resources.iter().filter(|r| !r.is_nested_stack()) {
        match aws.exists_recorded(r).await {
            Ok(exists) if exists == r.kept_on_destroy() => {}
            Ok(true) => wrong.push(format!("{r} still exists after destroy")),
            Ok(false) => wrong.push(format!(
                "{r} is gone, but its DeletionPolicy {:?} keeps it",
                r.deletion_policy
            )),
            Err(e) => wrong.push(format!("asking AWS for {r}: {e}")),
        }
    }
    for r in resources.iter().filter(|r| r.kept_on_destroy()) {
        let cleaned = match aws.delete(&r.ty, &r.physical_id).await {
            Ok(()) => aws.exists_recorded(r).await,
            Err(e) => Err(e),
        };
        match cleaned {
            Ok(false) => {}
            Ok(true) => wrong.push(format!("the retained {r} is still there after cleanup")),
            Err(e) => wrong.push(format!("cleaning up the retained {r}: {e}")),
        }
    }
    ensure(wrong.is_empty(), || wrong.join("\n"))
}

/// One case from deploy to destroy; `Err` says what went wrong first.
async fn deploy_and_destroy(case: &Case, emulator: &Emulator, aws: &Aws) -> Check {
    let cli = Cli::new(emulator, case.dir);
    let mut target = match &case.source {
        Source::Template(file) => {
            Target::template(&format!("{}/{file}", case.dir), &unique_name(case.dir))
        }
        Source::Assembly(stacks) => Target {
            args: vec![corpus(case.dir)],
            stacks: stacks.iter().map(|s| s.to_string()).collect(),
        },
    };
    let mut parameters: Vec<String> = Vec::new();
    match case.needs {
        Needs::Nothing => {}
        Needs::NoEchoParameters => {
            parameters.push("AdminPassword=Admin-Passw0rd!".into());
            parameters.push("ApiToken=token-0123456789".into());
            parameters.push(format!("UserName={}", unique_name("corpus-admin")));
        }
        Needs::DynamicReferenceTargets => aws
            .create_dynamic_reference_targets()
            .await
            .map_err(|e| format!("creating the SSM parameters and the secret: {e}"))?,
    }
    for p in parameters {
        target.args.push("--parameter".into());
        target.args.push(p);
    }

    deploy(&cli, &target).await?;
    let resources = settled(&cli, aws, &target).await?;
    destroy(&cli, aws, &target, &resources).await
}

#[tokio::test(flavor = "multi_thread")]
async fn corpus_deploys_and_destroys_cleanly() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let started = Instant::now();
    let mut failures = Vec::new();
    for case in CASES {
        let t = Instant::now();
        let result = deploy_and_destroy(case, emulator, &aws).await;
        let seconds = t.elapsed().as_secs_f64();
        match result {
            Ok(()) => eprintln!("corpus: {:<28} ok      {seconds:5.1}s", case.dir),
            Err(e) => {
                eprintln!("corpus: {:<28} FAILED  {seconds:5.1}s", case.dir);
                failures.push(format!("## {}\n{e}", case.dir));
            }
        }
    }
    eprintln!(
        "corpus: {} cases in {:.1}s, {} failed",
        CASES.len(),
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} corpus case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------
// Replacement
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn replacement_v1_then_v2_replaces_updates_adds_and_removes() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let cli = Cli::new(emulator, "replacement");
    let stack = unique_name("replacement");
    let v1 = Target::template("replacement-v1/ReplacementStack.template.json", &stack);
    let v2 = Target::template("replacement-v2/ReplacementStack.template.json", &stack);

    deploy(&cli, &v1).await.unwrap_or_else(|e| panic!("{e}"));
    let before: BTreeMap<String, Resource> = settled(&cli, &aws, &v1)
        .await
        .unwrap_or_else(|e| panic!("v1: {e}"))
        .into_iter()
        .map(|r| (r.logical_id.clone(), r))
        .collect();

    // The plan of v2, per action, against what the templates call for.
    let diff = v2.run(&cli, "diff", &["--json"]).await;
    assert_eq!(diff.code, Some(0), "{diff}");
    let plan = plan_actions(&diff.json().unwrap_or_else(|e| panic!("{e}")));
    let mut planned: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (id, action) in &plan[&stack] {
        planned.entry(action).or_default().insert(id);
    }
    let expected: BTreeMap<&str, BTreeSet<&str>> = [
        // The table's key, the bucket's name and FifoQueue can only be set on create.
        (
            "replace",
            ["TableCD117FA1", "NamedBucket31614D6D", "MaybeFifoE8F17D0D"].into(),
        ),
        // The queue's visibility timeout and retention, the SSM value and description,
        // and the two parameters that hold the replaced table's name and bucket's ARN.
        (
            "update",
            [
                "Queue4A7E3555",
                "Static3DDAA197",
                "TableNameParam3E3123DC",
                "BucketArnParamE5B360E9",
            ]
            .into(),
        ),
        ("create", ["AddedInV29500A960"].into()),
        ("delete", ["RemovedInV21409BCC2"].into()),
    ]
    .into();
    assert_eq!(planned, expected, "the plan of v2 over v1: {diff}");

    // Replacing the table and the named bucket deletes their data: refused before any
    // write, naming both, unless allowed.
    let refused = v2.run(&cli, "deploy", &[]).await;
    assert_eq!(refused.code, Some(1), "{refused}");
    let text = refused.to_string();
    for id in ["TableCD117FA1", "NamedBucket31614D6D"] {
        assert!(text.contains(id), "{id} is named: {text}");
    }
    assert!(text.contains("--allow-stateful-replacement"), "{text}");
    assert!(
        !text.contains("MaybeFifoE8F17D0D"),
        "a queue is not refused: {text}"
    );
    let allowed = v2
        .run(&cli, "diff", &["--allow-stateful-replacement", "--fail"])
        .await;
    assert!(
        !allowed.to_string().contains("deletes the data"),
        "{allowed}"
    );

    // The deploy's counts agree with the plan; `deleted` counts the replaced
    // predecessors too (their UpdateReplacePolicy is Delete).
    let deployed = v2
        .run(&cli, "deploy", &["--json", "--allow-stateful-replacement"])
        .await
        .success()
        .unwrap_or_else(|e| panic!("v2: {e}"));
    let report = deployed.json().unwrap_or_else(|e| panic!("v2: {e}"));
    let r = &report["stacks"][0];
    let count = |action: &str| planned.get(action).map_or(0, BTreeSet::len) as u64;
    assert_eq!(r["created"], count("create"), "{report:#}");
    assert_eq!(r["updated"], count("update"), "{report:#}");
    assert_eq!(r["replaced"], count("replace"), "{report:#}");
    assert_eq!(
        r["deleted"],
        count("delete") + count("replace"),
        "{report:#}"
    );
    assert_eq!(r["retained"], 0, "{report:#}");
    assert_eq!(r["failures"], serde_json::json!([]), "{report:#}");
    assert_eq!(r["skipped"], serde_json::json!([]), "{report:#}");

    let after: BTreeMap<String, Resource> = settled(&cli, &aws, &v2)
        .await
        .unwrap_or_else(|e| panic!("v2: {e}"))
        .into_iter()
        .map(|r| (r.logical_id.clone(), r))
        .collect();

    // AWS: each replaced predecessor is gone and its successor exists (`settled` has
    // checked that every resource of v2 exists); the removed topic is gone; the updated
    // resources kept their physical ids.
    let mut wrong = Vec::new();
    let mut gone = Vec::new();
    for id in &expected["replace"] {
        let (old, new) = (&before[*id], &after[*id]);
        assert_ne!(old.physical_id, new.physical_id, "{id} was not replaced");
        gone.push(old);
    }
    for id in &expected["update"] {
        assert_eq!(before[*id].physical_id, after[*id].physical_id, "{id}");
    }
    assert!(!after.contains_key("RemovedInV21409BCC2"));
    assert!(after.contains_key("AddedInV29500A960"));
    gone.push(&before["RemovedInV21409BCC2"]);
    for r in gone {
        match aws.exists_recorded(r).await {
            Ok(false) => {}
            Ok(true) => wrong.push(format!("{r} still exists after v2")),
            Err(e) => wrong.push(format!("asking AWS for {r}: {e}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    let resources: Vec<Resource> = after.into_values().collect();
    destroy(&cli, &aws, &v2, &resources)
        .await
        .unwrap_or_else(|e| panic!("destroy: {e}"));
}
