//! Every CDK case of the corpus (copied into `tests/fixtures/corpus`) parses and plans.

use std::path::PathBuf;

use indexmap::IndexMap;
use stackflow_core::ErrorKind;
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::plan::{
    Action, CurrentState, PlanInput, SyntheticEnvironment, plan, synthetic_state,
};
use stackflow_core::template::{StackTemplate, load_path};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/corpus")
}

fn pseudo(stack: &str) -> Pseudo {
    Pseudo {
        region: "us-east-1".into(),
        account_id: Some("000000000000".into()),
        stack_name: stack.into(),
        stack_id: None,
    }
}

/// The parameter values a user passes for the cases that declare one without a default.
fn given(s: &StackTemplate) -> IndexMap<String, String> {
    let mut p = s.parameters.clone();
    if s.template.parameters.contains_key("AdminPassword") {
        p.insert("AdminPassword".into(), "correct-horse-battery".into());
    }
    p
}

fn plan_stack(
    s: &StackTemplate,
    state: &CurrentState,
) -> stackflow_core::Result<stackflow_core::plan::Plan> {
    let params = bind_parameters(&s.template, &given(s))?;
    plan(&PlanInput {
        stack: &s.name,
        template: &s.template,
        parameters: &params,
        pseudo: &pseudo(&s.name),
        state,
        env: &SyntheticEnvironment,
        digest_key: None,
        secret_digests: None,
    })
}

#[test]
fn every_case_parses_and_plans() {
    let listing: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(corpus().join("corpus.json")).unwrap())
            .unwrap();
    let mut planned = 0;
    for case in listing.as_array().unwrap() {
        let name = case["case"].as_str().unwrap();
        let stacks = load_path(&corpus().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Every stack of the case, parents and nested children, in the manifest's order.
        let top: Vec<&str> = case["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !s["nested"].as_bool().unwrap_or(false))
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        let loaded: Vec<&str> = stacks.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(loaded, top, "{name}: stacks");
        for s in &stacks {
            let expected = case["stacks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == s.name.as_str())
                .unwrap();
            assert_eq!(
                s.template.resources.len() as u64,
                expected["resourceCount"].as_u64().unwrap(),
                "{name}/{}",
                s.name
            );
            let result = plan_stack(s, &CurrentState::default());
            if name == "language-extensions" {
                let e = result.unwrap_err();
                assert!(
                    matches!(
                        e.kind,
                        ErrorKind::UnsupportedTransform | ErrorKind::UnsupportedFunction
                    ),
                    "{e}"
                );
                assert!(e.to_string().contains("AWS::LanguageExtensions"), "{e}");
                continue;
            }
            let p = result.unwrap_or_else(|e| panic!("{name}/{}: {e}", s.name));
            assert!(p.resources.iter().all(|r| r.action == Action::Create));
            planned += 1;
            // Deployed as planned, the same template plans to nothing.
            let params = bind_parameters(&s.template, &given(s)).unwrap();
            let state = synthetic_state(&s.template, &params, &pseudo(&s.name)).unwrap();
            let again = plan_stack(s, &state).unwrap();
            assert!(again.is_empty(), "{name}/{}: second plan not empty", s.name);
        }
    }
    assert!(planned >= 28, "only {planned} stacks planned");
}

#[test]
fn nested_stacks_are_found_with_their_templates() {
    let stacks = load_path(&corpus().join("nested-stack")).unwrap();
    assert_eq!(stacks.len(), 1);
    let parent = &stacks[0];
    assert_eq!(parent.nested.len(), 1);
    let (id, child) = parent.nested.iter().next().unwrap();
    assert_eq!(
        id,
        "MessagingNestedStackMessagingNestedStackResource44F98313"
    );
    assert_eq!(child.nested.len(), 1, "the child has its own nested stack");
    assert!(
        child
            .template
            .parameters
            .contains_key("referencetoNestedParentStackTopic5291DC0ARef")
    );
}

#[test]
fn cross_stack_dependencies_order_the_stacks() {
    let stacks = load_path(&corpus().join("cross-stack-export-import")).unwrap();
    let names: Vec<&str> = stacks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["ExportProducerStack", "ImportConsumerStack"]);
    assert_eq!(stacks[1].dependencies, vec!["ExportProducerStack"]);
}

/// replacement-v2 planned against replacement-v1 as deployed gives exactly what the corpus
/// describes: replacements for the DynamoDB key, the bucket name and the FIFO queue;
/// in-place updates for the queue's timeouts and the SSM value (plus the two parameters
/// that hold the replaced table's name and bucket's ARN); the topic added and removed.
#[test]
fn replacement_v1_to_v2() {
    let v1 = load_path(&corpus().join("replacement-v1"))
        .unwrap()
        .remove(0);
    let v2 = load_path(&corpus().join("replacement-v2"))
        .unwrap()
        .remove(0);
    let params = bind_parameters(&v1.template, &IndexMap::new()).unwrap();
    let state = synthetic_state(&v1.template, &params, &pseudo(&v1.name)).unwrap();
    let p = plan_stack(&v2, &state).unwrap();
    let got: Vec<(&str, Action)> = p
        .resources
        .iter()
        .map(|r| (r.logical_id.as_str(), r.action))
        .collect();
    assert_eq!(
        got,
        vec![
            ("TableCD117FA1", Action::Replace),
            ("NamedBucket31614D6D", Action::Replace),
            ("Queue4A7E3555", Action::Update),
            ("MaybeFifoE8F17D0D", Action::Replace),
            ("TableNameParam3E3123DC", Action::Update),
            ("BucketArnParamE5B360E9", Action::Update),
            ("Static3DDAA197", Action::Update),
            ("AddedInV29500A960", Action::Create),
            ("RemovedInV21409BCC2", Action::Delete),
        ]
    );
    let changed = |id: &str| -> Vec<String> {
        p.resource(id)
            .unwrap()
            .changes
            .iter()
            .map(|c| c.path.clone())
            .collect()
    };
    assert_eq!(
        changed("Queue4A7E3555"),
        vec!["MessageRetentionPeriod", "VisibilityTimeout"]
    );
    assert_eq!(changed("Static3DDAA197"), vec!["Description", "Value"]);
    assert_eq!(changed("MaybeFifoE8F17D0D"), vec!["FifoQueue"]);
    assert_eq!(changed("NamedBucket31614D6D"), vec!["BucketName"]);
    assert_eq!(changed("TableNameParam3E3123DC"), vec!["Value"]);
}

/// Robustness: the hand-written templates of cfn-lint's test fixtures (read from the
/// reference material beside the checkout, never copied into the project) parse and plan
/// without a panic; errors are fine, and each names a path or the file.
#[test]
fn cfn_lint_templates_never_panic() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/cfn-lint-good");
    if !dir.is_dir() {
        eprintln!("skipped: {} is not here", dir.display());
        return;
    }
    let mut files = Vec::new();
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json" | "template")
            ) && !p.file_name().unwrap().to_string_lossy().starts_with('_')
            {
                files.push(p);
            }
        }
    }
    let (mut ok, mut failed) = (0, 0);
    for f in &files {
        let result = std::panic::catch_unwind(|| {
            let stacks = load_path(f)?;
            for s in &stacks {
                let mut given = IndexMap::new();
                for (k, p) in &s.template.parameters {
                    if p.default.is_none() {
                        given.insert(k.clone(), "x".to_string());
                    }
                }
                let params = bind_parameters(&s.template, &given)?;
                plan(&PlanInput {
                    stack: &s.name,
                    template: &s.template,
                    parameters: &params,
                    pseudo: &pseudo(&s.name),
                    state: &CurrentState::default(),
                    env: &SyntheticEnvironment,
                    digest_key: None,
                    secret_digests: None,
                })?;
            }
            Ok::<_, stackflow_core::TemplateError>(())
        });
        match result {
            Ok(Ok(())) => ok += 1,
            Ok(Err(e)) => {
                assert!(!e.message.is_empty());
                if std::env::var_os("SHOW_ERRORS").is_some() {
                    eprintln!("{}: {e}", f.display());
                }
                failed += 1;
            }
            Err(_) => panic!("panicked on {}", f.display()),
        }
    }
    eprintln!(
        "cfn-lint templates: {ok} planned, {failed} refused with an error, of {}",
        files.len()
    );
    assert!(ok > 0);
}
