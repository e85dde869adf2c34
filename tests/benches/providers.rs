//! Per provider: the time from the call to a completed create, update and delete against
//! the local emulator (loopback only), and the number of AWS requests each makes; the
//! drift baseline read after a create (`read_current_state`, which the engine runs off the
//! critical path) is timed and counted apart.
//!
//! `cargo bench -p stackflow-tests --bench providers`
//!
//! Every client carries an interceptor that counts the HTTP requests it sends (retries
//! included). Each case runs [`RUNS`] times; the table shows the median time and the
//! requests of one run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_ssm::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_ssm::config::{ConfigBag, Intercept, RuntimeComponents};
use serde_json::{Value, json};
use stackflow_providers::cloudcontrol::CloudControlProvider;
use stackflow_providers::sdk::dynamodb::DynamoDbTableProvider;
use stackflow_providers::sdk::iam::IamRoleProvider;
use stackflow_providers::sdk::lambda::LambdaFunctionProvider;
use stackflow_providers::sdk::logs::LogGroupProvider;
use stackflow_providers::sdk::s3::S3BucketProvider;
use stackflow_providers::sdk::sns::SnsTopicProvider;
use stackflow_providers::sdk::{SqsQueueProvider, SsmParameterProvider};
use stackflow_providers::{Properties, Provider, ResourceRequest};
use stackflow_tests::emulator::{ACCOUNT_ID, REGION};
use stackflow_tests::{Emulator, unique_name};

const RUNS: usize = 5;

/// Counts the requests a client sends.
#[derive(Debug, Clone, Default)]
struct Count(Arc<AtomicU64>);

impl Intercept for Count {
    fn name(&self) -> &'static str {
        "CountRequests"
    }
    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_ssm::error::BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Count {
    fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }
}

struct Case {
    label: &'static str,
    provider: Box<dyn Provider>,
    resource_type: &'static str,
    create: Box<dyn Fn(&str) -> Value>,
    update: Box<dyn Fn(&str) -> Value>,
}

fn props(v: Value) -> Properties {
    v.as_object().cloned().expect("an object")
}

#[derive(Default)]
struct Row {
    create: Vec<Duration>,
    update: Vec<Duration>,
    delete: Vec<Duration>,
    read: Vec<Duration>,
    calls: [u64; 4],
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let emulator = Emulator::shared().await;
    let sdk = emulator.sdk_config().await;
    let count = Count::default();
    let ssm = aws_sdk_ssm::Client::from_conf(
        aws_sdk_ssm::config::Builder::from(&sdk)
            .interceptor(count.clone())
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&sdk)
            .interceptor(count.clone())
            .build(),
    );
    let sns = aws_sdk_sns::Client::from_conf(
        aws_sdk_sns::config::Builder::from(&sdk)
            .interceptor(count.clone())
            .build(),
    );
    let logs = aws_sdk_cloudwatchlogs::Client::from_conf(
        aws_sdk_cloudwatchlogs::config::Builder::from(&sdk)
            .interceptor(count.clone())
            .build(),
    );
    let ddb = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .interceptor(count.clone())
            .build(),
    );
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .interceptor(count.clone())
            .build(),
    );
    let iam = aws_sdk_iam::Client::from_conf(
        aws_sdk_iam::config::Builder::from(&sdk)
            .interceptor(count.clone())
            .build(),
    );
    let lambda = aws_sdk_lambda::Client::from_conf(
        aws_sdk_lambda::config::Builder::from(&sdk)
            .interceptor(count.clone())
            .build(),
    );
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    let cc = aws_sdk_cloudcontrol::Client::from_conf(
        aws_sdk_cloudcontrol::config::Builder::from(&sdk)
            .interceptor(count.clone())
            .build(),
    );
    let cases = vec![
        Case {
            label: "SDK AWS::SSM::Parameter",
            provider: Box::new(SsmParameterProvider::new(ssm)),
            resource_type: "AWS::SSM::Parameter",
            create: Box::new(
                |n| json!({"Name": format!("/{n}"), "Type": "String", "Value": "one"}),
            ),
            update: Box::new(
                |n| json!({"Name": format!("/{n}"), "Type": "String", "Value": "two"}),
            ),
        },
        Case {
            label: "SDK AWS::SQS::Queue",
            provider: Box::new(SqsQueueProvider::new(sqs)),
            resource_type: "AWS::SQS::Queue",
            create: Box::new(|n| json!({"QueueName": n, "VisibilityTimeout": 30})),
            update: Box::new(|n| json!({"QueueName": n, "VisibilityTimeout": 60})),
        },
        Case {
            label: "SDK AWS::SNS::Topic",
            provider: Box::new(SnsTopicProvider::new(sns)),
            resource_type: "AWS::SNS::Topic",
            create: Box::new(|n| json!({"TopicName": n, "DisplayName": "one"})),
            update: Box::new(|n| json!({"TopicName": n, "DisplayName": "two"})),
        },
        Case {
            label: "SDK AWS::Logs::LogGroup",
            provider: Box::new(LogGroupProvider::new(logs)),
            resource_type: "AWS::Logs::LogGroup",
            create: Box::new(|n| json!({"LogGroupName": n, "RetentionInDays": 7})),
            update: Box::new(|n| json!({"LogGroupName": n, "RetentionInDays": 14})),
        },
        Case {
            label: "SDK AWS::DynamoDB::Table",
            provider: Box::new(DynamoDbTableProvider::new(ddb)),
            resource_type: "AWS::DynamoDB::Table",
            create: Box::new(|n| {
                json!({
                    "TableName": n, "BillingMode": "PAY_PER_REQUEST",
                    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}]
                })
            }),
            update: Box::new(|n| {
                json!({
                    "TableName": n, "BillingMode": "PAY_PER_REQUEST",
                    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                    "Tags": [{"Key": "env", "Value": "bench"}]
                })
            }),
        },
        Case {
            label: "SDK AWS::S3::Bucket",
            provider: Box::new(S3BucketProvider::new(s3)),
            resource_type: "AWS::S3::Bucket",
            create: Box::new(|n| json!({"BucketName": n})),
            update: Box::new(
                |n| json!({"BucketName": n, "VersioningConfiguration": {"Status": "Enabled"}}),
            ),
        },
        Case {
            label: "SDK AWS::IAM::Role",
            provider: Box::new(IamRoleProvider::new(iam)),
            resource_type: "AWS::IAM::Role",
            create: Box::new({
                let trust = trust.clone();
                move |n| json!({"RoleName": n, "AssumeRolePolicyDocument": trust})
            }),
            update: Box::new({
                let trust = trust.clone();
                move |n| json!({"RoleName": n, "AssumeRolePolicyDocument": trust, "Description": "updated"})
            }),
        },
        Case {
            label: "SDK AWS::Lambda::Function",
            provider: Box::new(LambdaFunctionProvider::new(lambda)),
            resource_type: "AWS::Lambda::Function",
            create: Box::new(|n| {
                json!({"FunctionName": n, "Runtime": "nodejs20.x", "Handler": "index.handler",
                "Role": "arn:aws:iam::123456789012:role/bench", "Code": {"ZipFile": "exports.handler = async () => 1;"}})
            }),
            update: Box::new(|n| {
                json!({"FunctionName": n, "Runtime": "nodejs20.x", "Handler": "index.handler",
                "Role": "arn:aws:iam::123456789012:role/bench", "Timeout": 10,
                "Code": {"ZipFile": "exports.handler = async () => 2;"}})
            }),
        },
        Case {
            label: "Cloud Control AWS::SSM::Parameter",
            provider: Box::new(CloudControlProvider::new(cc.clone())),
            resource_type: "AWS::SSM::Parameter",
            create: Box::new(
                |n| json!({"Name": format!("/{n}"), "Type": "String", "Value": "one"}),
            ),
            update: Box::new(
                |n| json!({"Name": format!("/{n}"), "Type": "String", "Value": "two"}),
            ),
        },
        Case {
            label: "Cloud Control AWS::SQS::Queue",
            provider: Box::new(CloudControlProvider::new(cc)),
            resource_type: "AWS::SQS::Queue",
            create: Box::new(|n| json!({"QueueName": n, "VisibilityTimeout": 30})),
            update: Box::new(|n| json!({"QueueName": n, "VisibilityTimeout": 60})),
        },
    ];
    println!(
        "providers against fakecloud {} ({} runs each; times are medians, calls are one run's requests)",
        emulator.version().unwrap_or("?"),
        RUNS
    );
    println!(
        "{:<36} {:>10} {:>10} {:>10} {:>8}   {:>6} {:>6} {:>6} {:>6}",
        "provider",
        "create ms",
        "update ms",
        "delete ms",
        "read ms",
        "c-req",
        "u-req",
        "d-req",
        "r-req"
    );
    for case in &cases {
        let mut row = Row::default();
        for run in 0..RUNS {
            let name = unique_name("bench");
            let mut req = ResourceRequest::new(
                "bench",
                "Res",
                case.resource_type,
                props((case.create)(&name)),
            );
            req.token = unique_name("token");
            // As the engine sends it: the stack's id, which names the account.
            req.stack_id = Some(format!(
                "arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/bench/{}",
                unique_name("id")
            ));
            count.take();
            let t = Instant::now();
            let created = case.provider.create(&req).await.expect("create");
            row.create.push(t.elapsed());
            let c = count.take();

            req.physical_id = Some(created.physical_id.clone());
            let t = Instant::now();
            case.provider
                .read_current_state(&req)
                .await
                .expect("baseline read");
            row.read.push(t.elapsed());
            let r = count.take();

            req.previous_properties = Some(req.properties.clone());
            req.properties = props((case.update)(&name));
            req.token = unique_name("token");
            let t = Instant::now();
            case.provider.update(&req).await.expect("update");
            row.update.push(t.elapsed());
            let u = count.take();

            req.token = unique_name("token");
            let t = Instant::now();
            case.provider.delete(&req).await.expect("delete");
            row.delete.push(t.elapsed());
            let d = count.take();
            if run == 0 {
                row.calls = [c, u, d, r];
            }
        }
        println!(
            "{:<36} {:>10.1} {:>10.1} {:>10.1} {:>8.1}   {:>6} {:>6} {:>6} {:>6}",
            case.label,
            median(&mut row.create),
            median(&mut row.update),
            median(&mut row.delete),
            median(&mut row.read),
            row.calls[0],
            row.calls[1],
            row.calls[2],
            row.calls[3]
        );
    }
}
