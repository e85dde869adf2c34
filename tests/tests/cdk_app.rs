//! A real CDK app (tests/fixtures/cdk-app: JavaScript on aws-cdk-lib from npm, installed
//! by `.ci/install-cdk-lib`) run by stackflow itself in the app's folder, as a CDK user
//! works: `list` and `synth` run the app from its `cdk.json` (with `-c` context); `deploy`
//! with no PATH synthesizes it and deploys both stacks, the consumer after the producer
//! whose export it imports; each resource is read back through the AWS APIs; a second
//! deploy changes nothing; `destroy` removes both. And stacks pinned to environments:
//! deployed in their region, refused for another account.

use std::path::{Path, PathBuf};

use stackflow_tests::cli::Cli;
use stackflow_tests::{Emulator, unique_name};

/// Where `.ci/install-cdk-lib` puts aws-cdk-lib.
fn cdk_lib() -> PathBuf {
    let tools = std::env::var_os("STACKFLOW_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/stackflow-tools")
        });
    let modules = tools.join("cdk-lib/node_modules");
    assert!(
        modules.join("aws-cdk-lib").is_dir(),
        "{} has no aws-cdk-lib: run `bash .ci/install-cdk-lib` (needs node and npm)",
        modules.display()
    );
    modules
}

/// The fixture app copied to `dir`, with the installed libraries beside it.
fn app_folder(dir: &Path) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/cdk-app");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    for file in ["cdk.json", "bin/app.js"] {
        std::fs::copy(fixture.join(file), dir.join(file)).unwrap();
    }
    std::os::unix::fs::symlink(cdk_lib(), dir.join("node_modules")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdk_app_is_synthesized_and_deployed_from_its_folder() {
    let emu = Emulator::shared().await;
    let prefix = unique_name("cdkapp").to_lowercase().replace('_', "-");
    let dir = std::env::temp_dir().join(&prefix);
    app_folder(&dir);
    let cli = Cli::local(&dir, emu.endpoint().to_string());
    let context = format!("prefix={prefix}");
    let (producer, consumer) = (format!("{prefix}-producer"), format!("{prefix}-consumer"));

    let list = cli.run(&["list", "-c", &context]);
    assert_eq!(list.code, Some(0), "{}", list.describe());
    let names: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(
        names,
        [producer.as_str(), consumer.as_str()],
        "{}",
        list.describe()
    );
    assert!(
        list.stderr.contains("synthesizing: node bin/app.js"),
        "{}",
        list.describe()
    );
    let synth = cli.run(&["synth", "-c", &context, "--json"]);
    assert_eq!(synth.code, Some(0), "{}", synth.describe());
    let synthesized: serde_json::Value = serde_json::from_str(&synth.stdout).unwrap();
    assert_eq!(
        synthesized["stacks"][1]["dependencies"][0],
        producer.as_str()
    );
    assert!(dir.join("cdk.out/manifest.json").is_file());

    let deploy = cli.run(&["deploy", "-c", &context]);
    assert_eq!(deploy.code, Some(0), "{}", deploy.describe());
    let config = emu.sdk_config().await;
    let sns = aws_sdk_sns::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);
    let topic_arn = format!(
        "arn:aws:sns:us-east-1:{}:{prefix}-events",
        stackflow_tests::emulator::ACCOUNT_ID
    );
    let topic = sns
        .get_topic_attributes()
        .topic_arn(&topic_arn)
        .send()
        .await
        .expect("the producer's topic exists");
    assert_eq!(
        topic.attributes().unwrap()["DisplayName"],
        "made by a CDK app"
    );
    let url = sqs
        .get_queue_url()
        .queue_name(format!("{prefix}-work"))
        .send()
        .await
        .expect("the consumer's queue exists");
    let queue = sqs
        .get_queue_attributes()
        .queue_url(url.queue_url().unwrap())
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout)
        .send()
        .await
        .unwrap();
    let attributes = queue.attributes().unwrap();
    assert_eq!(
        attributes[&aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout],
        "45"
    );
    let state = cli.run(&["state", "show", "--stack", &consumer, "--json"]);
    assert!(state.stdout.contains(&topic_arn), "{}", state.describe());

    let again = cli.run(&["deploy", "-c", &context, "--json"]);
    assert_eq!(again.code, Some(0), "{}", again.describe());
    let report: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    let stacks = report["stacks"].as_array().expect("a report per stack");
    assert_eq!(stacks.len(), 2, "{}", again.describe());
    for stack in stacks {
        assert_eq!(stack["status"], "no-changes", "{}", again.describe());
    }

    for stack in [&consumer, &producer] {
        let destroy = cli.run(&["destroy", "--stack", stack]);
        assert_eq!(destroy.code, Some(0), "{}", destroy.describe());
    }
    assert!(
        sns.get_topic_attributes()
            .topic_arn(&topic_arn)
            .send()
            .await
            .is_err(),
        "the topic is gone"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cloud assembly whose stacks CDK pinned to environments (manifest `environment`): a
/// stack pinned to another account is refused before anything is made, naming it and
/// what differs; a stack pinned to another region is deployed there (read back in that
/// region, absent from the command's), recorded under that region, and destroyed there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stacks_go_to_the_region_they_are_pinned_to_and_never_to_another_account() {
    let emu = Emulator::shared().await;
    let tag = unique_name("env").to_lowercase().replace('_', "-");
    let dir = std::env::temp_dir().join(&tag);
    let out = dir.join("cdk.out");
    std::fs::create_dir_all(&out).unwrap();
    let account = stackflow_tests::emulator::ACCOUNT_ID;
    let stack = |id: &str, env: &str| {
        serde_json::json!({"type": "aws:cloudformation:stack", "environment": env,
            "properties": {"templateFile": format!("{id}.template.json"), "stackName": format!("{tag}-{id}")}})
    };
    let manifest = serde_json::json!({"version": "36.0.0", "artifacts": {
        "Here": stack("here", &format!("aws://{account}/us-east-1")),
        "Away": stack("away", &format!("aws://{account}/eu-west-1")),
        "Foreign": stack("foreign", "aws://111111111111/us-east-1"),
    }});
    std::fs::write(out.join("manifest.json"), manifest.to_string()).unwrap();
    for id in ["here", "away", "foreign"] {
        let template = serde_json::json!({"Resources": {"Queue": {"Type": "AWS::SQS::Queue",
            "Properties": {"QueueName": format!("{tag}-{id}")}}},
            "Outputs": {"Region": {"Value": {"Ref": "AWS::Region"}}}});
        std::fs::write(
            out.join(format!("{id}.template.json")),
            template.to_string(),
        )
        .unwrap();
    }
    let cli = Cli::local(&dir, emu.endpoint().to_string());
    let config = emu.sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let sqs_away = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&config)
            .region(aws_sdk_sqs::config::Region::new("eu-west-1"))
            .build(),
    );
    let exists = |client: &aws_sdk_sqs::Client, id: &str| {
        let (client, name) = (client.clone(), format!("{tag}-{id}"));
        async move { client.get_queue_url().queue_name(name).send().await.is_ok() }
    };

    let refused = cli.run(&["deploy", "cdk.out"]);
    assert_eq!(refused.code, Some(1), "{}", refused.describe());
    assert!(
        refused.stderr.contains(&format!(
            "{tag}-foreign: aws://111111111111/us-east-1 (account 111111111111, not {account})"
        )),
        "{}",
        refused.describe()
    );
    assert!(!refused.stderr.contains(&format!("{tag}-away:")));
    for id in ["here", "away", "foreign"] {
        assert!(
            !exists(&sqs, id).await,
            "{id}: nothing is made before the refusal"
        );
        assert!(
            !exists(&sqs_away, id).await,
            "{id}: nothing is made before the refusal"
        );
    }
    let list = cli.run(&["list", "cdk.out", "--long"]);
    assert!(
        list.stdout
            .contains(&format!("environment: aws://{account}/eu-west-1")),
        "{}",
        list.describe()
    );

    let (here, away) = (format!("{tag}-here"), format!("{tag}-away"));
    let deploy = cli.run(&[
        "deploy",
        "cdk.out",
        "--stack",
        &here,
        "--stack",
        &away,
        "--outputs-file",
        "outputs.json",
    ]);
    assert_eq!(deploy.code, Some(0), "{}", deploy.describe());
    assert!(exists(&sqs, "here").await, "the stack pinned here is here");
    assert!(
        exists(&sqs_away, "away").await,
        "the stack pinned to eu-west-1 is there"
    );
    assert!(
        !exists(&sqs, "away").await,
        "and not in the command's region"
    );
    let outputs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json")).unwrap()).unwrap();
    assert_eq!(outputs[&here]["Region"], "us-east-1");
    assert_eq!(
        outputs[&away]["Region"], "eu-west-1",
        "AWS::Region is the stack's"
    );

    let shown = cli.run(&["--region", "eu-west-1", "state", "show", "--stack", &away]);
    assert_eq!(shown.code, Some(0), "{}", shown.describe());
    assert!(shown.stdout.contains("Queue"), "{}", shown.describe());
    let destroy = cli.run(&["--region", "eu-west-1", "destroy", "--stack", &away]);
    assert_eq!(destroy.code, Some(0), "{}", destroy.describe());
    assert!(
        !exists(&sqs_away, "away").await,
        "destroyed where it was made"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
