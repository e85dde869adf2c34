//! `engine deploy`'s checks of the bootstrap and of the engine's template.

use super::*;

#[test]
fn the_embedded_template_names_every_task_and_definition() {
    let value = parse_text(TEMPLATE, "infra/engine.yaml").unwrap();
    let template = Template::from_value(&value).unwrap();
    for task in stackflow_engine::tasks::TASK_NAMES {
        let function = template
            .resources
            .get(&format!("{task}Function"))
            .unwrap_or_else(|| panic!("{task}Function"));
        assert_eq!(function.ty, "AWS::Lambda::Function");
        assert_eq!(function.properties["Handler"], serde_json::json!(task));
    }
    for (name, text) in definitions::ALL {
        let mut logical = name.to_string();
        logical[..1].make_ascii_uppercase();
        let machine = &template.resources[&format!("{logical}StateMachine")];
        let substitutions = &machine.properties["DefinitionSubstitutions"];
        let named: std::collections::BTreeSet<String> =
            substitutions.as_object().unwrap().keys().cloned().collect();
        assert_eq!(named, definitions::placeholders(text), "{name}");
        assert!(
            template
                .parameters
                .contains_key(&format!("{logical}DefinitionKey"))
        );
    }
}

/// The first 20 bytes of an ELF header for `machine` (little-endian).
fn elf(machine: u16) -> Vec<u8> {
    let mut h = b"\x7fELF\x02\x01\x01".to_vec();
    h.resize(18, 0);
    h.extend_from_slice(&machine.to_le_bytes());
    h.extend_from_slice(b"rest of the executable");
    h
}

/// Lambda sends a failed asynchronous invocation to its on-failure destination with
/// the function's own role, and checks that permission when the config is made: each
/// such destination in the engine's template is one its function's role may send to.
#[test]
fn each_failure_destination_is_one_the_functions_role_may_send_to() {
    let t = engine_template();
    let mut checked = 0;
    for (id, r) in &t.resources {
        if r.ty != "AWS::Lambda::EventInvokeConfig" {
            continue;
        }
        let destination = &r.properties["DestinationConfig"]["OnFailure"]["Destination"];
        let function = r.properties["FunctionName"]["Ref"].as_str().unwrap();
        let role = t.resources[function].properties["Role"]["Fn::GetAtt"][0]
            .as_str()
            .unwrap();
        let allowed = t.resources[role].properties["Policies"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["PolicyDocument"]["Statement"].as_array().unwrap())
            .any(|s| {
                let action = &s["Action"];
                (action == "sqs:SendMessage"
                    || action
                        .as_array()
                        .is_some_and(|a| a.contains(&"sqs:SendMessage".into())))
                    && &s["Resource"] == destination
            });
        assert!(allowed, "{id}: {role} may not send to {destination}");
        checked += 1;
    }
    assert!(checked > 0, "the template has no failure destination");
}

fn engine_template() -> Template {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../infra/engine.yaml");
    stackflow_core::template::load_template_file(&path).unwrap()
}

/// Every value under a key named `key`, at any depth.
fn under<'a>(v: &'a serde_json::Value, key: &str, out: &mut Vec<&'a serde_json::Value>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                if k == key {
                    out.push(child);
                }
                under(child, key, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|c| under(c, key, out)),
        _ => {}
    }
}

/// With its default parameters, the engine's template grants no action on every
/// service, no AdministratorAccess, and no managed policy or scoped action at all:
/// what the provisioning role may do comes from what the operator names.
#[test]
fn the_default_install_grants_no_admin_and_no_wildcard_service() {
    assert!(!TEMPLATE.contains("AdministratorAccess"));
    let t = engine_template();
    let whole = serde_json::to_value(&t).unwrap();
    let mut actions = Vec::new();
    under(&whole, "Action", &mut actions);
    under(&whole, "NotAction", &mut actions);
    let mut checked = 0;
    for action in actions {
        let list = match action {
            serde_json::Value::Array(a) => a.clone(),
            other => vec![other.clone()],
        };
        for a in list {
            if let Some(text) = a.as_str() {
                let service = text.split(':').next().unwrap_or_default();
                assert!(text != "*" && !service.contains('*'), "{text}");
                checked += 1;
            } else {
                // A parameter's actions: none by default.
                let param = a["Ref"].as_str().unwrap_or_else(|| panic!("{a}"));
                assert_eq!(param, "ProvisioningActions");
                assert_eq!(t.parameters[param].default, Some("".into()), "{param}");
            }
        }
    }
    assert!(checked > 50, "{checked} actions checked");
    for param in [
        "ProvisioningPolicyArns",
        "AllowedTypes",
        "ProvisioningActions",
    ] {
        assert_eq!(t.parameters[param].default, Some("".into()), "{param}");
    }
    let role = &t.resources["ProvisioningRole"].properties;
    assert_eq!(
        role["ManagedPolicyArns"]["Fn::If"][0],
        serde_json::json!("HasPolicies")
    );
    assert_eq!(
        role["Policies"][0]["Fn::If"][0],
        serde_json::json!("HasActions")
    );
    // Plan is told the types, which it enforces.
    let plan = &t.resources["PlanFunction"].properties;
    assert_eq!(
        plan["Environment"]["Variables"]["STACKFLOW_ALLOWED_TYPES"]["Fn::Join"][1],
        serde_json::json!({ "Ref": "AllowedTypes" })
    );
}

/// No role the template makes may write the bootstrap, the definitions, the objects
/// that start a deploy or the install's record: each is under the guard's deny.
#[test]
fn every_role_is_denied_the_artifacts_and_the_deploy_objects() {
    let t = engine_template();
    let roles: std::collections::BTreeSet<&str> = t
        .resources
        .iter()
        .filter(|(_, r)| r.ty == "AWS::IAM::Role")
        .map(|(id, _)| id.as_str())
        .collect();
    let guard = &t.resources["ArtifactGuard"].properties;
    let mut refs = Vec::new();
    under(&guard["Roles"], "Ref", &mut refs);
    let guarded: std::collections::BTreeSet<&str> = refs
        .iter()
        .filter_map(|r| r.as_str())
        .filter(|r| *r != "AWS::NoValue")
        .collect();
    // The state machines' and the schedule's roles only invoke: they reach no bucket.
    let unguarded: Vec<&&str> = roles.difference(&guarded).collect();
    assert_eq!(unguarded, [&"DriftScheduleRole", &"StateMachineRole"]);
    for role in unguarded {
        let text = serde_json::to_string(&t.resources[*role].properties).unwrap();
        assert!(!text.contains("s3:"), "{role}: {text}");
    }
    let statement = &guard["PolicyDocument"]["Statement"][0];
    assert_eq!(statement["Effect"], "Deny");
    let resources = serde_json::to_string(&statement["Resource"]).unwrap();
    for prefix in ["assets/*", "deploy/*", "stackflow/engine/*"] {
        assert!(
            resources.contains(&format!("${{EngineBucket}}/{prefix}")),
            "{prefix}"
        );
    }
    assert!(
        serde_json::to_string(&statement["Action"])
            .unwrap()
            .contains("s3:PutObject")
    );
}

/// Deploy Requested events are taken from the engine's own bus only, which denies every
/// sender but the deployers.
#[test]
fn only_the_deployers_may_send_to_the_bus_that_starts_deploys() {
    let t = engine_template();
    let rule = &t.resources["StartOnRequestRule"].properties;
    assert_eq!(
        rule["EventBusName"],
        serde_json::json!({"Ref": "DeployBus"})
    );
    let bus = &t.resources["DeployBus"].properties;
    let statement = &bus["Policy"]["Statement"][0];
    assert_eq!(statement["Effect"], "Deny");
    assert_eq!(statement["Action"], "events:PutEvents");
    assert_eq!(
        statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"],
        serde_json::json!({"Ref": "Deployers"})
    );
    assert_eq!(t.parameters["Deployers"].default, None, "no default: named");
}

#[test]
fn a_bootstrap_for_another_architecture_is_refused_naming_both() {
    let dir = std::env::temp_dir().join(format!("sf-engine-arch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("bootstrap");
    std::fs::write(&exe, elf(62)).unwrap();
    let e = bootstrap_zip(Some(&exe), "arm64").unwrap_err().to_string();
    assert!(
        e.contains("the bootstrap is built for x86_64, not --arch arm64"),
        "{e}"
    );
    assert!(e.contains("--arm64"), "{e}");
    // Inside a zip too.
    let zip = bootstrap_zip(Some(&exe), "x86_64").unwrap();
    let zipped = dir.join("code.zip");
    std::fs::write(&zipped, &zip).unwrap();
    let e = bootstrap_zip(Some(&zipped), "arm64")
        .unwrap_err()
        .to_string();
    assert!(e.contains("built for x86_64, not --arch arm64"), "{e}");
    std::fs::write(&exe, b"#!/bin/sh\n").unwrap();
    let e = bootstrap_zip(Some(&exe), "arm64").unwrap_err().to_string();
    assert!(e.contains("not a Linux executable"), "{e}");
    assert_eq!(elf_arch(&elf(183)), Ok("arm64"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bootstrap_executable_is_zipped_and_a_zip_kept() {
    let dir = std::env::temp_dir().join(format!("sf-engine-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("bootstrap");
    std::fs::write(&exe, elf(183)).unwrap();
    let zip = bootstrap_zip(Some(&exe), "arm64").unwrap();
    assert!(zip.starts_with(b"PK\x03\x04"));
    assert_eq!(
        zip,
        bootstrap_zip(Some(&exe), "arm64").unwrap(),
        "deterministic"
    );
    let zipped = dir.join("code.zip");
    std::fs::write(&zipped, &zip).unwrap();
    assert_eq!(bootstrap_zip(Some(&zipped), "arm64").unwrap(), zip);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_status_says_what_the_engine_may_deploy_and_who_may_start_it() {
    let installed = Installed {
        name: "e".into(),
        stack: "e-engine".into(),
        bucket: "b".into(),
        table: "e-events".into(),
        bootstrap: "sha256:1".into(),
        bootstrap_key: "assets/1.zip".into(),
        template: "sha256:2".into(),
        architecture: "arm64".into(),
        stackflow_version: "0".into(),
        allowed_types: vec!["AWS::SNS::*".into(), "Custom::*".into()],
        allowed_actions: vec![],
        deployers: vec!["arn:aws:iam::123456789012:role/ci".into()],
    };
    let status = Status {
        installed: Some(installed),
        executions: vec![],
        locks: vec![],
    };
    let text = status_text("e", "eu-west-1", &status);
    assert!(
        text.contains("  may deploy AWS::SNS::*, Custom::*\n"),
        "{text}"
    );
    assert!(
        text.contains("  deployers  arn:aws:iam::123456789012:role/ci\n"),
        "{text}"
    );
    assert!(!text.contains("and do"), "{text}");
    let none = Status {
        installed: None,
        executions: vec![],
        locks: vec![],
    };
    assert!(status_text("e", "eu-west-1", &none).contains("--allow-type TYPE` installs it"));
}
