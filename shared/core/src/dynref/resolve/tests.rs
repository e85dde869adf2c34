use proptest::prelude::*;
use serde_json::{Value, json};

use crate::dynref::testing::{map_lookup, reference};
use crate::dynref::{
    DynRefError, DynamicReference, LookupFailed, Record, ResolveError, contains_dynamic_reference,
    resolve,
};

#[test]
fn resolve_and_restore() {
    let lookup = map_lookup(&[
        ("{{resolve:ssm:/db/host}}", "db.internal"),
        (
            "{{resolve:secretsmanager:Db:SecretString:password}}",
            "hunter2",
        ),
        ("{{resolve:ssm-secure:/api/key:3}}", "k-123"),
    ]);
    let input = json!({
        "Url": "pg://admin:{{resolve:secretsmanager:Db:SecretString:password::}}@{{resolve:ssm:/db/host}}",
        "Host": "{{resolve:ssm:/db/host}}",
        "List": [1, true, null, "{{resolve:ssm-secure:/api/key:3}}", "plain"],
        "{{resolve:ssm:/db/host}}": "keys are not resolved",
        "a/b~c": {"x": "{{resolve:ssm-secure:/api/key:3}}"},
    });
    let (out, res) = resolve(&input, &lookup).unwrap();
    assert_eq!(
        out,
        json!({
            "Url": "pg://admin:hunter2@db.internal",
            "Host": "db.internal",
            "List": [1, true, null, "k-123", "plain"],
            "{{resolve:ssm:/db/host}}": "keys are not resolved",
            "a/b~c": {"x": "k-123"},
        })
    );
    assert_eq!(
        res.records,
        vec![
            Record {
                pointer: "/Url".into(),
                original: input["Url"].as_str().unwrap().into(),
                secrets: vec!["hunter2".into()],
            },
            Record {
                pointer: "/Host".into(),
                original: "{{resolve:ssm:/db/host}}".into(),
                secrets: vec![],
            },
            Record {
                pointer: "/List/3".into(),
                original: "{{resolve:ssm-secure:/api/key:3}}".into(),
                secrets: vec!["k-123".into()],
            },
            Record {
                pointer: "/a~1b~0c/x".into(),
                original: "{{resolve:ssm-secure:/api/key:3}}".into(),
                secrets: vec!["k-123".into()],
            },
        ]
    );
    assert!(!res.is_empty());
    assert_eq!(res.restore(&out), input);
    // The escaped pointer addresses the key with '/' and '~'.
    assert_eq!(out.pointer("/a~1b~0c/x"), Some(&json!("k-123")));
}

#[test]
fn ssm_values_are_not_secrets() {
    let lookup = map_lookup(&[("{{resolve:ssm:p}}", "public-value")]);
    let (out, res) = resolve(&json!(["{{resolve:ssm:p}}"]), &lookup).unwrap();
    assert_eq!(out, json!(["public-value"]));
    assert_eq!(res.records.len(), 1);
    assert!(res.records[0].secrets.is_empty());
    assert_eq!(res.mask("public-value"), "public-value");
}

#[test]
fn resolve_root_string_and_nothing_to_do() {
    let lookup = map_lookup(&[("{{resolve:ssm:p}}", "v")]);
    let (out, res) = resolve(&json!("<{{resolve:ssm:p}}>"), &lookup).unwrap();
    assert_eq!(out, json!("<v>"));
    assert_eq!(res.records[0].pointer, "");
    assert_eq!(res.restore(&out), json!("<{{resolve:ssm:p}}>"));

    let input = json!({"a": [1, "x", {"b": null}]});
    let (out, res) = resolve(&input, &lookup).unwrap();
    assert_eq!(out, input);
    assert!(res.is_empty());
}

#[test]
fn resolved_values_are_not_resolved_again() {
    let lookup = map_lookup(&[("{{resolve:ssm:p}}", "{{resolve:ssm:q}}")]);
    let (out, res) = resolve(&json!({"A": "{{resolve:ssm:p}}"}), &lookup).unwrap();
    assert_eq!(out, json!({"A": "{{resolve:ssm:q}}"}));
    assert_eq!(res.restore(&out), json!({"A": "{{resolve:ssm:p}}"}));
}

#[test]
fn resolve_errors_name_pointer_and_reference() {
    let lookup = map_lookup(&[("{{resolve:secretsmanager:S}}", "topsecret")]);
    let input = json!({"P": {"k/1": ["{{resolve:secretsmanager:S}} {{resolve:ssm:missing}}"]}});
    let err = resolve(&input, &lookup).unwrap_err();
    assert_eq!(
        err,
        ResolveError::Lookup {
            pointer: "/P/k~11/0".into(),
            reference: "{{resolve:ssm:missing}}".into(),
            failed: LookupFailed::NotFound { service: "ssm" },
        }
    );
    let msg = err.to_string();
    assert_eq!(
        msg,
        "could not resolve {{resolve:ssm:missing}} at \"/P/k~11/0\": ssm not found"
    );
    assert!(!msg.contains("topsecret"));

    let err = resolve(&json!({"X": ["ok", "{{resolve:vault:x}}"]}), &lookup).unwrap_err();
    assert!(matches!(
        &err,
        ResolveError::Parse { pointer, error: DynRefError::UnknownService { .. } } if pointer == "/X/1"
    ));
    assert!(err.to_string().contains("/X/1"));
    assert!(err.to_string().contains("{{resolve:vault:x}}"));
}

#[test]
fn closures_are_lookups() {
    let lookup =
        |r: &DynamicReference| -> Result<String, LookupFailed> { Ok(r.service().to_owned()) };
    let (out, _) = resolve(&json!("{{resolve:ssm:a}}"), &lookup).unwrap();
    assert_eq!(out, json!("ssm"));
}

#[test]
fn debug_does_not_print_secrets() {
    let lookup = map_lookup(&[("{{resolve:secretsmanager:A}}", "hunter2")]);
    let (_, res) = resolve(&json!("{{resolve:secretsmanager:A}}"), &lookup).unwrap();
    let debug = format!("{res:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("<1 redacted>"), "{debug}");
}

#[test]
fn restore_skips_missing_positions() {
    let lookup = map_lookup(&[("{{resolve:ssm:p}}", "v")]);
    let input = json!({"A": ["{{resolve:ssm:p}}"], "B": "{{resolve:ssm:p}}"});
    let (_, res) = resolve(&input, &lookup).unwrap();
    let changed = json!({"A": [], "C": 1});
    assert_eq!(res.restore(&changed), changed);
    let partly = json!({"A": ["v"], "B": 5});
    assert_eq!(
        res.restore(&partly),
        json!({"A": ["{{resolve:ssm:p}}"], "B": "{{resolve:ssm:p}}"})
    );
}

/// A string made of plain pieces (which may contain braces, `/`, `~`, but never the
/// `{{resolve:` marker since they have no `:`) and references.
fn text_with_refs() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => "[a-z {}/~é]{0,6}",
        1 => reference().prop_map(|r| r.to_string()),
    ];
    proptest::collection::vec(piece, 0..5).prop_map(|v| v.concat())
}

fn json_tree() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text_with_refs().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(("[a-z/~{}:]{0,5}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Secret values look like `S3CRET<n>`, others `plain<n>`; some values contain a
/// reference themselves.
fn test_lookup(r: &DynamicReference) -> Result<String, LookupFailed> {
    let text = r.to_string();
    let n = text.len() % 17;
    Ok(if r.is_secret() {
        format!("S3CRET{n}\"x")
    } else if n.is_multiple_of(3) {
        "{{resolve:ssm:nested}}".to_owned()
    } else {
        format!("plain{n}")
    })
}

fn count_strings_with_refs(v: &Value) -> usize {
    match v {
        Value::String(s) => usize::from(contains_dynamic_reference(s)),
        Value::Array(a) => a.iter().map(count_strings_with_refs).sum(),
        Value::Object(m) => m.values().map(count_strings_with_refs).sum(),
        _ => 0,
    }
}

proptest! {
    #[test]
    fn resolve_then_restore_is_identity(input in json_tree()) {
        let (out, res) = resolve(&input, &test_lookup).unwrap();
        prop_assert_eq!(res.records.len(), count_strings_with_refs(&input));
        prop_assert_eq!(res.restore(&out), input.clone());
        // No secret survives masking of the serialized resolved value.
        let masked = res.mask(&out.to_string());
        prop_assert!(!masked.contains("S3CRET"), "{}", masked);
        // Records point at the resolved strings.
        for rec in &res.records {
            prop_assert!(out.pointer(&rec.pointer).is_some_and(Value::is_string));
            prop_assert_eq!(input.pointer(&rec.pointer), Some(&Value::String(rec.original.clone())));
        }
    }
}
