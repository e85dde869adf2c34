//! Bad input for the template parser: random bytes, token soup, real templates with
//! random edits, nesting thousands deep, YAML alias bombs, and random values written out
//! as JSON or YAML. Whatever the text, parsing (and, when it parses, the model and the
//! plan) returns a value or a clear error, without a panic, quickly.
//!
//! `STACKFLOW_FUZZ_SECONDS=600 cargo test -p stackflow-core --test fuzz_parse -- --nocapture`
//! runs it for ten minutes.

mod fuzz_support;

use std::path::PathBuf;
use std::sync::LazyLock;

use fuzz_support::Outcome;
use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::Value;
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::limits::MAX_MESSAGE_CHARS;
use stackflow_core::plan::{CurrentState, PlanInput, SyntheticEnvironment, plan};
use stackflow_core::template::{Template, parse_text};
use stackflow_core::{ErrorKind, TemplateError};

/// Templates to start from: the CDK corpus of the project and a few hand-written YAML
/// templates with short-form tags, anchors and conditions.
static SEEDS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut seeds: Vec<String> = HAND_WRITTEN.iter().map(|s| s.to_string()).collect();
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/corpus");
    let mut dirs = vec![corpus];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.to_string_lossy().ends_with(".template.json")
                && let Ok(text) = std::fs::read_to_string(&p)
            {
                seeds.push(text);
            }
        }
    }
    seeds
});

const HAND_WRITTEN: &[&str] = &[
    "AWSTemplateFormatVersion: 2010-09-09
Parameters:
  Env: {Type: String, Default: dev, AllowedValues: [dev, prod]}
  Subnets: {Type: CommaDelimitedList, Default: 'a,b'}
Mappings:
  Sizes: {dev: {Mem: 128}, prod: {Mem: 1024}}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
  IsDev: !Not [!Condition IsProd]
  Both: !And [!Condition IsDev, !Equals [a, a]]
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub '${AWS::StackName}-${Env}-q'
      Tags: [{Key: k, Value: !Select [0, !Ref Subnets]}]
  Topic:
    Type: AWS::SNS::Topic
    Condition: IsDev
    Properties:
      DisplayName: !Join ['-', [!GetAtt Queue.Arn, !FindInMap [Sizes, !Ref Env, Mem]]]
Outputs:
  Url: {Value: !Ref Queue, Export: {Name: !Sub '${AWS::StackName}-url'}}
",
    "defaults: &defaults {Type: AWS::SQS::Queue, Properties: {VisibilityTimeout: 30}}
Resources:
  A: *defaults
  B:
    <<: *defaults
    DependsOn: A
  C:
    Type: AWS::EC2::Subnet
    Properties:
      CidrBlock: !Select [1, !Cidr ['10.0.0.0/16', 4, 8]]
      AvailabilityZone: !Select [0, !GetAZs '']
      VpcId: !ImportValue shared-vpc
      Description: !Base64 |
        #!/bin/bash
        echo ${!Literal}
",
    "{\"Resources\": {\"F\": {\"Type\": \"AWS::Lambda::Function\", \"Properties\": {
      \"Role\": {\"Fn::GetAtt\": [\"R\", \"Arn\"]},
      \"Code\": {\"ZipFile\": {\"Fn::Join\": [\"\\n\", [\"a\", {\"Ref\": \"AWS::Region\"}]]}},
      \"Environment\": {\"Variables\": {\"X\": {\"Fn::If\": [\"C\", \"1\", {\"Ref\": \"AWS::NoValue\"}]}}}
    }}, \"R\": {\"Type\": \"AWS::IAM::Role\"}},
    \"Conditions\": {\"C\": {\"Fn::Or\": [{\"Fn::Equals\": [1, \"1\"]}, false]}}}",
];

/// Pieces of JSON and YAML syntax, and names templates use.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ": ",
    ":",
    ", ",
    ",",
    "- ",
    "-",
    "\n",
    "  ",
    "    ",
    "\t",
    "!Ref ",
    "!GetAtt ",
    "!Sub ",
    "!If ",
    "!Not ",
    "!Condition ",
    "!Base64 ",
    "! ",
    "!!str ",
    "!!binary ",
    "!!int ",
    "&a ",
    "*a",
    "&b ",
    "*b",
    "<<: ",
    "\"",
    "'",
    "|",
    ">",
    "|-",
    "#",
    "---\n",
    "...\n",
    "? ",
    "%YAML 1.2\n",
    "%TAG ! tag:x,2000:\n",
    "Resources",
    "Type",
    "Properties",
    "Conditions",
    "Outputs",
    "Value",
    "Fn::If",
    "Fn::Sub",
    "Ref",
    "AWS::NoValue",
    "${x}",
    "${",
    "}",
    "0",
    "-1",
    "1e400",
    "0x1F",
    "0o17",
    ".inf",
    ".nan",
    "~",
    "null",
    "true",
    "yes",
    "99999999999999999999999999",
    "\\u0000",
    "\u{feff}",
    "é",
    "\u{1F600}",
    "\r\n",
];

/// One edit of a text: what, where (scaled to the text's length), with which byte or token.
#[derive(Debug, Clone)]
struct Edit {
    op: u8,
    at: u32,
    len: u16,
    token: usize,
}

fn edit() -> impl Strategy<Value = Edit> {
    (0u8..6, any::<u32>(), 0u16..64, 0..TOKENS.len()).prop_map(|(op, at, len, token)| Edit {
        op,
        at,
        len,
        token,
    })
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut t = text.as_bytes().to_vec();
    for e in edits {
        let at = if t.is_empty() {
            0
        } else {
            e.at as usize % t.len()
        };
        let end = (at + usize::from(e.len)).min(t.len());
        let token = TOKENS[e.token].as_bytes();
        match e.op {
            0 => {
                t.splice(at..end.min(at + 1), token.iter().copied());
            }
            1 => {
                t.splice(at..at, token.iter().copied());
            }
            2 => {
                t.drain(at..end);
            }
            3 => {
                let copy = t[at..end].to_vec();
                t.splice(at..at, copy);
            }
            4 => t.truncate(at),
            _ => {
                if let Some(b) = t.get_mut(at) {
                    *b ^= 1 << (e.len % 8);
                }
            }
        }
    }
    String::from_utf8_lossy(&t).into_owned()
}

/// Text nested `n` levels deep in one of the ways JSON and YAML allow.
fn deep(kind: u8, n: usize) -> String {
    match kind {
        0 => format!("{{\"Resources\": {}{}}}", "[".repeat(n), "]".repeat(n)),
        1 => format!("{}{}", "{\"a\": ".repeat(n), "}".repeat(n)),
        2 => format!("Metadata: {}x{}\n", "[".repeat(n), "]".repeat(n)),
        3 => (0..n.min(400))
            .map(|i| format!("{}a:\n", "  ".repeat(i)))
            .collect(),
        4 => format!(
            "Resources: {{Q: {{Type: T, Properties: {{P: {}x{}}}}}}}\n",
            "!If [C, ".repeat(n),
            ", y]".repeat(n)
        ),
        _ => format!("Resources: {}{}\n", "{a: ".repeat(n), "}".repeat(n)),
    }
}

/// A YAML document whose aliases repeat `fanout` times per level, `levels` deep, over a
/// leaf of `leaf` bytes.
fn bomb(levels: usize, fanout: usize, leaf: usize) -> String {
    let mut text = format!(
        "Resources: {{}}\nMetadata:\n  l0: &l0 {}\n",
        "x".repeat(leaf)
    );
    for i in 1..=levels {
        let items = vec![format!("*l{}", i - 1); fanout].join(", ");
        text.push_str(&format!("  l{i}: &l{i} [{items}]\n"));
    }
    text
}

/// Random JSON values, with keys and strings that look like template parts.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[ -~]{0,12}".prop_map(Value::String),
        prop::sample::select(TOKENS).prop_map(|t| Value::String(t.to_string())),
    ];
    let key = prop_oneof![
        "[A-Za-z:]{1,10}",
        prop::sample::select(vec![
            "Resources",
            "Type",
            "Properties",
            "Parameters",
            "Conditions",
            "Outputs",
            "Mappings",
            "Ref",
            "Fn::If",
            "Fn::Sub",
            "Fn::Join",
            "Condition",
            "DependsOn",
            "Default",
            "Value",
            "Export",
            "Name",
            "Transform",
            "Metadata",
            "Rules",
        ])
        .prop_map(str::to_string),
    ];
    leaf.prop_recursive(8, 96, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Every kind of text the parser may be handed.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..2000)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        2 => prop::collection::vec(prop::sample::select(TOKENS), 0..300).prop_map(|t| t.concat()),
        6 => (any::<prop::sample::Index>(), prop::collection::vec(edit(), 0..10))
            .prop_map(|(i, edits)| apply(i.get::<String>(&SEEDS), &edits)),
        1 => (0u8..6, 1usize..5000).prop_map(|(k, n)| deep(k, n)),
        1 => (1usize..12, 1usize..16, 1usize..20_000).prop_map(|(l, f, n)| bomb(l, f, n)),
        3 => (value(), any::<bool>(), any::<bool>()).prop_map(|(v, yaml, wrap)| {
            let v = if wrap {
                serde_json::json!({"Resources": {"R": {"Type": "AWS::SQS::Queue", "Properties": v}}})
            } else {
                v
            };
            if yaml {
                yaml_serde::to_string(&v).unwrap_or_default()
            } else {
                v.to_string()
            }
        }),
    ]
}

/// A clear error: a message of bounded length, a path unless the error is about the
/// whole text, the file named. Its label is `<stage> error: <kind>`.
fn clear(stage: &str, e: &TemplateError, file: bool) -> Outcome {
    let bounded = |s: &str| s.chars().count() <= MAX_MESSAGE_CHARS + 3;
    if e.message.trim().is_empty() || !bounded(&e.message) || !bounded(&e.path) {
        return Err(format!("unclear error: {e:?}"));
    }
    let whole = matches!(
        e.kind,
        ErrorKind::Syntax | ErrorKind::Limit | ErrorKind::Structure | ErrorKind::Io
    );
    if e.path.is_empty() && !whole {
        return Err(format!("an error without a path: {e}"));
    }
    if file && e.file.as_deref() != Some("fuzz.yaml") {
        return Err(format!("an error that does not name the file: {e}"));
    }
    if std::env::var("STACKFLOW_FUZZ_DETAIL").is_ok() {
        let m: String = e.message.chars().take(40).collect();
        return Ok(format!("{stage} error: {:?} {m}", e.kind));
    }
    Ok(format!("{stage} error: {:?}", e.kind))
}

/// Parses `text`; when it parses, builds the model and plans it.
#[allow(
    clippy::ptr_arg,
    reason = "the driver hands each check a reference to its input"
)]
fn check(text: &String) -> Outcome {
    let v = match parse_text(text, "fuzz.yaml") {
        Ok(v) => v,
        Err(e) => return clear("parse", &e, true),
    };
    let t = match Template::from_value(&v) {
        Ok(t) => t,
        Err(e) => return clear("model", &e, false),
    };
    let given: IndexMap<String, String> = t
        .parameters
        .iter()
        .filter(|(_, p)| p.default.is_none())
        .map(|(n, _)| (n.clone(), "1".to_string()))
        .collect();
    let params = match bind_parameters(&t, &given) {
        Ok(p) => p,
        Err(e) => return clear("parameters", &e, false),
    };
    let pseudo = Pseudo {
        region: "us-east-1".into(),
        account_id: Some("123456789012".into()),
        stack_name: "fuzz".into(),
        stack_id: None,
    };
    let planned = plan(&PlanInput {
        stack: "fuzz",
        template: &t,
        parameters: &params,
        pseudo: &pseudo,
        state: &CurrentState::default(),
        env: &SyntheticEnvironment,
        digest_key: None,
        secret_digests: None,
    });
    match planned {
        Ok(_) => Ok("planned".to_string()),
        Err(e) => clear("plan", &e, false),
    }
}

#[test]
fn fuzz_parse() {
    fuzz_support::fuzz("parse", 1000, text(), check);
}
