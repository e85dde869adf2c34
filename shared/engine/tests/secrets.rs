//! Secrets through the engine's lifecycle: what reaches the (fake) cloud, and what is
//! written down (events, snapshots, the state, reports, progress) — never a secret, in
//! any form. The emulator suite proves the same against real AWS APIs.

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use stackflow_core::secrets::is_mask;
use stackflow_engine::{StackStatus, deploy_stack};
use stackflow_events::EventStore;
use support::{FakeLookups, NO_ECHO_TYPE, Op, Rig, deploy, deploy_ok, options, param};

/// Everything the engine wrote for `stack`: every event, the latest snapshot, the state,
/// and every progress line.
async fn written(rig: &Rig, stack: &str) -> Vec<String> {
    let mut out: Vec<String> = rig
        .events(stack)
        .await
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    if let Some((_, body)) = rig.store.latest_snapshot(&rig.stream(stack)).await.unwrap() {
        out.push(body.to_string());
    }
    out.push(serde_json::to_string(&rig.state(stack).await).unwrap());
    out.extend(rig.lines.all());
    out
}

/// The forms a secret takes in text: raw, JSON-escaped, base64.
fn forms(secret: &str) -> Vec<String> {
    stackflow_core::secrets::forms(secret)
}

fn assert_never_written(texts: &[String], secrets: &[&str]) {
    for text in texts {
        for secret in secrets {
            for form in forms(secret) {
                assert!(!text.contains(&form), "{form} written in: {text}");
            }
        }
    }
}

/// The properties the cloud was last sent for `id`.
fn sent(rig: &Rig, id: &str) -> serde_json::Map<String, Value> {
    rig.cloud
        .calls()
        .into_iter()
        .rev()
        .find(|c| c.logical_id == id && matches!(c.op, Op::Create | Op::Update))
        .map(|c| c.properties)
        .unwrap_or_else(|| panic!("{id} was never sent"))
}

#[tokio::test]
async fn no_secret_reaches_the_log_the_report_or_the_progress() {
    const FROM_SECRETS_MANAGER: &str = "dyn-plaintext-7Q2x";
    const NO_ECHO: &str = "noecho-plaintext-K9v";
    let reference = "{{resolve:secretsmanager:db:SecretString:password}}";
    let mut lookups = support::FakeLookups::default();
    lookups
        .dynamic
        .insert(reference.into(), FROM_SECRETS_MANAGER.into());
    let rig = Rig::with_lookups(lookups);
    let template = |with_d: bool| {
        let mut resources = json!({
            "A": param("/a", json!(reference)),
            "B": param("/b", json!({"Fn::Sub": "user:${Pw}"})),
            "C": param("/c", json!({"Fn::Join": ["-", [{"Ref": "Pw"}, "x"]]})),
        });
        if with_d {
            resources["D"] = param("/d", json!(format!("prefix-{reference}")));
        }
        json!({
            "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
            "Resources": resources,
            "Outputs": { "Out": { "Value": {"Ref": "Pw"} } }
        })
    };
    let v1 = support::input_with("app", template(false), &[("Pw", NO_ECHO)]);
    let first = deploy_ok(&rig, &v1).await;
    // The values did reach the (fake) cloud: the test looks for something real.
    let sent = serde_json::to_string(&rig.cloud.contents()).unwrap();
    assert!(sent.contains(FROM_SECRETS_MANAGER) && sent.contains(NO_ECHO));
    // A failing call whose error quotes what it was sent, then the rollback.
    rig.cloud.fail_echoing_once(Op::Create, "D");
    let v2 = support::input_with("app", template(true), &[("Pw", NO_ECHO)]);
    let failed = deploy(&rig, &v2).await;
    assert_eq!(failed.status, StackStatus::Failed);
    let quoted = failed.failures[0].error.message.clone();
    assert!(
        quoted.contains("prefix-"),
        "the error quotes the request: {quoted}"
    );

    let mut written: Vec<String> = rig
        .events("app")
        .await
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    let stream = rig.stream("app");
    if let Some((_, body)) = rig.store.latest_snapshot(&stream).await.unwrap() {
        written.push(body.to_string());
    }
    written.push(serde_json::to_string(&rig.state("app").await).unwrap());
    written.push(serde_json::to_string(&first).unwrap());
    written.push(serde_json::to_string(&failed).unwrap());
    written.extend(rig.lines.all());
    for text in &written {
        for secret in [FROM_SECRETS_MANAGER, NO_ECHO] {
            assert!(!text.contains(secret), "{secret} written in: {text}");
        }
    }
}

#[tokio::test]
async fn values_computed_from_a_noecho_parameter_are_masked_whole() {
    const PW: &str = "alpha-bravo-charlie-9x";
    let rig = Rig::new();
    let v1 = support::input_with(
        "app",
        json!({
            "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
            "Resources": {
                "A": param("/a", json!({"Fn::Base64": {"Ref": "Pw"}})),
                "B": param("/b", json!({"Fn::Select": [1, {"Fn::Split": ["-", {"Ref": "Pw"}]}]})),
                "C": param("/c", json!({"Fn::Sub": "postgres://app:${Pw}@db"})),
                "D": param("/d", json!({"Fn::GetAtt": ["B", "Value"]}))
            },
            "Outputs": { "Url": { "Value": {"Fn::GetAtt": ["C", "Value"]} } }
        }),
        &[("Pw", PW)],
    );
    let report = deploy_ok(&rig, &v1).await;
    // AWS got the real values.
    assert_eq!(sent(&rig, "B")["Value"], json!("bravo"));
    assert_eq!(sent(&rig, "D")["Value"], json!("bravo"));
    assert_eq!(
        sent(&rig, "C")["Value"],
        json!(format!("postgres://app:{PW}@db"))
    );
    // The record holds digests, whole, in properties, attributes and outputs.
    let state = rig.state("app").await;
    for id in ["A", "B", "C", "D"] {
        let r = &state.resources[id];
        let v = r.properties["Value"].as_str().unwrap();
        assert!(is_mask(v), "{id}.Value recorded as {v}");
        let a = r.attributes["Value"].as_str().unwrap();
        assert!(is_mask(a), "{id} attribute Value recorded as {a}");
    }
    assert!(is_mask(report.outputs["Url"].as_str().unwrap()));
    let mut texts = written(&rig, "app").await;
    texts.push(serde_json::to_string(&report).unwrap());
    assert_never_written(&texts, &[PW, "bravo", "postgres://app"]);
}

#[tokio::test]
async fn a_noecho_custom_resource_answer_feeds_getatt_and_is_recorded_masked() {
    const TOKEN: &str = "tok-from-handler-5521";
    let reference = "{{resolve:secretsmanager:handler-token}}";
    let mut lookups = FakeLookups::default();
    lookups.dynamic.insert(reference.into(), TOKEN.into());
    let rig = Rig::with_lookups(lookups);
    let v1 = support::input(
        "app",
        json!({
            "Resources": {
                "Handler": { "Type": NO_ECHO_TYPE, "Properties": { "Token": reference } },
                "User": param("/user", json!({"Fn::GetAtt": ["Handler", "Token"]}))
            }
        }),
    );
    deploy_ok(&rig, &v1).await;
    // The dependent was sent the handler's answer...
    assert_eq!(sent(&rig, "User")["Value"], json!(TOKEN));
    // ...and nothing holds it.
    let state = rig.state("app").await;
    assert!(is_mask(
        state.resources["Handler"].attributes["Token"]
            .as_str()
            .unwrap()
    ));
    assert_eq!(
        state.resources["Handler"].properties["Token"],
        json!(reference)
    );

    // A later deploy changes the dependent: the handler's answer is not recorded, so it
    // is asked again (an Update with its properties unchanged) and sent on.
    rig.cloud.clear_calls();
    let mut v2 = v1.clone();
    v2.template
        .resources
        .get_mut("User")
        .unwrap()
        .properties
        .insert("Description".into(), json!("changed"));
    deploy_ok(&rig, &v2).await;
    let handler_updates = rig
        .cloud
        .calls()
        .iter()
        .filter(|c| c.logical_id == "Handler" && c.op == Op::Update)
        .count();
    assert_eq!(handler_updates, 1);
    assert_eq!(sent(&rig, "User")["Value"], json!(TOKEN));
    assert_never_written(&written(&rig, "app").await, &[TOKEN]);
}

#[tokio::test]
async fn a_rotated_noecho_value_or_secret_is_an_update_and_is_deployed() {
    let reference = "{{resolve:secretsmanager:db:SecretString:password}}";
    let lookups = |v: &str| {
        let mut l = FakeLookups::default();
        l.dynamic.insert(reference.into(), v.into());
        l
    };
    let rig = Rig::with_lookups(lookups("first-secret-A1"));
    let tpl = json!({
        "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
        "Resources": {
            "Direct": param("/direct", json!({"Ref": "Pw"})),
            "Dynamic": param("/dynamic", json!(reference)),
            "Plain": param("/plain", json!("nothing secret"))
        }
    });
    let v1 = support::input_with("app", tpl.clone(), &[("Pw", "first-pw-B2")]);
    deploy_ok(&rig, &v1).await;
    // The same values: nothing to do.
    let again = deploy(&rig, &v1).await;
    assert_eq!(again.status, StackStatus::NoChanges);

    // A new NoEcho value: the resource that reads it is updated, and only it.
    let v2 = support::input_with("app", tpl.clone(), &[("Pw", "second-pw-C3")]);
    rig.cloud.clear_calls();
    let plan = rig.engine.plan_only(&v2).await.unwrap();
    let direct = plan.resource("Direct").unwrap();
    assert_eq!(direct.action.as_str(), "update");
    assert_eq!(plan.resource("Dynamic").unwrap().action.as_str(), "no-op");
    let text = serde_json::to_string(&plan).unwrap();
    assert!(
        !text.contains("second-pw") && !text.contains("first-pw"),
        "{text}"
    );
    let r = deploy_ok(&rig, &v2).await;
    assert_eq!(r.updated, 1);
    assert_eq!(sent(&rig, "Direct")["Value"], json!("second-pw-C3"));

    // The secret behind the dynamic reference rotates: same text, new value.
    let rotated = support::build_engine(
        rig.store.clone(),
        rig.cloud.clone(),
        Arc::new(lookups("rotated-secret-D4")),
        rig.lines.clone(),
        rig.holders_gone.clone(),
    );
    let plan = rotated.plan_only(&v2).await.unwrap();
    let dynamic = plan.resource("Dynamic").unwrap();
    assert_eq!(dynamic.action.as_str(), "update", "{plan:#?}");
    assert!(
        dynamic.reason.to_string().contains("secret"),
        "{}",
        dynamic.reason
    );
    let r = deploy_stack(rotated.clone(), v2.clone(), options())
        .await
        .unwrap();
    assert_eq!((r.status, r.updated), (StackStatus::Succeeded, 1));
    assert_eq!(sent(&rig, "Dynamic")["Value"], json!("rotated-secret-D4"));
    let r = deploy_stack(rotated, v2.clone(), options()).await.unwrap();
    assert_eq!(
        r.status,
        StackStatus::NoChanges,
        "settled after the rotation"
    );
    assert_never_written(
        &written(&rig, "app").await,
        &[
            "first-secret-A1",
            "first-pw-B2",
            "second-pw-C3",
            "rotated-secret-D4",
        ],
    );
}

#[tokio::test]
async fn a_masked_export_is_refused_to_the_stack_that_imports_it() {
    let rig = Rig::new();
    let producer = support::input_with(
        "producer",
        json!({
            "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
            "Resources": { "P": param("/p", json!("x")) },
            "Outputs": { "Pw": { "Value": {"Ref": "Pw"}, "Export": { "Name": "shared-pw" } } }
        }),
        &[("Pw", "exported-secret-E5")],
    );
    deploy_ok(&rig, &producer).await;
    let consumer = support::input(
        "consumer",
        json!({ "Resources": { "C": param("/c", json!({"Fn::ImportValue": "shared-pw"})) } }),
    );
    let e = deploy_stack(rig.engine.clone(), consumer, options())
        .await
        .expect_err("a masked export cannot be imported");
    let message = e.to_string();
    assert!(
        message.contains("shared-pw") && message.contains("dynamic"),
        "{message}"
    );
    assert!(rig.cloud.physical_ids("consumer", "C").is_empty());
}

#[tokio::test]
async fn a_rollback_never_sends_a_mask() {
    let rig = Rig::new();
    let tpl = |with_b: bool| {
        let mut resources = json!({ "A": param("/a", json!({"Ref": "Pw"})) });
        if with_b {
            resources["B"] = param("/b", json!("x"));
        }
        json!({
            "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
            "Resources": resources
        })
    };
    deploy_ok(
        &rig,
        &support::input_with("app", tpl(false), &[("Pw", "old-pw-F6")]),
    )
    .await;
    rig.cloud.fail_always(Op::Create, "B");
    let v2 = support::input_with("app", tpl(true), &[("Pw", "new-pw-G7")]);
    let failed = deploy(&rig, &v2).await;
    assert_eq!(failed.status, StackStatus::Failed);
    for call in rig.cloud.calls() {
        let text = serde_json::to_string(&call.properties).unwrap();
        assert!(!text.contains("****"), "a mask was sent: {text}");
    }
    // The restore of A is refused, and says why.
    let rollback = format!("{:?}", failed.rollback);
    assert!(rollback.contains("recorded masked"), "{rollback}");
}

#[tokio::test]
async fn a_secret_passed_to_a_nested_stack_is_a_secret_in_the_child() {
    const PW: &str = "nested-pw-H8";
    let rig = Rig::new();
    let mut parent = support::input_with(
        "shop",
        json!({
            "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
            "Resources": {
                "Net": {
                    "Type": "AWS::CloudFormation::Stack",
                    "Properties": {
                        "TemplateURL": "https://example.com/net.json",
                        "Parameters": { "Conn": { "Fn::Sub": "db:${Pw}" }, "Plain": "x" }
                    }
                }
            }
        }),
        &[("Pw", PW)],
    );
    parent.nested.insert(
        "Net".into(),
        support::nested(
            "net.json",
            json!({
                // The child does not declare it NoEcho: it is a secret all the same.
                "Parameters": { "Conn": { "Type": "String" }, "Plain": { "Type": "String" } },
                "Resources": {
                    "Setting": param("/conn", json!({"Ref": "Conn"})),
                    "Other": param("/plain", json!({"Ref": "Plain"}))
                },
                "Outputs": { "Conn": { "Value": {"Ref": "Conn"} } }
            }),
        ),
    );
    deploy_ok(&rig, &parent).await;
    assert_eq!(sent(&rig, "Setting")["Value"], json!(format!("db:{PW}")));
    let child = rig.state("shop-Net").await;
    assert!(is_mask(
        child.resources["Setting"].properties["Value"]
            .as_str()
            .unwrap()
    ));
    assert_eq!(child.resources["Other"].properties["Value"], json!("x"));
    let mut texts = written(&rig, "shop").await;
    texts.extend(written(&rig, "shop-Net").await);
    assert_never_written(&texts, &[PW]);
}

/// A deploy that fails at its end, because an output cannot be resolved, records the
/// failure with the `NoEcho` value the error quotes masked: not in the events, the state,
/// the report or the log lines.
#[tokio::test]
async fn an_output_that_fails_with_a_secret_in_its_error_records_it_masked() {
    const NO_ECHO: &str = "noecho-output-plaintext-R4t";
    let rig = Rig::new();
    // The index is known only after C exists, so the plan passes; at the end it is the
    // secret followed by C's name, which Fn::Select quotes when it refuses it.
    let index = json!({"Fn::Join": ["", [{"Ref": "Pw"}, {"Fn::GetAtt": ["C", "Name"]}]]});
    let v1 = support::input_with(
        "app",
        json!({
            "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
            "Resources": { "C": param("/c", json!("plain")) },
            "Outputs": { "Picked": { "Value": {"Fn::Select": [index, ["a"]]} } }
        }),
        &[("Pw", NO_ECHO)],
    );
    let report = deploy(&rig, &v1).await;
    assert_eq!(report.status, StackStatus::Failed, "{report:#?}");
    let message = &report.failures[0].error.message;
    assert!(
        message.contains("whole number"),
        "the error quotes the index: {message}"
    );
    let mut written: Vec<String> = rig
        .events("app")
        .await
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    written.push(serde_json::to_string(&rig.state("app").await).unwrap());
    written.push(serde_json::to_string(&report).unwrap());
    written.extend(rig.lines.all());
    for text in &written {
        assert!(!text.contains(NO_ECHO), "{NO_ECHO} written in: {text}");
    }
}

/// Issue 23 item 6: a store with no digest key (a DynamoDB store without a bucket) cannot
/// see a rotated secret; the deploy and the diff say so instead of "nothing changed"
/// alone.
#[tokio::test]
async fn without_a_digest_key_a_rotation_is_said_to_be_unchecked() {
    let rig = Rig::new();
    let mut engine = support::build_engine(
        rig.store.clone(),
        rig.cloud.clone(),
        Arc::new(FakeLookups::default()),
        rig.lines.clone(),
        rig.holders_gone.clone(),
    );
    Arc::get_mut(&mut engine).expect("unshared").digest_key = None;
    let tpl = json!({
        "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
        "Resources": { "Direct": param("/direct", json!({"Ref": "Pw"})) }
    });
    let notes = || -> Vec<String> {
        rig.lines
            .all()
            .into_iter()
            .filter(|l| l.contains("secret rotation is not checked"))
            .collect()
    };
    let v1 = support::input_with("app", tpl.clone(), &[("Pw", "first-pw-E5")]);
    deploy_stack(engine.clone(), v1, options()).await.unwrap();
    assert_eq!(notes().len(), 1, "{:#?}", rig.lines.all());
    let v2 = support::input_with("app", tpl.clone(), &[("Pw", "second-pw-F6")]);
    let r = deploy_stack(engine.clone(), v2, options()).await.unwrap();
    assert_eq!(r.status, StackStatus::NoChanges);
    assert_eq!(notes().len(), 2, "the rotation that is not seen is said");
    assert!(notes()[1].contains("--store-bucket"), "{:?}", notes());
    // A stack with no secret hears nothing of it.
    let plain = json!({ "Resources": { "Plain": param("/plain", json!("x")) } });
    deploy_stack(engine, support::input("other", plain), options())
        .await
        .unwrap();
    assert_eq!(notes().len(), 2);
}

/// Issue 23 item 6: a value taken apart from a secret (`Fn::Select` of an `Fn::Split` of a
/// NoEcho parameter, or of a NoEcho custom resource's answer) deploys, and the deploys
/// and plans after it still work: they used to compute on the recorded mask, where
/// `Fn::Select` found one element and failed with "index 1 is out of range".
#[tokio::test]
async fn a_value_taken_apart_from_a_secret_deploys_again() {
    let reference = "{{resolve:secretsmanager:handler-token}}";
    let mut lookups = FakeLookups::default();
    lookups
        .dynamic
        .insert(reference.into(), "tok-handler5521-x".into());
    let rig = Rig::with_lookups(lookups);
    let second = |v: Value| json!({"Fn::Select": [1, {"Fn::Split": ["-", v]}]});
    let tpl = json!({
        "Parameters": { "Pw": { "Type": "String", "NoEcho": true } },
        "Resources": {
            "FromParam": param("/from-param", second(json!({"Ref": "Pw"}))),
            "Handler": { "Type": NO_ECHO_TYPE, "Properties": { "Token": reference } },
            "FromAnswer": param("/from-answer",
                second(json!({"Fn::GetAtt": ["Handler", "Token"]}))),
            "Tail": param("/tail", json!({"Fn::Join": ["/", [
                second(json!({"Ref": "Pw"})), {"Ref": "FromParam"}
            ]]}))
        }
    });
    let v1 = support::input_with("app", tpl.clone(), &[("Pw", "alpha-beta7-gamma")]);
    deploy_ok(&rig, &v1).await;
    assert_eq!(sent(&rig, "FromParam")["Value"], json!("beta7"));
    assert_eq!(sent(&rig, "FromAnswer")["Value"], json!("handler5521"));

    let plan = rig
        .engine
        .plan_only(&v1)
        .await
        .expect("a plan after the deploy");
    for id in ["FromParam", "Tail"] {
        assert_eq!(plan.resource(id).unwrap().action.as_str(), "no-op", "{id}");
    }
    deploy(&rig, &v1).await;
    assert_eq!(sent(&rig, "FromAnswer")["Value"], json!("handler5521"));

    // A new value is seen and deployed.
    let v2 = support::input_with("app", tpl, &[("Pw", "alpha-delta8-gamma")]);
    let r = deploy_ok(&rig, &v2).await;
    assert!(r.updated >= 1, "{r:?}");
    assert_eq!(sent(&rig, "FromParam")["Value"], json!("delta8"));
    assert_never_written(
        &written(&rig, "app").await,
        &[
            "alpha-beta7-gamma",
            "alpha-delta8-gamma",
            "beta7",
            "delta8",
            "tok-handler5521-x",
            "handler5521",
        ],
    );
}

/// A create interrupted after its intent is replayed by the next deploy, and the replay
/// fails with an error that quotes the secret it was sent: the progress line that says
/// how the replay ended has it masked, as the recorded failure has.
#[tokio::test]
async fn a_replayed_create_that_fails_quoting_its_secret_is_reported_masked() {
    const FROM_SECRETS_MANAGER: &str = "replay-plaintext-M3w";
    let reference = "{{resolve:secretsmanager:db:SecretString:password}}";
    let v1 = support::input(
        "app",
        json!({ "Resources": { "D": param("/d", json!(format!("prefix-{reference}"))) } }),
    );
    // The first n appends of the deploy go through: the smallest n that leaves D's
    // create announced and its outcome unrecorded.
    for n in 0..12 {
        let mut lookups = FakeLookups::default();
        lookups
            .dynamic
            .insert(reference.into(), FROM_SECRETS_MANAGER.into());
        let rig = Rig::with_lookups(lookups);
        rig.holders_gone
            .store(true, std::sync::atomic::Ordering::SeqCst);
        rig.store.fail_after(n);
        let crashed = deploy_stack(rig.engine.clone(), v1.clone(), options()).await;
        rig.store.heal();
        if crashed.is_ok()
            || !rig
                .state("app")
                .await
                .pending
                .values()
                .any(|p| p.logical_id == "D")
        {
            continue;
        }
        rig.cloud.fail_echoing_once(Op::Create, "D");
        let report = deploy(&rig, &v1).await;
        assert_eq!(report.status, StackStatus::Succeeded, "{report:#?}");
        let lines = rig.lines.all();
        let replay = lines
            .iter()
            .find(|l| l.contains("the interrupted create failed"))
            .unwrap_or_else(|| panic!("the replay's failure is reported: {lines:#?}"));
        assert!(
            replay.contains("prefix-"),
            "the error quotes the request: {replay}"
        );
        assert_never_written(&written(&rig, "app").await, &[FROM_SECRETS_MANAGER]);
        return;
    }
    panic!("no crash left D's create announced and unrecorded");
}
