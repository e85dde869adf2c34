//! `stackflow deploy --stack-concurrency N` on a cloud assembly of three stacks: `Jobs`
//! (a queue) and `Alerts` (a topic) are independent, `Wiring` depends on both. With N = 2
//! the two independent stacks run at once: a gate proxy holds every create, and both
//! creates arrive while it is closed (one after the other, the second could not arrive
//! before the first was let through). `Wiring` starts only once both have ended: its
//! parameter holds their outputs. With N = 1 only one create arrives while the gate is
//! closed.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use stackflow_tests::cli::Cli;
use stackflow_tests::gate::GateProxy;
use stackflow_tests::{Emulator, unique_name};

const CREATES: &[&str] = &["CreateQueue", "CreateTopic"];

/// Writes a cloud assembly of the three stacks under `dir`, names made unique by `tag`.
fn assembly(dir: &Path, tag: &str) {
    let stack = |id: &str, deps: &[&str]| {
        json!({"type": "aws:cloudformation:stack", "environment": "aws://unknown-account/unknown-region",
               "properties": {"templateFile": format!("{id}.template.json")}, "dependencies": deps})
    };
    let manifest = json!({"version": "36.0.0", "artifacts": {
        "Jobs": stack("Jobs", &[]),
        "Alerts": stack("Alerts", &[]),
        "Wiring": stack("Wiring", &["Jobs", "Alerts"]),
    }});
    let templates = [
        (
            "Jobs",
            json!({"Resources": {"Queue": {"Type": "AWS::SQS::Queue",
            "Properties": {"QueueName": format!("{tag}-jobs")}}},
            "Outputs": {"Url": {"Value": {"Ref": "Queue"}, "Export": {"Name": format!("{tag}-jobs-url")}}}}),
        ),
        (
            "Alerts",
            json!({"Resources": {"Topic": {"Type": "AWS::SNS::Topic",
            "Properties": {"TopicName": format!("{tag}-alerts")}}},
            "Outputs": {"Arn": {"Value": {"Ref": "Topic"}, "Export": {"Name": format!("{tag}-alerts-arn")}}}}),
        ),
        (
            "Wiring",
            json!({"Resources": {"Both": {"Type": "AWS::SSM::Parameter",
            "Properties": {"Name": format!("/{tag}/wiring"), "Type": "String",
                "Value": {"Fn::Join": [" ", [{"Fn::ImportValue": format!("{tag}-jobs-url")},
                                             {"Fn::ImportValue": format!("{tag}-alerts-arn")}]]}}}}}),
        ),
    ];
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    for (id, body) in templates {
        std::fs::write(dir.join(format!("{id}.template.json")), body.to_string()).unwrap();
    }
}

/// Deploys the assembly with `--stack-concurrency n` through a closed gate: how many
/// creates arrived while it was closed (after the first, waiting up to `second` for
/// another).
async fn creates_held_at_once(n: &str, second: Duration) -> u64 {
    let emu = Emulator::shared().await;
    let tag = unique_name("sc").to_lowercase().replace('_', "-");
    let dir = std::env::temp_dir().join(&tag);
    let out = dir.join("cdk.out");
    assembly(&out, &tag);
    let gate = GateProxy::start(emu.endpoint(), CREATES).await.unwrap();
    let cli = Cli::local(&dir, gate.endpoint());
    let mut child = cli
        .command(&["deploy", out.to_str().unwrap(), "--stack-concurrency", n])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("deploy.log")).unwrap())
        .spawn()
        .expect("stackflow starts");
    assert!(
        gate.wait_arrival(Duration::from_secs(120)).await,
        "a first create"
    );
    let deadline = Instant::now() + second;
    while gate.arrived() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held = gate.arrived();
    gate.open();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    let log = std::fs::read_to_string(dir.join("deploy.log")).unwrap_or_default();
    assert!(status.success(), "{log}");
    // Wiring ran after both: its parameter holds both outputs.
    let ssm = aws_sdk_ssm::Client::new(&emu.sdk_config().await);
    let value = ssm
        .get_parameter()
        .name(format!("/{tag}/wiring"))
        .send()
        .await
        .unwrap()
        .parameter
        .and_then(|p| p.value)
        .unwrap_or_default();
    assert!(
        value.contains(&format!("{tag}-jobs")) && value.contains(&format!("{tag}-alerts")),
        "{value}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_stacks_deploy_at_once_and_their_dependent_after() {
    let held = creates_held_at_once("2", Duration::from_secs(120)).await;
    assert_eq!(
        held, 2,
        "the queue's and the topic's creates were both in flight"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stack_at_a_time_with_a_stack_concurrency_of_one() {
    // The first create is held: nothing else may arrive while it is (a second arrival
    // would be a second stack running). The wait only bounds how long this is watched.
    let held = creates_held_at_once("1", Duration::from_secs(3)).await;
    assert_eq!(held, 1);
}
