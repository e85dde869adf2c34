//! The account's store (issue 27 item 2): after `stackflow bootstrap`, a command given no
//! `--store` keeps its records in the account's DynamoDB table of that region, so that a
//! deploy from another folder finds them and makes nothing again (counted with
//! `ListQueues`); before it, the local store of the folder, said once when it is made; a
//! folder whose local store exists keeps it, and says that the account has one too.

use stackflow_tests::cli::{Cli, Run};
use stackflow_tests::drift_cli::root;
use stackflow_tests::{Emulator, unique_name};

/// A region no other test of this binary uses: its account store is this test's own.
const REGION: &str = "eu-west-3";

/// A folder whose runs give no `--store`.
fn folder(emu: &Emulator, name: &str) -> Cli {
    let dir = root(env!("CARGO_TARGET_TMPDIR"), "account_store").join(unique_name(name));
    std::fs::create_dir_all(&dir).expect("folder");
    Cli {
        dir,
        endpoint: emu.endpoint().to_string(),
        store: String::new(),
        bucket: None,
        engine: None,
    }
}

fn run(cli: &Cli, args: &[&str], code: i32) -> Run {
    let mut all = args.to_vec();
    all.extend(["--region", REGION]);
    let run = cli.run(&all);
    assert_eq!(run.code, Some(code), "{}", run.describe());
    run
}

async fn queues(sqs: &aws_sdk_sqs::Client, prefix: &str) -> usize {
    sqs.list_queues()
        .queue_name_prefix(prefix)
        .send()
        .await
        .expect("ListQueues")
        .queue_urls()
        .len()
}

#[tokio::test]
async fn after_bootstrap_every_folder_finds_the_accounts_store() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let here = config
        .to_builder()
        .region(aws_types::region::Region::new(REGION))
        .build();
    let sqs = aws_sdk_sqs::Client::new(&here);
    let stack = unique_name("acct");
    // An unnamed queue: only the records tell a deploy that it exists.
    let body = "Resources:\n  Jobs:\n    Type: AWS::SQS::Queue\n";
    let template = |cli: &Cli| {
        let path = cli.dir.join(format!("{stack}.yaml"));
        std::fs::write(&path, body).expect("template");
        path.display().to_string()
    };

    // Before bootstrap: the folder's local store, said once, when it is made.
    let a = folder(emu, "a");
    let in_a = template(&a);
    let first = run(&a, &["deploy", &in_a], 0);
    assert!(
        first.stderr.contains("records are kept in the local store"),
        "{}",
        first.describe()
    );
    assert!(a.dir.join(".stackflow/events.db").exists());
    let again = run(&a, &["deploy", &in_a], 0);
    assert!(
        !again.stderr.contains("records are kept in the local store"),
        "{}",
        again.describe()
    );
    assert_eq!(queues(&sqs, &stack).await, 1);

    // Bootstrap makes the account's store.
    let boot = run(&a, &["bootstrap"], 0);
    assert!(
        boot.stdout
            .contains("the account's store dynamodb:stackflow-"),
        "{}",
        boot.describe()
    );
    let ddb = aws_sdk_dynamodb::Client::new(&here);
    let tables = ddb.list_tables().send().await.expect("ListTables");
    assert!(
        tables
            .table_names()
            .iter()
            .any(|t| t.starts_with("stackflow-") && t.ends_with(REGION)),
        "{tables:?}"
    );

    // Another folder deploys into the account's store; a third finds those records and
    // makes nothing again.
    let b = folder(emu, "b");
    let in_b = template(&b);
    let other = format!("{stack}-shared");
    let shared = in_b.replace(&format!("{stack}.yaml"), &format!("{other}.yaml"));
    std::fs::write(&shared, body).expect("template");
    run(&b, &["deploy", &shared], 0);
    assert!(
        !b.dir.join(".stackflow").exists(),
        "a local store was made in b"
    );
    assert_eq!(queues(&sqs, &other).await, 1);
    let c = folder(emu, "c");
    let in_c = c.dir.join(format!("{other}.yaml"));
    std::fs::write(&in_c, body).expect("template");
    let in_c = in_c.display().to_string();
    let diff = run(&c, &["diff", &in_c, "--fail"], 0);
    assert!(
        diff.stdout.contains("No changes: 0 to create"),
        "{}",
        diff.describe()
    );
    run(&c, &["deploy", &in_c], 0);
    assert_eq!(
        queues(&sqs, &other).await,
        1,
        "the deploy from c made the queue again"
    );
    let listed = run(&c, &["state", "list", "--json"], 0);
    assert!(listed.stdout.contains(&other), "{}", listed.describe());
    assert!(
        !c.dir.join(".stackflow").exists(),
        "a local store was made in c"
    );

    // The first folder keeps its local store, and says the account has one too.
    let shown = run(&a, &["state", "show", "--stack", &stack], 0);
    assert!(shown.stderr.contains("exists too"), "{}", shown.describe());

    run(&c, &["destroy", "--stack", &other], 0);
    run(&a, &["destroy", "--stack", &stack], 0);
    assert_eq!(queues(&sqs, &stack).await, 0);
}
