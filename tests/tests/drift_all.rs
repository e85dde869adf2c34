//! Drift at platform scale and `state orphan`, through the CLI against the emulator
//! (issue 24): `drift --all` checks every stack in the store, `--dry-run` says what
//! `--revert` would do and changes nothing, `--concurrency` is taken; `state orphan`
//! takes a resource out of the records, and the destroy after it leaves it in AWS.

use serde_json::Value;
use stackflow_tests::drift_cli::{Drift, Session, root};
use stackflow_tests::{Emulator, unique_name};

fn template(delay: u32) -> String {
    format!(
        "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      DelaySeconds: {delay}\n"
    )
}

/// The report of stack `stack` in a `drift --all --json` answer.
fn of(all: &Value, stack: &str) -> Drift {
    let stacks = all["stacks"].as_array().expect("stacks");
    let found = stacks.iter().find(|s| s["stack"] == stack);
    Drift(
        found
            .unwrap_or_else(|| panic!("no {stack}: {all:#}"))
            .clone(),
    )
}

async fn delay_of(sqs: &aws_sdk_sqs::Client, url: &str) -> String {
    let name = aws_sdk_sqs::types::QueueAttributeName::DelaySeconds;
    let got = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(name.clone());
    let got = got.send().await.expect("GetQueueAttributes");
    got.attributes()
        .and_then(|a| a.get(&name))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn drift_all_dry_run_then_revert_and_orphan_then_destroy() {
    let emu = Emulator::shared().await;
    let sqs = aws_sdk_sqs::Client::new(&emu.sdk_config().await);
    let s = Session::new(emu, &root(env!("CARGO_TARGET_TMPDIR"), "drift_all"), "all");
    let (a, b) = (unique_name("drifta"), unique_name("driftb"));
    for stack in [&a, &b] {
        let path = s.template("v1", stack, &template(2));
        s.run(&["deploy", &path], 0);
    }
    let url = |stack: &str| {
        let state = s.state(stack);
        state["resources"]["Queue"]["physicalId"]
            .as_str()
            .expect("the queue's URL")
            .to_string()
    };
    let (url_a, url_b) = (url(&a), url(&b));
    let delay = aws_sdk_sqs::types::QueueAttributeName::DelaySeconds;
    let set = sqs.set_queue_attributes().queue_url(&url_b);
    set.attributes(delay, "9")
        .send()
        .await
        .expect("SetQueueAttributes");

    // Every stack, as a dry run: B would be reverted, nothing changes.
    let args = [
        "drift",
        "--all",
        "--revert",
        "--dry-run",
        "--concurrency",
        "2",
    ];
    let dry = s.json(&args, 1);
    assert_eq!(of(&dry, &a).status("Queue"), "in-sync", "{dry:#}");
    assert_eq!(of(&dry, &b).status("Queue"), "would-revert", "{dry:#}");
    assert_eq!(of(&dry, &b).0["dryRun"], true);
    assert_eq!(delay_of(&sqs, &url_b).await, "9", "the dry run changed AWS");
    assert!(
        !s.events_text(&b).contains("DriftChecked"),
        "nothing recorded"
    );

    // The revert does it.
    let done = s.json(&["drift", "--all", "--revert"], 0);
    assert_eq!(of(&done, &b).status("Queue"), "reverted", "{done:#}");
    assert_eq!(delay_of(&sqs, &url_b).await, "2");

    // Orphaned, then destroyed: the queue stays in AWS.
    let orphan = s.json(&["state", "orphan", "--stack", &a, "Queue"], 0);
    assert_eq!(
        orphan["orphaned"][0]["physicalId"],
        url_a.as_str(),
        "{orphan:#}"
    );
    assert!(s.state(&a)["resources"].as_object().unwrap().is_empty());
    s.run(&["destroy", "--stack", &a], 0);
    assert_eq!(
        delay_of(&sqs, &url_a).await,
        "2",
        "the orphan is still there"
    );
    // Only the stacks with records are checked now.
    let left = s.json(&["drift", "--all"], 0);
    assert_eq!(left["stacks"].as_array().map(Vec::len), Some(1), "{left:#}");
}
