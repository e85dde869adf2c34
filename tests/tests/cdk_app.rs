//! A real CDK app (tests/fixtures/cdk-app: JavaScript on aws-cdk-lib from npm, installed
//! by `.ci/install-cdk-lib`) run by stackflow itself in the app's folder, as a CDK user
//! works: `list` and `synth` run the app from its `cdk.json` (with `-c` context); `deploy`
//! with no PATH synthesizes it and deploys both stacks, the consumer after the producer
//! whose export it imports; each resource is read back through the AWS APIs; a second
//! deploy changes nothing; `destroy` removes both. A second app (`bin/envs.js`) pins its
//! stacks to two regions and two accounts, and each lands in its own. And stacks pinned
//! to environments by a hand-written manifest:
//! deployed in their region; in another account through the role the manifest names,
//! refused there without one.

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
    app_folder_of(dir, "bin/app.js");
}

/// The fixture folder in `dir`, its app being `app` (a file of the fixture's `bin/`,
/// copied as `bin/app.js`, which `cdk.json` runs).
fn app_folder_of(dir: &Path, app: &str) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/cdk-app");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::copy(fixture.join("cdk.json"), dir.join("cdk.json")).unwrap();
    std::fs::copy(fixture.join(app), dir.join("bin/app.js")).unwrap();
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
/// region, absent from the command's), recorded under that region, planned there by
/// `diff` (no changes after the deploy), and destroyed there.
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

    // diff plans each stack where it went: nothing to change in either region.
    let diff = cli.run(&[
        "diff", "cdk.out", "--stack", &here, "--stack", &away, "--fail",
    ]);
    assert_eq!(diff.code, Some(0), "{}", diff.describe());

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

/// Issue 27: a stack CDK pins to another account is deployed there through the role its
/// manifest names (`assumeRoleArn`, with `${AWS::Partition}` as CDK writes it), never in
/// the caller's: its queue is found with the other account's credentials and not with the
/// caller's, `AWS::AccountId` is the other account; `destroy` and `drift` without the
/// role are refused (its records name the account), and `destroy --role-arn` removes it
/// there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_pinned_to_another_account_is_deployed_there_through_its_role() {
    let emu = Emulator::shared().await;
    let tag = unique_name("acct").to_lowercase().replace('_', "-");
    let dir = std::env::temp_dir().join(&tag);
    let out = dir.join("cdk.out");
    std::fs::create_dir_all(&out).unwrap();
    let (caller, other) = (stackflow_tests::emulator::ACCOUNT_ID, "222222222222");
    let there = emu.other_account(other, &tag).await;
    let role = format!("{tag}-deploy");
    stackflow_tests::iam::role_trusting(&there, &role, caller).await;
    let manifest = serde_json::json!({"version": "36.0.0", "artifacts": {"Other": {
        "type": "aws:cloudformation:stack",
        "environment": format!("aws://{other}/us-east-1"),
        "properties": {"templateFile": "other.template.json", "stackName": format!("{tag}-other"),
            "assumeRoleArn": format!("arn:${{AWS::Partition}}:iam::{other}:role/{role}")}}}});
    std::fs::write(out.join("manifest.json"), manifest.to_string()).unwrap();
    let template = serde_json::json!({"Resources": {"Queue": {"Type": "AWS::SQS::Queue",
        "Properties": {"QueueName": format!("{tag}-queue")}}},
        "Outputs": {"Account": {"Value": {"Ref": "AWS::AccountId"}}}});
    std::fs::write(out.join("other.template.json"), template.to_string()).unwrap();
    let cli = Cli::local(&dir, emu.endpoint().to_string());
    let exists = |config: &aws_types::SdkConfig| {
        let (client, name) = (aws_sdk_sqs::Client::new(config), format!("{tag}-queue"));
        async move { client.get_queue_url().queue_name(name).send().await.is_ok() }
    };
    let here = emu.sdk_config().await;

    let deploy = cli.run(&["deploy", "cdk.out", "--outputs-file", "outputs.json"]);
    assert_eq!(deploy.code, Some(0), "{}", deploy.describe());
    assert!(
        deploy
            .stderr
            .contains(&format!("account {other} in us-east-1")),
        "{}",
        deploy.describe()
    );
    assert!(exists(&there).await, "the queue is in the other account");
    assert!(!exists(&here).await, "and not in the caller's");
    let outputs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json")).unwrap()).unwrap();
    assert_eq!(outputs[format!("{tag}-other")]["Account"], other);
    // diff plans the stack in its account, through its role: nothing to change.
    let diff = cli.run(&["diff", "cdk.out", "--fail"]);
    assert_eq!(diff.code, Some(0), "{}", diff.describe());

    // Without the role, a command on the stack would act in the caller's account (where a
    // delete finds nothing, and the record would forget a queue that exists): refused.
    let arn = format!("arn:aws:iam::{other}:role/{role}");
    let stack = format!("{tag}-other");
    for args in [
        vec!["destroy", "--stack", &stack, "--force"],
        vec!["drift", "--stack", &stack],
    ] {
        let refused = cli.run(&args);
        assert_eq!(refused.code, Some(1), "{}", refused.describe());
        assert!(
            refused.stderr.contains(&format!(
                "was deployed in account {other} (its records say arn:aws:cloudformation:us-east-1:{other}:stack/"
            )) && refused.stderr.contains("--role-arn"),
            "{}",
            refused.describe()
        );
    }
    assert!(exists(&there).await, "nothing was done without the role");
    let destroy = cli.run(&["--role-arn", &arn, "destroy", "--stack", &stack]);
    assert_eq!(destroy.code, Some(0), "{}", destroy.describe());
    assert!(!exists(&there).await, "destroyed where it was made");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 27: a real CDK app (`fixtures/cdk-app/bin/envs.js`, aws-cdk-lib's default
/// synthesizer) whose stacks are pinned to two regions of the caller's account and to
/// another account, deployed by `stackflow deploy` run in its folder: each queue is found
/// in its own region and account (and not elsewhere), each stack's `AWS::AccountId` and
/// `AWS::Region` are its own; the other account is reached through the deploy role CDK
/// names (`cdk-hnb659fds-deploy-role-<account>-<region>`, made there by the test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdk_app_in_two_regions_and_two_accounts_is_deployed_from_its_folder() {
    let emu = Emulator::shared().await;
    let prefix = unique_name("envs").to_lowercase().replace('_', "-");
    let dir = std::env::temp_dir().join(&prefix);
    app_folder_of(&dir, "bin/envs.js");
    let (home, other) = (stackflow_tests::emulator::ACCOUNT_ID, "222222222222");
    let there = emu.other_account(other, &prefix).await;
    let role = format!("cdk-hnb659fds-deploy-role-{other}-us-east-1");
    stackflow_tests::iam::role_trusting(&there, &role, home).await;
    let cli = Cli::local(&dir, emu.endpoint().to_string());
    let context = [
        format!("prefix={prefix}"),
        format!("home={home}"),
        format!("other={other}"),
    ];
    let mut args = vec!["deploy", "--outputs-file", "outputs.json"];
    for c in &context {
        args.extend(["-c", c.as_str()]);
    }
    let deploy = cli.run(&args);
    assert_eq!(deploy.code, Some(0), "{}", deploy.describe());

    let here = emu.sdk_config().await;
    let in_region = |config: &aws_types::SdkConfig, region: &str| {
        aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(config)
                .region(aws_sdk_sqs::config::Region::new(region.to_string()))
                .build(),
        )
    };
    let exists = |client: aws_sdk_sqs::Client, id: &str| {
        let name = format!("{prefix}-{id}");
        async move { client.get_queue_url().queue_name(name).send().await.is_ok() }
    };
    let places = [
        ("home", &here, "us-east-1", home),
        ("away", &here, "eu-west-1", home),
        ("other", &there, "us-east-1", other),
    ];
    let outputs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json")).unwrap()).unwrap();
    for (id, config, region, account) in places {
        assert!(
            exists(in_region(config, region), id).await,
            "{id}: its queue is in {account} {region}"
        );
        assert_eq!(
            outputs[format!("{prefix}-{id}")]["Where"],
            format!("{account}/{region}"),
            "{id}: AWS::AccountId and AWS::Region are its own"
        );
    }
    assert!(!exists(in_region(&here, "us-east-1"), "away").await);
    assert!(!exists(in_region(&here, "us-east-1"), "other").await);
    assert!(!exists(in_region(&there, "eu-west-1"), "away").await);

    let arn = format!("arn:aws:iam::{other}:role/{role}");
    let (h, a, o) = (
        format!("{prefix}-home"),
        format!("{prefix}-away"),
        format!("{prefix}-other"),
    );
    for args in [
        vec!["destroy", "--stack", &h],
        vec!["--region", "eu-west-1", "destroy", "--stack", &a],
        vec!["--role-arn", &arn, "destroy", "--stack", &o],
    ] {
        let destroy = cli.run(&args);
        assert_eq!(destroy.code, Some(0), "{}", destroy.describe());
    }
    for (id, config, region, _) in places {
        assert!(!exists(in_region(config, region), id).await, "{id} is gone");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 27 (`lookupRole`): a CDK app whose values come from context lookups
/// (`fixtures/cdk-app/bin/lookups.js`: `StringParameter.valueFromLookup` and a pinned
/// stack's `availabilityZones`, in the caller's account and in another). `deploy` in its
/// folder looks each value up where the app names it, the other account's through CDK's
/// lookup role there, saves them in `cdk.context.json` and runs the app again: each
/// stack's outputs hold its own account's parameter and real zone names, never CDK's
/// placeholders. The next synthesis reads the saved values and looks nothing up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_lookups_are_made_in_each_stacks_account_through_its_lookup_role() {
    let emu = Emulator::shared().await;
    let prefix = unique_name("lkup").to_lowercase().replace('_', "-");
    let dir = std::env::temp_dir().join(&prefix);
    app_folder_of(&dir, "bin/lookups.js");
    let (home, other) = (stackflow_tests::emulator::ACCOUNT_ID, "222222222222");
    let there = emu.other_account(other, &prefix).await;
    stackflow_tests::iam::role_trusting(
        &there,
        &format!("cdk-hnb659fds-deploy-role-{other}-us-east-1"),
        home,
    )
    .await;
    let lookup_role = format!("cdk-hnb659fds-lookup-role-{other}-us-east-1");
    let here = emu.sdk_config().await;
    let parameter = format!("/{prefix}/setting");
    for (config, value) in [(&here, "here"), (&there, "there")] {
        aws_sdk_ssm::Client::new(config)
            .put_parameter()
            .name(&parameter)
            .value(format!("{value}-{prefix}"))
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .expect("PutParameter");
    }
    let cli = Cli::local(&dir, emu.endpoint().to_string());
    let context = [
        format!("prefix={prefix}"),
        format!("home={home}"),
        format!("other={other}"),
    ];
    let with_context = |command: &[&'static str]| {
        let mut args: Vec<String> = command.iter().map(|a| a.to_string()).collect();
        for c in &context {
            args.extend(["-c".to_string(), c.clone()]);
        }
        args
    };
    let args = with_context(&["deploy", "--outputs-file", "outputs.json"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // Before the other account has its lookup role, STS refuses it: said in words, and
    // nothing is deployed (lookups come before any stack).
    let refused = cli.run(&args);
    assert_eq!(refused.code, Some(1), "{}", refused.describe());
    let denied = format!(
        "looking up context `ssm:account={other}:parameterName=/{prefix}/setting:region=us-east-1`: \
         SSM parameter /{prefix}/setting: dispatch failure: an error occurred while loading \
         credentials: AccessDenied: User: arn:aws:iam::{home}:root is not authorized to \
         perform: sts:AssumeRole on resource: arn:aws:iam::{other}:role/{lookup_role}"
    );
    assert!(
        refused.stderr.contains(&denied) && !refused.stderr.contains("DispatchFailure"),
        "{}",
        refused.describe()
    );
    let queue = aws_sdk_sqs::Client::new(&here)
        .get_queue_url()
        .queue_name(format!("{prefix}-home"))
        .send()
        .await;
    assert!(queue.is_err(), "nothing was deployed");

    stackflow_tests::iam::role_trusting(&there, &lookup_role, home).await;
    let deploy = cli.run(&args);
    assert_eq!(deploy.code, Some(0), "{}", deploy.describe());
    assert!(
        deploy.stderr.contains("looking up 4 context value(s)"),
        "{}",
        deploy.describe()
    );

    let outputs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json")).unwrap()).unwrap();
    for (id, value) in [("home", "here"), ("other", "there")] {
        let stack = &outputs[format!("{prefix}-{id}")];
        assert_eq!(
            stack["Setting"],
            format!("{value}-{prefix}"),
            "{id}: {stack}"
        );
        let zones = stack["Zones"].as_str().expect("zones");
        assert!(
            zones.starts_with("us-east-1") && !zones.contains("dummy"),
            "{id}: {zones}"
        );
    }
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("cdk.context.json")).expect("cdk.context.json"),
    )
    .unwrap();
    let key =
        |account: &str| format!("ssm:account={account}:parameterName={parameter}:region=us-east-1");
    assert_eq!(saved[key(home)], format!("here-{prefix}"));
    assert_eq!(saved[key(other)], format!("there-{prefix}"));
    assert!(saved[format!("availability-zones:account={other}:region=us-east-1")].is_array());

    // The saved values are read: nothing is looked up again.
    let args = with_context(&["synth"]);
    let synth = cli.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(synth.code, Some(0), "{}", synth.describe());
    assert!(!synth.stderr.contains("looking up"), "{}", synth.describe());

    let arn = format!("arn:aws:iam::{other}:role/cdk-hnb659fds-deploy-role-{other}-us-east-1");
    let (h, o) = (format!("{prefix}-home"), format!("{prefix}-other"));
    for args in [
        vec!["destroy", "--stack", &h],
        vec!["--role-arn", &arn, "destroy", "--stack", &o],
    ] {
        let destroy = cli.run(&args);
        assert_eq!(destroy.code, Some(0), "{}", destroy.describe());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
