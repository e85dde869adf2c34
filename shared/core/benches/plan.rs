//! Parse + resolve + plan timings, for a generated 1,000-resource template and for every
//! case of the corpus. Run with `cargo bench -p stackflow-core --bench plan`; it prints
//! the median and the fastest of several runs of each step.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde_json::{Value, json};
use stackflow_core::graph::Graph;
use stackflow_core::intrinsics::{Pseudo, bind_parameters, evaluate_conditions};
use stackflow_core::plan::{CurrentState, PlanInput, SyntheticEnvironment, plan, synthetic_state};
use stackflow_core::template::{Template, load_path, parse_text};

/// A template of `n` resources shaped like real stacks: queues, topics, roles, policies
/// and parameters that refer to each other with Ref, GetAtt, Sub and Join, in chains of
/// up to ten and with fan-in.
fn generated(n: usize) -> String {
    let mut resources = serde_json::Map::new();
    for i in 0..n {
        let (ty, props) = match i % 5 {
            0 => (
                "AWS::SQS::Queue",
                json!({"VisibilityTimeout": 30 + i % 7, "Tags": [{"Key": "n", "Value": format!("{i}")}]}),
            ),
            1 => (
                "AWS::SNS::Topic",
                json!({"DisplayName": {"Fn::Sub": format!("${{AWS::StackName}}-topic-{i}")}}),
            ),
            2 => (
                "AWS::IAM::Role",
                json!({
                    "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
                    "Path": "/"
                }),
            ),
            3 => (
                "AWS::IAM::Policy",
                json!({
                    "PolicyName": format!("p{i}"),
                    "Roles": [{"Ref": format!("R{}", i - 1)}],
                    "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
                        "Effect": "Allow", "Action": "sqs:SendMessage",
                        "Resource": {"Fn::GetAtt": [format!("R{}", i - 3), "Arn"]}
                    }]}
                }),
            ),
            _ => (
                "AWS::SSM::Parameter",
                json!({
                    "Type": "String",
                    "Value": {"Fn::Join": [",", [
                        {"Ref": format!("R{}", i - 3)},
                        {"Fn::Sub": format!("${{R{}}}", i - 4)},
                        {"Fn::Select": [0, {"Fn::GetAZs": ""}]}
                    ]]}
                }),
            ),
        };
        let mut r = json!({"Type": ty, "Properties": props});
        if i >= 10 && i % 10 == 0 {
            r["DependsOn"] = json!(format!("R{}", i - 10));
        }
        resources.insert(format!("R{i}"), r);
    }
    serde_json::to_string_pretty(&json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {"Env": {"Type": "String", "Default": "dev"}},
        "Conditions": {"IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]}},
        "Resources": resources
    }))
    .expect("serializes")
}

fn pseudo() -> Pseudo {
    Pseudo {
        region: "us-east-1".into(),
        account_id: Some("123456789012".into()),
        stack_name: "bench".into(),
        stack_id: None,
    }
}

fn measure<T>(name: &str, runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "{name:<58} median {:>9.3} ms   min {:>9.3} ms   ({runs} runs)",
        median.as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3
    );
    median
}

fn main() {
    generated_template(1000);
    corpus();
}

/// Parse, conditions and graph, and plan timings for a generated template of `n` resources.
fn generated_template(n: usize) {
    let text = generated(n);
    println!(
        "generated template: {n} resources, {} KiB of JSON",
        text.len() / 1024
    );
    let no_params = IndexMap::new();

    let parse = measure("1,000 resources: parse (JSON -> model)", 30, || {
        Template::from_value(&parse_text(&text, "gen.json").expect("parses")).expect("model")
    });
    let template = Template::from_value(&parse_text(&text, "gen.json").unwrap()).unwrap();
    let params = bind_parameters(&template, &no_params).unwrap();
    let graph = measure("1,000 resources: conditions + graph", 30, || {
        let c = evaluate_conditions(&template, &params, &pseudo(), &SyntheticEnvironment).unwrap();
        Graph::build(&template, &c).unwrap()
    });
    let empty = CurrentState::default();
    let plan_empty = measure(
        "1,000 resources: resolve + plan against an empty stack",
        30,
        || {
            plan(&PlanInput {
                stack: "bench",
                template: &template,
                parameters: &params,
                pseudo: &pseudo(),
                state: &empty,
                env: &SyntheticEnvironment,
                digest_key: None,
                secret_digests: None,
            })
            .unwrap()
        },
    );
    let state = synthetic_state(&template, &params, &pseudo()).unwrap();
    let plan_deployed = measure(
        "1,000 resources: resolve + plan against itself deployed",
        30,
        || {
            plan(&PlanInput {
                stack: "bench",
                template: &template,
                parameters: &params,
                pseudo: &pseudo(),
                state: &state,
                env: &SyntheticEnvironment,
                digest_key: None,
                secret_digests: None,
            })
            .unwrap()
        },
    );
    println!(
        "1,000 resources: parse + resolve + plan (empty stack) = {:.3} ms; against deployed = {:.3} ms",
        (parse + graph + plan_empty).as_secs_f64() * 1e3,
        (parse + graph + plan_deployed).as_secs_f64() * 1e3
    );
}

/// The corpus: load (parse every stack of every case) and plan each stack.
fn corpus() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/corpus");
    let listing: Value =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("corpus.json")).unwrap())
            .unwrap();
    let cases: Vec<String> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["case"].as_str().unwrap().to_string())
        .filter(|c| c != "language-extensions")
        .collect();
    let mut resources = 0;
    let total = measure(
        &format!("corpus: load + plan all {} CDK cases", cases.len()),
        20,
        || {
            resources = 0;
            for case in &cases {
                for s in load_path(&corpus.join(case)).unwrap() {
                    let mut given = s.parameters.clone();
                    for (k, p) in &s.template.parameters {
                        if p.default.is_none() {
                            given.insert(k.clone(), "bench-value-1".into());
                        }
                    }
                    let params = bind_parameters(&s.template, &given).unwrap();
                    resources += s.template.resources.len();
                    black_box(
                        plan(&PlanInput {
                            stack: &s.name,
                            template: &s.template,
                            parameters: &params,
                            pseudo: &pseudo(),
                            state: &CurrentState::default(),
                            env: &SyntheticEnvironment,
                            digest_key: None,
                            secret_digests: None,
                        })
                        .unwrap(),
                    );
                }
            }
        },
    );
    println!(
        "corpus: {resources} resources, {:.1} µs per resource",
        total.as_secs_f64() * 1e6 / resources as f64
    );
}
