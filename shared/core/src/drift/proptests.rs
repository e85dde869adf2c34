//! Property tests: no secret ever reaches a baseline or a difference, a fresh baseline is
//! in sync with what it was taken from, and dependence is reachability.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;

const REF: &str = "{{resolve:secretsmanager:app:SecretString:password}}";

/// How the template spells the secret at its position.
#[derive(Debug, Clone)]
enum Form {
    WholeReference,
    EmbeddedReference(String, String),
    NoEchoMask,
    EmbeddedMask(String, String),
}

/// One step from a container to the secret's position.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize, usize),
}

/// What AWS does differently from the template at one container on the way.
#[derive(Debug, Clone)]
enum Change {
    None,
    Reverse,
    Append(Value),
    ExtraKey(Value),
    AsJsonText,
    WrapInList,
    RemoveKey,
}

/// Plain values: no capital letters, so they never hold the secret.
fn plain() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        "[a-z0-9 ]{0,6}".prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("s[0-9]", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn form() -> impl Strategy<Value = Form> {
    let text = || "[a-z:/@-]{0,5}";
    prop_oneof![
        Just(Form::WholeReference),
        (text(), text()).prop_map(|(p, s)| Form::EmbeddedReference(p, s)),
        Just(Form::NoEchoMask),
        (text(), text()).prop_map(|(p, s)| Form::EmbeddedMask(p, s)),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        "[a-z]{1,4}".prop_map(Step::Key),
        (1usize..4, 0usize..4).prop_map(|(len, at)| Step::Index(at % len, len)),
    ]
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => Just(Change::None),
        1 => Just(Change::Reverse),
        1 => plain().prop_map(Change::Append),
        1 => plain().prop_map(Change::ExtraKey),
        1 => Just(Change::AsJsonText),
        1 => Just(Change::WrapInList),
        1 => Just(Change::RemoveKey),
    ]
}

/// The template's string and AWS's value at the secret's position.
fn leaves(form: &Form, secret: &str) -> (Value, Value) {
    let (t, a) = match form {
        Form::WholeReference => (REF.to_string(), secret.to_string()),
        Form::EmbeddedReference(p, s) => (format!("{p}{REF}{s}"), format!("{p}{secret}{s}")),
        Form::NoEchoMask => ("****#00112233aabbccdd".to_string(), secret.to_string()),
        Form::EmbeddedMask(p, s) => (format!("{p}****{s}"), format!("{p}{secret}{s}")),
    };
    (Value::String(t), Value::String(a))
}

/// Wraps `inner` in the container `step` names, with `siblings` around it.
fn wrap(step: &Step, inner: Value, siblings: &[Value]) -> Value {
    match step {
        Step::Key(k) => {
            let mut m: Map<String, Value> = siblings
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("s{i}"), v.clone()))
                .collect();
            m.insert(k.clone(), inner);
            Value::Object(m)
        }
        Step::Index(at, len) => {
            let mut items: Vec<Value> = (0..*len)
                .map(|i| siblings.get(i).cloned().unwrap_or(Value::Null))
                .collect();
            items[*at] = inner;
            Value::Array(items)
        }
    }
}

fn apply(change: &Change, step: &Step, v: Value) -> Value {
    match (change, v) {
        (Change::Reverse, Value::Array(mut items)) => {
            items.reverse();
            Value::Array(items)
        }
        (Change::Append(x), Value::Array(mut items)) => {
            items.push(x.clone());
            Value::Array(items)
        }
        (Change::ExtraKey(x), Value::Object(mut m)) => {
            m.insert("extra".into(), x.clone());
            Value::Object(m)
        }
        (Change::RemoveKey, Value::Object(mut m)) => {
            if let Step::Key(k) = step {
                m.remove(k);
            }
            Value::Object(m)
        }
        (Change::AsJsonText, v) => Value::String(v.to_string()),
        (Change::WrapInList, v) => Value::Array(vec![v]),
        (_, v) => v,
    }
}

/// A template holding a secret at one position and what AWS returns for it.
#[derive(Debug, Clone)]
struct Case {
    template: Map<String, Value>,
    aws: Map<String, Value>,
    secret: String,
}

fn case() -> impl Strategy<Value = Case> {
    (
        form(),
        "SECRET[A-Z0-9]{4,10}",
        prop::collection::vec((step(), change()), 0..4),
        prop::collection::vec(plain(), 4),
        "[A-Z][a-z]{0,5}",
        prop::collection::btree_map("[A-Z][a-z]{0,5}", plain(), 0..3),
    )
        .prop_map(|(form, secret, steps, siblings, top, others)| {
            let (mut t, mut a) = leaves(&form, &secret);
            for (step, change) in steps.iter().rev() {
                t = wrap(step, t, &siblings);
                a = apply(change, step, wrap(step, a, &siblings));
            }
            let mut template: Map<String, Value> = others.into_iter().collect();
            let mut aws = template.clone();
            template.insert(top.clone(), t);
            aws.insert(top, a);
            Case {
                template,
                aws,
                secret,
            }
        })
}

fn text(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).expect("serializable")
}

fn observed() -> CompareRules {
    CompareRules {
        baseline_is_observed: true,
        ..CompareRules::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever AWS does around the position, the secret is never in the baseline, and
    /// every masked pointer addresses a `***`.
    #[test]
    fn the_baseline_never_holds_the_secret(c in case()) {
        let o = observed_baseline(&c.template, &c.aws);
        prop_assert!(!text(&o.baseline).contains(&c.secret), "{}", text(&o.baseline));
        let whole = Value::Object(o.baseline.clone());
        for p in &o.masked {
            prop_assert_eq!(whole.pointer(p), Some(&json!(MASKED)));
        }
    }

    /// Comparing the template's properties or the baseline with AWS never shows the
    /// secret.
    #[test]
    fn differences_never_show_the_secret(c in case()) {
        let o = observed_baseline(&c.template, &c.aws);
        for (recorded, rules) in [(&c.template, CompareRules::default()), (&o.baseline, observed())] {
            let shown: Vec<String> = compare(recorded, &c.aws, &rules)
                .differences()
                .iter()
                .map(|d| format!("{} {:?} {:?}", d.path, d.recorded, d.aws))
                .collect();
            prop_assert!(!shown.iter().any(|s| s.contains(&c.secret)), "{:?}", shown);
        }
    }

    /// A baseline taken from AWS is in sync with it, up to its masked positions and the
    /// positions of references whose values are not known here (never "drifted", never
    /// "in sync" while a mask or a reference is in it); accepting the same answer changes
    /// nothing.
    #[test]
    fn a_fresh_baseline_is_in_sync(c in case()) {
        let o = observed_baseline(&c.template, &c.aws);
        let cmp = compare(&o.baseline, &c.aws, &observed());
        let holds_reference = text(&o.baseline).contains("{{resolve:");
        match cmp.classification {
            Classification::InSync => {
                prop_assert!(o.masked.is_empty() && !holds_reference, "{:?}", o.baseline)
            }
            Classification::NotCompared(paths) => {
                for m in &o.masked {
                    prop_assert!(paths.contains(m), "{} not in {:?}", m, paths);
                }
                prop_assert!(paths.len() == o.masked.len() || holds_reference);
            }
            Classification::Drifted(d) => prop_assert!(false, "drifted: {:?}", d),
        }
        let again = accept(&o.baseline, &c.aws, &o.masked, &observed()).expect("no drift");
        prop_assert_eq!(again.baseline, o.baseline);
    }

    /// Any plain value is in sync with itself, whichever way tags are spelled and
    /// ordered and whatever tags AWS adds.
    #[test]
    fn tags_compare_as_a_set(
        tags in prop::collection::btree_map("[a-z]{1,4}", "[a-z0-9]{0,4}", 0..6),
        rest in prop::collection::btree_map("[A-Z][a-z]{0,3}", plain(), 0..4),
        shift in 0usize..6,
    ) {
        let mut list: Vec<Value> = tags.iter().map(|(k, v)| json!({"Key": k, "Value": v})).collect();
        let mut b: Map<String, Value> = rest.into_iter().collect();
        b.insert("Tags".into(), Value::Array(list.clone()));
        if !list.is_empty() {
            let n = shift % list.len();
            list.rotate_left(n);
        }
        list.push(json!({"Key": "aws:cloudformation:stack-id", "Value": "x"}));
        let mut a = b.clone();
        a.insert("Tags".into(), Value::Array(list));
        prop_assert_eq!(compare(&b, &b, &observed()).classification, Classification::InSync);
        prop_assert_eq!(compare(&b, &a, &observed()).classification, Classification::InSync);
        let as_map: Map<String, Value> = tags.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        a.insert("Tags".into(), Value::Object(as_map));
        prop_assert_eq!(compare(&b, &a, &observed()).classification, Classification::InSync);
    }

    /// In a random chain of resources (each reading earlier ones or parameters), the
    /// dependent resources are exactly those that reach a chosen parameter.
    #[test]
    fn dependence_is_reachability(
        reads in prop::collection::vec(prop::collection::vec(0usize..12, 0..3), 1..12),
        chosen in 0usize..3,
    ) {
        // Node i reads r: a parameter P(r) when r < 3, else resource R(r - 3) when earlier.
        let mut resources = Map::new();
        let mut reaches = vec![false; reads.len()];
        for (i, rs) in reads.iter().enumerate() {
            let mut props = Map::new();
            for (n, &r) in rs.iter().enumerate() {
                let v = if r < 3 {
                    reaches[i] |= r == chosen;
                    json!({"Fn::Sub": format!("x-${{P{r}}}")})
                } else if r - 3 < i {
                    reaches[i] |= reaches[r - 3];
                    json!({"Fn::GetAtt": [format!("R{}", r - 3), "Arn"]})
                } else {
                    json!("literal")
                };
                props.insert(format!("P{n}"), v);
            }
            resources.insert(format!("R{i}"), json!({"Type": "T", "Properties": props}));
        }
        let params: Map<String, Value> = (0..3).map(|p| (format!("P{p}"), json!({"Type": "String"}))).collect();
        let t = crate::template::Template::from_value(&json!({"Parameters": params, "Resources": resources})).unwrap();
        let d = resources_depending_on(&t, &[format!("P{chosen}")]);
        let want: std::collections::BTreeSet<String> = reaches.iter().enumerate()
            .filter(|(_, r)| **r).map(|(i, _)| format!("R{i}")).collect();
        prop_assert_eq!(d.dependent, want);
        prop_assert!(d.unknown.is_empty());
    }
}
