//! The rig of `triggers.rs`: the engine in its Lambda form on the emulator (one function
//! per state machine task and per trigger, all the real bootstrap run by the container
//! stand-in; the three state machines), an SQS queue that receives every event the
//! engine publishes (a rule on the default bus for source `stackflow`), and a stand-in
//! for CodePipeline's job API (both from `stackflow_tests::triggers`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_lambda::types::Runtime;
use serde_json::Value;
use stackflow_engine::definitions::{self, Target};
use stackflow_engine::env::{BUCKET, CFN_FALLBACK, TABLE};
use stackflow_engine::sfn::triggers::TRIGGER_NAMES;
use stackflow_engine::tasks::TASK_NAMES;
use stackflow_events::dynamo::DynamoStore;
use stackflow_tests::deploy::dynamo_store;
use stackflow_tests::lambda::{FunctionSpec, create_function, engine_bootstrap_zip};
pub use stackflow_tests::triggers::{ACCOUNT, JobCall, JobCalls, raw_call};
use stackflow_tests::triggers::{Observer, codepipeline_standin};
use stackflow_tests::{Emulator, unique_name};

pub struct Rig {
    pub config: aws_types::SdkConfig,
    pub sfn: aws_sdk_sfn::Client,
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub events: aws_sdk_eventbridge::Client,
    pub lambda: aws_sdk_lambda::Client,
    pub bucket: String,
    pub store: Arc<DynamoStore>,
    pub functions: BTreeMap<String, String>,
    pub deploy_machine: String,
    /// The queue every `stackflow` event lands in.
    pub observed: String,
    /// The dead-letter queue of the rule targets.
    pub dead_letters: String,
    /// What the CodePipeline stand-in received.
    pub job_calls: JobCalls,
}

pub async fn rig() -> Rig {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let (table, bucket, store) = dynamo_store(emu).await;
    let zip = tokio::task::spawn_blocking(engine_bootstrap_zip)
        .await
        .unwrap();
    let lambda = aws_sdk_lambda::Client::new(&config);
    let prefix = unique_name("trg");
    let deploy_machine = format!("arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:{prefix}-deploy");
    let (job_endpoint, job_calls) = codepipeline_standin().await;
    let mut functions = BTreeMap::new();
    for task in TASK_NAMES.iter().chain(TRIGGER_NAMES) {
        let name = format!("{prefix}-{task}");
        let mut env = vec![
            (TABLE.into(), table.clone()),
            (BUCKET.into(), bucket.clone()),
            (CFN_FALLBACK.into(), "false".into()),
            ("STACKFLOW_DEPLOY_MACHINE".into(), deploy_machine.clone()),
        ];
        if *task == "PipelineJob" {
            // The function runs as a local process: the stand-in on loopback is its
            // CodePipeline (the SDK's service-specific endpoint variable).
            env.push(("AWS_ENDPOINT_URL_CODEPIPELINE".into(), job_endpoint.clone()));
        }
        let spec = FunctionSpec {
            architecture: None,
            name: &name,
            runtime: Runtime::Providedal2023,
            handler: task,
            zip: zip.to_vec(),
            timeout: 900,
            env,
        };
        functions.insert(task.to_string(), create_function(&lambda, spec).await);
    }
    let sfn = aws_sdk_sfn::Client::new(&config);
    for (name, def) in definitions::ALL {
        let text = definitions::render(def, &Target::Lambda(functions.clone())).unwrap();
        let arn = sfn
            .create_state_machine()
            .name(format!("{prefix}-{name}"))
            .definition(text)
            .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/stackflow-engine"))
            .send()
            .await
            .unwrap()
            .state_machine_arn;
        if *name == "deploy" {
            assert_eq!(arn, deploy_machine, "the functions were told this ARN");
        }
    }
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queue = |name: String| {
        let sqs = sqs.clone();
        async move {
            sqs.create_queue()
                .queue_name(name)
                .send()
                .await
                .unwrap()
                .queue_url
                .unwrap()
        }
    };
    let observed = queue(format!("{prefix}-observed")).await;
    let dead_letters = queue(format!("{prefix}-dlq")).await;
    let rig = Rig {
        events: aws_sdk_eventbridge::Client::new(&config),
        sfn,
        s3: emu.s3().await,
        sqs,
        lambda,
        bucket,
        store,
        functions,
        deploy_machine,
        observed,
        dead_letters,
        job_calls,
        config,
    };
    rig.observe(&prefix).await;
    rig
}

impl Rig {
    pub async fn queue_arn(&self, url: &str) -> String {
        stackflow_tests::triggers::queue_arn(&self.sqs, url).await
    }

    /// A rule on the default bus: every event with source `stackflow` but the deploy
    /// requests goes to the observed queue.
    async fn observe(&self, prefix: &str) {
        Observer::on(
            &self.config,
            self.sqs.clone(),
            self.observed.clone(),
            prefix,
        )
        .await;
    }

    /// The events of `stack` received so far on the observed queue, with what was
    /// received before (`seen`, kept across calls), until `done` holds of them or
    /// `wait` passes.
    pub async fn observed_until(
        &self,
        seen: &mut Vec<Value>,
        stack: &str,
        wait: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let (sqs, queue) = (&self.sqs, &self.observed);
        stackflow_tests::triggers::observed_until(sqs, queue, seen, stack, wait, done).await
    }

    /// Executions of the deploy machine, by name: their status.
    pub async fn executions(&self) -> BTreeMap<String, String> {
        stackflow_tests::triggers::executions(&self.sfn, &self.deploy_machine).await
    }

    /// Waits until the deploy execution `name` ends; its status.
    pub async fn ended(&self, name: &str, wait: Duration) -> String {
        stackflow_tests::triggers::ended(&self.sfn, &self.deploy_machine, name, wait).await
    }

    /// Invokes the function of `task` synchronously with `payload`: its answer and the
    /// end of its log.
    pub async fn invoke(&self, task: &str, payload: &Value) -> (Value, String) {
        stackflow_tests::triggers::invoke(&self.lambda, &self.functions[task], payload).await
    }
}
