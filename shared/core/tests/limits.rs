//! The limits of `stackflow_core::limits`: each way a template could exhaust memory, time
//! or the stack stops with an error that names where, quickly and on a small stack.

use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde_json::{Value, json};
use stackflow_core::intrinsics::{
    EmptyEnvironment, Mode, Pseudo, Resolver, bind_parameters, evaluate_conditions,
};
use stackflow_core::limits::{MAX_DEPTH, MAX_STRING_BYTES, MAX_TEMPLATE_BYTES};
use stackflow_core::plan::{CurrentState, Plan, PlanInput, SyntheticEnvironment, plan};
use stackflow_core::template::{Template, load_path, parse_text};
use stackflow_core::{ErrorKind, Path, Result, TemplateError};

/// The stack the checks run on: half of what a Rust or tokio thread gets. Resolving at
/// the depth limit takes about half of it in a debug build (much less in release); a
/// chain of 20,000 conditions would take far more if it recursed.
const STACK: usize = 1024 * 1024;

/// Runs `f` on a thread with a [`STACK`] stack and fails when it takes more than ten
/// seconds.
fn small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let start = Instant::now();
    let out = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    out
}

fn pseudo() -> Pseudo {
    Pseudo {
        region: "us-east-1".into(),
        account_id: Some("123456789012".into()),
        stack_name: "limits".into(),
        stack_id: None,
    }
}

fn plan_text(text: &str) -> Result<Plan> {
    let template = Template::from_value(&parse_text(text, "t.yaml")?)?;
    plan_template(&template)
}

fn plan_template(template: &Template) -> Result<Plan> {
    let params = bind_parameters(template, &IndexMap::new())?;
    plan(&PlanInput {
        stack: "limits",
        template,
        parameters: &params,
        pseudo: &pseudo(),
        state: &CurrentState::default(),
        env: &SyntheticEnvironment,
        digest_key: None,
        secret_digests: None,
    })
}

fn limit(r: Result<impl std::fmt::Debug>) -> TemplateError {
    let e = r.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit, "{e}");
    e
}

/// A value nested `n` lists deep around `leaf`, built without recursion.
fn nested(n: usize, leaf: Value) -> Value {
    (0..n).fold(leaf, |v, _| Value::Array(vec![v]))
}

#[test]
fn json_nested_past_the_limit_stops_at_the_limit_with_its_path() {
    let e = small_stack(|| {
        let n = 100_000;
        let text = format!("{{\"Metadata\": {}1{}}}", "[".repeat(n), "]".repeat(n));
        limit(parse_text(&text, "t.json"))
    });
    assert!(e.message.contains(&format!("{MAX_DEPTH} levels")), "{e}");
    assert!(e.path.starts_with("Metadata[0][0]"), "{}", e.path);
    assert_eq!(e.path.matches('[').count(), MAX_DEPTH - 1);
    assert_eq!(e.file.as_deref(), Some("t.json"));
    // At the limit itself it parses.
    let text = format!(
        "{{\"Resources\": {{}}, \"Metadata\": {}1{}}}",
        "[".repeat(MAX_DEPTH - 1),
        "]".repeat(MAX_DEPTH - 1)
    );
    Template::from_value(&parse_text(&text, "t.json").unwrap()).unwrap();
}

#[test]
fn yaml_nested_past_the_limit_stops_in_every_form() {
    let n = 10_000;
    let flow = format!("Metadata: {}x{}\n", "[".repeat(n), "]".repeat(n));
    let block: String = (0..200)
        .map(|i| format!("{}- \n", "  ".repeat(i)))
        .collect();
    let tags = format!(
        "Resources: {{A: {{Type: T, Properties: {{P: {}x{}}}}}}}\n",
        "!Not [".repeat(n),
        "]".repeat(n)
    );
    for text in [flow, block, tags] {
        let e = small_stack(move || parse_text(&text, "t.yaml").unwrap_err());
        assert!(
            matches!(e.kind, ErrorKind::Limit | ErrorKind::Syntax),
            "{e}"
        );
    }
}

#[test]
fn yaml_aliases_cannot_blow_up() {
    // The classic: each level repeats the one before ten times.
    let mut text = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        let items = vec![format!("*{prev}"); 10].join(", ");
        text.push_str(&format!("{name}: &{name} [{items}]\n"));
    }
    let e = small_stack(move || parse_text(&text, "t.yaml").unwrap_err());
    assert!(
        matches!(e.kind, ErrorKind::Limit | ErrorKind::Syntax),
        "{e}"
    );
    // One large value repeated: few aliases, much memory.
    let big = "x".repeat(100_000);
    let aliases = vec!["*big"; 200].join(", ");
    let text = format!("big: &big {big}\nMetadata: [{aliases}]\nResources: {{}}\n");
    let e = small_stack(move || limit(parse_text(&text, "t.yaml")));
    assert!(e.message.contains("aliases"), "{e}");
    assert!(e.path.starts_with("Metadata["), "{}", e.path);
}

#[test]
fn a_template_past_the_size_limit_is_refused_before_parsing() {
    let text = format!("Resources: {{}}\n#{}", "x".repeat(MAX_TEMPLATE_BYTES));
    let e = limit(parse_text(&text, "big.yaml"));
    assert!(
        e.to_string().starts_with("big.yaml: the template is"),
        "{e}"
    );
    assert!(e.hint.is_some());
}

#[test]
fn a_deep_value_built_in_code_is_refused_by_the_model_and_the_resolver() {
    let e = small_stack(|| {
        limit(Template::from_value(
            &json!({"Resources": {}, "Metadata": nested(200, json!(1))}),
        ))
    });
    assert!(e.path.starts_with("Metadata[0]"), "{}", e.path);
    small_stack(|| {
        let t = Template::from_value(&json!({"Resources": {}})).unwrap();
        let params = bind_parameters(&t, &IndexMap::new()).unwrap();
        let pseudo = pseudo();
        let conditions = IndexMap::new();
        let r = Resolver::new(
            &t,
            &params,
            &pseudo,
            &conditions,
            &EmptyEnvironment,
            Mode::Plan,
        );
        let deep = (0..200).fold(json!("x"), |v, _| json!({"Fn::Base64": v}));
        limit(r.resolve(&deep, &Path::root()));
    });
}

/// `n` conditions, each using the next; the last one uses the first when `circle`.
fn condition_chain(n: usize, circle: bool) -> Template {
    let mut conditions = serde_json::Map::new();
    for i in 0..n {
        let next = if i + 1 < n {
            json!({"Fn::Not": [{"Condition": format!("C{}", i + 1)}]})
        } else if circle {
            json!({"Fn::Not": [{"Condition": "C0"}]})
        } else {
            json!({"Fn::Equals": ["a", "a"]})
        };
        conditions.insert(format!("C{i}"), next);
    }
    Template::from_value(&json!({"Conditions": conditions, "Resources": {}})).unwrap()
}

#[test]
fn long_chains_of_conditions_need_no_deep_stack() {
    small_stack(|| {
        let t = condition_chain(20_000, false);
        let p = bind_parameters(&t, &IndexMap::new()).unwrap();
        let c = evaluate_conditions(&t, &p, &pseudo(), &EmptyEnvironment).unwrap();
        assert!(c["C19999"]);
        assert!(!c["C19998"]);
        assert!(!c["C0"]);
        let t = condition_chain(20_000, true);
        let e = evaluate_conditions(&t, &p, &pseudo(), &EmptyEnvironment).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Cycle);
        assert!(e.message.ends_with("C19999 -> C0"), "{}", &e.message[..100]);
        assert_eq!(e.path, "Conditions.C19999.Fn::Not[0].Condition");
    });
}

#[test]
fn a_condition_used_inside_a_value_of_a_condition_is_an_error_not_a_loop() {
    let e = small_stack(|| {
        plan_text(
            "Conditions:\n  A: !Equals [!Not [!Condition A], true]\nResources:\n  Q: {Type: AWS::SQS::Queue, Condition: A}\n",
        )
        .unwrap_err()
    });
    assert_eq!(e.kind, ErrorKind::InvalidFunction, "{e}");
    assert_eq!(e.path, "Conditions.A.Fn::Equals[0].Fn::Not[0].Condition");
}

#[test]
fn sub_variables_are_resolved_once_and_strings_stay_bounded() {
    // Each level triples the string and names its variable three times: 3^20
    // evaluations before, twenty now; the string passes 1 MiB on the way.
    let inner = (0..20).fold(
        json!("x"),
        |v, _| json!({"Fn::Sub": ["${a}${a}${a}", {"a": v}]}),
    );
    let t = Template::from_value(&json!({
        "Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": inner}}}
    }))
    .unwrap();
    let e = small_stack(move || limit(plan_template(&t)));
    assert!(
        e.message
            .contains("Fn::Sub would make a string longer than 1 MiB"),
        "{e}"
    );
    assert!(
        e.path
            .starts_with("Resources.Q.Properties.QueueName.Fn::Sub[1].a"),
        "{}",
        e.path
    );
}

#[test]
fn join_and_base64_results_stay_bounded() {
    let half = "x".repeat(MAX_STRING_BYTES / 2 + 1);
    let t = Template::from_value(&json!({
        "Parameters": {"P": {"Type": "String", "Default": half}},
        "Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {
            "QueueName": {"Fn::Join": ["", [{"Ref": "P"}, {"Ref": "P"}]]}
        }}}
    }))
    .unwrap();
    let e = limit(plan_template(&t));
    assert_eq!(e.path, "Resources.Q.Properties.QueueName.Fn::Join");
    let deep = (0..40).fold(json!("0123456789"), |v, _| json!({"Fn::Base64": v}));
    let t = Template::from_value(&json!({
        "Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": deep}}}
    }))
    .unwrap();
    let e = limit(plan_template(&t));
    assert!(e.message.contains("Fn::Base64"), "{e}");
}

#[test]
fn a_large_value_used_from_many_places_stops_at_the_plan_budget() {
    let big = "m".repeat(512 * 1024);
    let resources: serde_json::Map<String, Value> = (0..200)
        .map(|i| {
            (
                format!("Q{i}"),
                json!({"Type": "AWS::SSM::Parameter", "Properties": {
                    "Type": "String", "Value": {"Fn::FindInMap": ["M", "k", "v"]}
                }}),
            )
        })
        .collect();
    let t = Template::from_value(&json!({
        "Mappings": {"M": {"k": {"v": big}}},
        "Resources": resources
    }))
    .unwrap();
    let e = limit(plan_template(&t));
    assert!(e.message.contains("64 MiB in all"), "{e}");
    assert!(e.path.starts_with("Resources.Q1"), "{}", e.path);
}

#[test]
fn a_mapping_value_cannot_nest_the_template_past_the_limit() {
    let value = nested(40, json!("v"));
    let place = (0..30).fold(json!({"Fn::FindInMap": ["M", "k", "v"]}), |v, _| json!([v]));
    let t = Template::from_value(&json!({
        "Mappings": {"M": {"k": {"v": value}}},
        "Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"Tags": place}}}
    }))
    .unwrap();
    let e = limit(plan_template(&t));
    assert!(e.message.contains("mapping `M`"), "{e}");
}

#[test]
fn the_deepest_template_allowed_plans_on_a_small_stack() {
    // Intrinsic functions nested as deep as the template may nest: the value is at
    // `Resources.Q.Properties.QueueName`, each function adds three levels.
    let value = (0..(MAX_DEPTH - 4) / 3).fold(json!("x"), |v, i| {
        if i % 2 == 0 {
            json!({"Fn::Join": ["", [v]]})
        } else {
            json!({"Fn::Select": [0, [v]]})
        }
    });
    let t = Template::from_value(&json!({
        "Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": value}}}
    }))
    .unwrap();
    let p = small_stack(move || plan_template(&t).unwrap());
    assert_eq!(p.resources[0].properties["QueueName"], json!("x"));
}

#[test]
fn nested_stacks_that_include_themselves_are_a_circle() {
    let dir = std::env::temp_dir().join(format!("stackflow-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("loop.template.json");
    std::fs::write(
        &file,
        json!({"Resources": {"Child": {
            "Type": "AWS::CloudFormation::Stack",
            "Properties": {"TemplateURL": "x"},
            "Metadata": {"aws:asset:path": "loop.template.json"}
        }}})
        .to_string(),
    )
    .unwrap();
    let e = small_stack(move || load_path(&file).unwrap_err());
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(e.kind, ErrorKind::Cycle, "{e}");
    assert_eq!(e.path, "Resources.Child");
    assert!(e.message.contains("loop.template.json -> "), "{e}");
}

#[test]
fn long_names_in_errors_are_shortened() {
    let key = "K".repeat(200_000);
    let e = Template::from_value(&json!({"Resources": {}, key.clone(): 1})).unwrap_err();
    assert!(e.to_string().len() < 4_000, "{}", e.to_string().len());
    let text =
        format!("Resources:\n  Q:\n    Type: T\n    Properties:\n      A: !Sub \"${{{key}\"\n");
    let e = plan_text(&text).unwrap_err();
    assert!(e.to_string().len() < 4_000, "{}", e.to_string().len());
}
