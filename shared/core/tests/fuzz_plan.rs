//! Bad input for the resolver and the plan: templates with random trees of intrinsic
//! functions (right and wrong arities, names that exist and names that do not),
//! random conditions (in circles too), and adversarial shapes: long chains of conditions,
//! deep `Fn::If` nesting, `Fn::Sub` and `Fn::Join` that multiply a string, nested
//! `Fn::Base64`, a large mapping value used from many places. Whatever the template, the
//! plan (and a second plan against the state the first would leave, and a deploy-mode
//! resolution) returns a value or a clear error, without a panic, quickly, and what it
//! returns can be written to JSON and read back.
//!
//! `STACKFLOW_FUZZ_SECONDS=600 cargo test -p stackflow-core --test fuzz_plan -- --nocapture`
//! runs it for ten minutes.

mod fuzz_support;

use fuzz_support::Outcome;
use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use stackflow_core::intrinsics::{Mode, Pseudo, Resolver, bind_parameters, evaluate_conditions};
use stackflow_core::limits::MAX_MESSAGE_CHARS;
use stackflow_core::plan::{CurrentState, PlanInput, SyntheticEnvironment, plan, synthetic_state};
use stackflow_core::template::Template;
use stackflow_core::{ErrorKind, TemplateError};

const RESOURCES: &[&str] = &["R0", "R1", "R2", "R3"];
const CONDITIONS: &[&str] = &["C0", "C1", "C2", "C3"];
const NAMES: &[&str] = &[
    "R0",
    "R1",
    "R2",
    "R3",
    "Gone",
    "PStr",
    "PNum",
    "PList",
    "PSecret",
    "PSsm",
    "PFree",
    "AWS::Region",
    "AWS::NoValue",
    "AWS::AccountId",
    "AWS::StackId",
    "AWS::StackName",
    "AWS::NotificationARNs",
    "AWS::Partition",
    "AWS::URLSuffix",
    "C0",
];
const ATTRIBUTES: &[&str] = &["Arn", "Id", "Outputs.Name", "Endpoint.Address", "", "Arns"];
const TYPES: &[&str] = &[
    "AWS::SQS::Queue",
    "AWS::S3::Bucket",
    "AWS::IAM::Role",
    "AWS::Lambda::Function",
    "AWS::EC2::Subnet",
    "AWS::DynamoDB::Table",
    "AWS::CloudFormation::Stack",
    "Custom::Thing",
    "AWS::SSM::Parameter",
];
const FUNCTIONS: &[&str] = &[
    "Ref",
    "Fn::GetAtt",
    "Fn::Join",
    "Fn::Sub",
    "Fn::Select",
    "Fn::Split",
    "Fn::Base64",
    "Fn::If",
    "Fn::Equals",
    "Fn::And",
    "Fn::Or",
    "Fn::Not",
    "Fn::FindInMap",
    "Fn::GetAZs",
    "Fn::Cidr",
    "Fn::ImportValue",
    "Fn::GetStackOutput",
    "Fn::Length",
    "Fn::ToJsonString",
    "Fn::Transform",
    "Condition",
];

fn f(name: &str, arg: Value) -> Value {
    json!({ name: arg })
}

/// A name from `pool` (the template declares them all), or now and then one it does not
/// declare.
fn name(pool: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        12 => prop::sample::select(pool).prop_map(str::to_string),
        1 => prop::sample::select(vec!["Gone", "Undeclared", "", "AWS::Nothing"]).prop_map(str::to_string),
    ]
}

/// Strings as templates write them: plain, `Fn::Sub` patterns, dynamic references, CIDR
/// blocks, numbers as text.
fn string() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        "[a-z ,.-]{0,10}",
        "(x|\\$\\{(R0|R1.Arn|PStr|PList|PNum|AWS::Region|AWS::NoValue|!lit|Gone|v|w| )\\}|\\$\\{|\\$|\\}){0,6}",
        "\\{\\{resolve:(ssm|secretsmanager|ssm-secure):[a-z/]{0,6}(:[a-z]{0,3}){0,3}\\}\\}",
        "(10\\.0\\.0\\.0/(8|16|24|33)|2001:db8::/(56|64)|[0-9.:/]{0,12})",
        "-?[0-9]{1,22}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        4 => string().prop_map(Value::String),
        1 => any::<i64>().prop_map(Value::from),
        1 => (0u64..300).prop_map(Value::from),
        1 => any::<f64>().prop_map(|x| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
        4 => name(NAMES).prop_map(|n| f("Ref", Value::String(n))),
        2 => (name(RESOURCES), name(ATTRIBUTES), any::<bool>()).prop_map(|(r, a, short)| {
            if short {
                f("Fn::GetAtt", Value::String(format!("{r}.{a}")))
            } else {
                f("Fn::GetAtt", json!([r, a]))
            }
        }),
        1 => prop_oneof![Just(""), Just("us-east-1"), Just("x")]
            .prop_map(|r| f("Fn::GetAZs", json!(r))),
        1 => "[a-z-]{0,8}".prop_map(|e| f("Fn::ImportValue", json!(e))),
        1 => name(CONDITIONS).prop_map(|c| f("Condition", json!(c))),
    ]
}

/// Random trees of intrinsic functions, mostly well-formed, often not.
fn tree() -> impl Strategy<Value = Value> + Clone {
    scalar().prop_recursive(7, 80, 6, |inner| {
        let list = prop::collection::vec(inner.clone(), 0..5);
        // Mostly the right keys, sometimes anything.
        let key = |good: &'static [&'static str], inner: BoxedStrategy<Value>| {
            prop_oneof![
                4 => prop::sample::select(good).prop_map(|k| json!(k)),
                1 => inner,
            ]
        };
        prop_oneof![
            3 => list.clone().prop_map(Value::Array),
            3 => prop::collection::vec(("[A-Za-z]{1,6}", inner.clone()), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            2 => (string(), list.clone()).prop_map(|(d, l)| f("Fn::Join", json!([d, l]))),
            1 => (string(), inner.clone()).prop_map(|(d, x)| f("Fn::Join", json!([d, x]))),
            2 => string().prop_map(|s| f("Fn::Sub", json!(s))),
            2 => (string(), prop::collection::vec(("[vw]", inner.clone()), 0..3)).prop_map(
                |(s, vars)| f("Fn::Sub", json!([s, vars.into_iter().collect::<Map<_, _>>()]))
            ),
            2 => (
                prop_oneof![
                    3 => (0u64..6).prop_map(Value::from),
                    1 => string().prop_map(Value::String),
                    1 => inner.clone()
                ],
                list.clone()
            )
                .prop_map(|(i, l)| f("Fn::Select", json!([i, l]))),
            1 => (prop_oneof![Just(","), Just(""), Just("-"), Just("::")], inner.clone())
                .prop_map(|(d, x)| f("Fn::Split", json!([d, x]))),
            1 => inner.clone().prop_map(|x| f("Fn::Base64", x)),
            2 => (name(CONDITIONS), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| f("Fn::If", json!([c, a, b]))),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| f("Fn::Equals", json!([a, b]))),
            1 => (
                prop_oneof![Just("Fn::And"), Just("Fn::Or"), Just("Fn::Not")],
                prop::collection::vec(inner.clone(), 0..12)
            )
                .prop_map(|(n, ops)| f(n, Value::Array(ops))),
            1 => inner.clone().prop_map(|c| f("Fn::Not", json!([c]))),
            2 => (
                prop_oneof![6 => Just("M"), 1 => Just("Nope")],
                key(&["k", "mapped"], inner.clone().boxed()),
                key(&["v", "l"], inner.clone().boxed()),
                prop::option::of(inner.clone())
            )
                .prop_map(|(m, a, b, d)| {
                    let mut args = vec![json!(m), a, b];
                    args.extend(d.map(|d| json!({"DefaultValue": d})));
                    f("Fn::FindInMap", Value::Array(args))
                }),
            1 => (
                key(&["10.0.0.0/16", "10.1.0.0/24", "2001:db8::/56"], inner.clone().boxed()),
                prop_oneof![
                    3 => (0u64..300).prop_map(Value::from),
                    1 => "[0-9]{1,12}".prop_map(Value::String),
                    1 => inner.clone()
                ],
                (0u64..140).prop_map(Value::from)
            )
                .prop_map(|(b, n, bits)| f("Fn::Cidr", json!([b, n, bits]))),
            1 => prop::collection::vec(
                (
                    prop::sample::select(vec!["StackName", "OutputName", "Region", "RoleArn", "Other"]),
                    inner.clone()
                ),
                0..4
            )
            .prop_map(|kv| f(
                "Fn::GetStackOutput",
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            )),
            1 => (prop::sample::select(FUNCTIONS), inner).prop_map(|(n, x)| f(n, x)),
        ]
    })
}

/// Well-formed expressions that give a string (when every name they use exists): what
/// real templates mostly hold.
fn text_expr() -> impl Strategy<Value = Value> + Clone {
    let leaf = prop_oneof![
        "[a-z0-9-]{0,8}".prop_map(Value::String),
        prop::sample::select(vec![
            "PStr",
            "PNum",
            "PSecret",
            "PSsm",
            "AWS::Region",
            "R0",
            "R1"
        ])
        .prop_map(|n| f("Ref", json!(n))),
        prop::sample::select(vec!["R0.Arn", "R1.Id", "R2.Endpoint.Address"])
            .prop_map(|a| f("Fn::GetAtt", json!(a))),
        r"(-|x|\$\{(PStr|PSecret|AWS::Region|AWS::StackName|R0|R1.Arn|!lit)\}){0,5}"
            .prop_map(|t| f("Fn::Sub", json!(t))),
        (0u64..3).prop_map(|i| f("Fn::Select", json!([i, {"Ref": "PList"}]))),
        (0u64..2).prop_map(|i| f("Fn::Select", json!([i, {"Fn::GetAZs": ""}]))),
        (0u64..4, 1u64..5).prop_map(|(i, n)| {
            f(
                "Fn::Select",
                json!([i % n, {"Fn::Cidr": ["10.0.0.0/16", n, 8]}]),
            )
        }),
        prop::sample::select(vec!["v", "missing"]).prop_map(|k| {
            f(
                "Fn::FindInMap",
                json!(["M", "k", k, {"DefaultValue": "dflt"}]),
            )
        }),
        "[a-z]{1,6}".prop_map(|e| f("Fn::ImportValue", json!(e))),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (
                prop::sample::select(vec!["", ",", ":"]),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(d, l)| f("Fn::Join", json!([d, l]))),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| f("Fn::Sub", json!(["${a}/${b}", {"a": a, "b": b}]))),
            (0u64..2, inner.clone()).prop_map(|(i, x)| f(
                "Fn::Select",
                json!([i, {"Fn::Split": [",", {"Fn::Join": [",", [x, "tail"]]}]}])
            )),
            inner.clone().prop_map(|x| f("Fn::Base64", x)),
            (prop::sample::select(CONDITIONS), inner.clone(), inner)
                .prop_map(|(c, a, b)| f("Fn::If", json!([c, a, b]))),
        ]
    })
}

/// Property values built from [`text_expr`]: lists and objects of them, with
/// `AWS::NoValue` now and then.
fn value_expr() -> impl Strategy<Value = Value> {
    text_expr().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[A-Z][a-z]{0,5}", inner.clone()), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            (prop::sample::select(CONDITIONS), inner)
                .prop_map(|(c, v)| f("Fn::If", json!([c, v, {"Ref": "AWS::NoValue"}]))),
        ]
    })
}

/// A template like real ones: well-formed functions over declared names, conditions that
/// use the ones before them, resources that refer to the ones before them.
fn tidy_template() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(
            (
                prop::sample::select(TYPES),
                prop::collection::vec(("[A-Z][a-z]{0,6}", value_expr()), 0..4),
                prop::option::weighted(0.3, prop::sample::select(CONDITIONS)),
            ),
            4,
        ),
        prop::collection::vec(
            (
                prop::sample::select(vec![
                    json!({"Ref": "PStr"}),
                    json!({"Ref": "PNum"}),
                    json!("a,b"),
                ]),
                prop::sample::select(vec!["a,b", "3", "x"]),
                0usize..4,
            ),
            4,
        ),
        prop::collection::vec(text_expr(), 0..3),
    )
        .prop_map(|(resources, conditions, outputs)| {
            let mut t = json!({
                "Parameters": {
                    "PStr": {"Type": "String", "Default": "a,b"},
                    "PNum": {"Type": "Number", "Default": "3"},
                    "PList": {"Type": "CommaDelimitedList", "Default": "x,y,z"},
                    "PSecret": {"Type": "String", "NoEcho": true, "Default": "s3cret"},
                    "PSsm": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/p"}
                },
                "Mappings": {"M": {"k": {"v": "mapped"}}},
                "Resources": {},
            });
            for (i, (a, b, shape)) in conditions.into_iter().enumerate() {
                let b = json!(b);
                let mut c = match (shape, i) {
                    (_, 0) | (0, _) => f("Fn::Equals", json!([a, b])),
                    (1, _) => f("Fn::Not", json!([{"Condition": format!("C{}", i - 1)}])),
                    _ => f(
                        "Fn::Or",
                        json!([{"Condition": "C0"}, {"Fn::Equals": [a, "x"]}]),
                    ),
                };
                lower_conditions(&mut c, i);
                t["Conditions"][format!("C{i}")] = c;
            }
            for (i, (ty, props, condition)) in resources.into_iter().enumerate() {
                let mut r =
                    json!({"Type": ty, "Properties": props.into_iter().collect::<Map<_, _>>()});
                if let Some(c) = condition {
                    r["Condition"] = json!(c);
                }
                lower_resources(&mut r, i);
                t["Resources"][format!("R{i}")] = r;
            }
            for (i, v) in outputs.into_iter().enumerate() {
                t["Outputs"][format!("O{i}")] =
                    json!({"Value": v, "Export": {"Name": format!("e{i}")}});
            }
            t
        })
}

/// A condition expression: `Fn::Equals` of trees, references to conditions (circles
/// included), `Fn::And`, `Fn::Or`, `Fn::Not`, and things that are no condition.
fn condition() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        3 => (tree(), tree()).prop_map(|(a, b)| f("Fn::Equals", json!([a, b]))),
        3 => name(CONDITIONS).prop_map(|c| f("Condition", json!(c))),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => tree(),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            4 => (
                prop_oneof![Just("Fn::And"), Just("Fn::Or")],
                prop::collection::vec(inner.clone(), 2..4)
            )
                .prop_map(|(n, ops)| f(n, Value::Array(ops))),
            2 => inner.clone().prop_map(|c| f("Fn::Not", json!([c]))),
            1 => (
                prop_oneof![Just("Fn::And"), Just("Fn::Or"), Just("Fn::Not")],
                prop::collection::vec(inner, 0..12)
            )
                .prop_map(|(n, ops)| f(n, Value::Array(ops))),
        ]
    })
}

fn resource() -> impl Strategy<Value = Value> {
    (
        name(TYPES),
        prop::collection::vec(("[A-Z][a-z]{0,6}", tree()), 0..4),
        prop::option::weighted(0.3, prop::sample::select(CONDITIONS)),
        prop::option::weighted(
            0.3,
            prop::collection::vec(prop::sample::select(RESOURCES), 0..3),
        ),
        prop::option::weighted(0.2, tree()),
    )
        .prop_map(|(ty, props, condition, depends_on, metadata)| {
            let mut r = json!({"Type": ty, "Properties": props.into_iter().collect::<Map<_, _>>()});
            if let Some(c) = condition {
                r["Condition"] = json!(c);
            }
            if let Some(d) = depends_on {
                r["DependsOn"] = json!(d);
            }
            if let Some(m) = metadata {
                r["Metadata"] = m;
            }
            r
        })
}

/// A random template over a fixed set of parameters and a mapping.
fn random_template() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(resource(), 4),
        prop::collection::vec(condition(), 4),
        prop::collection::vec(
            (
                tree(),
                prop::option::of(tree()),
                prop::option::weighted(0.3, prop::sample::select(CONDITIONS))
            ),
            0..3
        ),
        tree(),
        prop::bool::weighted(0.98),
        prop::bool::weighted(0.9),
    )
        .prop_map(|(resources, conditions, outputs, mapping_value, free_default, acyclic)| {
            let mut t = json!({
                "Parameters": {
                    "PStr": {"Type": "String", "Default": "a,b"},
                    "PNum": {"Type": "Number", "Default": "3", "MinValue": 0, "MaxValue": 10},
                    "PList": {"Type": "CommaDelimitedList", "Default": "x,y,z"},
                    "PSecret": {"Type": "String", "NoEcho": true, "Default": "s3cret"},
                    "PSsm": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/p"},
                    "PFree": {"Type": "String", "AllowedPattern": "[a-z0-9]*"}
                },
                "Mappings": {"M": {"k": {"v": "mapped", "l": ["a", "b"]}, "mapped": {"v": mapping_value}}},
                "Resources": {},
            });
            if free_default {
                t["Parameters"]["PFree"]["Default"] = json!("free");
            }
            for (i, mut r) in resources.into_iter().enumerate() {
                if acyclic {
                    if let Some(Value::Array(d)) = r.get_mut("DependsOn") {
                        d.retain(|n| RESOURCES[..i].contains(&n.as_str().unwrap_or_default()));
                    }
                    lower_resources(&mut r, i);
                }
                t["Resources"][format!("R{i}")] = r;
            }
            let conditions: Map<String, Value> = conditions
                .into_iter()
                .enumerate()
                .map(|(i, mut c)| {
                    if acyclic {
                        lower_conditions(&mut c, i);
                    }
                    (format!("C{i}"), c)
                })
                .collect();
            if !conditions.is_empty() {
                t["Conditions"] = Value::Object(conditions);
            }
            for (i, (value, export, condition)) in outputs.into_iter().enumerate() {
                let mut o = json!({"Value": value});
                if let Some(e) = export {
                    o["Export"] = json!({"Name": e});
                }
                if let Some(c) = condition {
                    o["Condition"] = json!(c);
                }
                t["Outputs"][format!("O{i}")] = o;
            }
            t
        })
}

/// Renames, in the resource `R{i}`, every use of a resource `R{j}` with `j >= i` to one
/// declared before it (or to a parameter when there is none), so that the resources
/// depend on each other in no circle.
fn lower_resources(v: &mut Value, i: usize) {
    let to = |j: usize| {
        if i == 0 {
            "PStr".to_string()
        } else {
            format!("R{}", j % i)
        }
    };
    let mut pending = vec![v];
    while let Some(v) = pending.pop() {
        // No resource before the first: its attributes become a parameter.
        let attribute_of_later = v.get("Fn::GetAtt").is_some_and(|a| {
            let target = a.as_str().or_else(|| a.get(0).and_then(Value::as_str));
            target.is_some_and(|t| t.starts_with('R'))
        });
        if i == 0 && attribute_of_later {
            *v = f("Ref", json!("PStr"));
            continue;
        }
        match v {
            Value::String(s) => {
                for j in (i..RESOURCES.len()).rev() {
                    let name = format!("R{j}");
                    if *s == name || s.starts_with(&format!("{name}.")) {
                        *s = s.replacen(&name, &to(j), 1);
                    }
                    *s = s.replace(&format!("${{{name}"), &format!("${{{}", to(j)));
                }
            }
            Value::Array(items) => pending.extend(items.iter_mut()),
            Value::Object(m) => pending.extend(m.values_mut()),
            _ => {}
        }
    }
}

/// Replaces, in the condition `C{i}`, every use of a condition `C{j}` with `j >= i` by
/// one declared before it (or by `true` when there is none): no circle.
fn lower_conditions(v: &mut Value, i: usize) {
    let mut pending = vec![v];
    while let Some(v) = pending.pop() {
        let used = v.get("Condition").and_then(Value::as_str).and_then(|c| {
            let j: usize = c.strip_prefix('C')?.parse().ok()?;
            (j >= i).then_some(j)
        });
        match (used, v) {
            (Some(_), v) if i == 0 => *v = Value::Bool(true),
            (Some(j), v) => *v = json!({"Condition": format!("C{}", j % i)}),
            (None, Value::Array(items)) => pending.extend(items.iter_mut()),
            (None, Value::Object(m)) => pending.extend(m.values_mut()),
            _ => {}
        }
    }
}

fn queue(name: Value) -> Value {
    json!({"Type": "AWS::SQS::Queue", "Properties": {"QueueName": name}})
}

/// Templates shaped to exhaust something: the stack, the time or the memory.
fn adversarial() -> impl Strategy<Value = Value> {
    prop_oneof![
        // A chain of conditions, each using the next, maybe closed into a circle.
        (1usize..3000, any::<bool>()).prop_map(|(n, circle)| {
            let mut c = Map::new();
            for i in 0..n {
                let next = if i + 1 < n { format!("C{}", i + 1) } else if circle { "C0".into() } else { String::new() };
                c.insert(format!("C{i}"), if next.is_empty() {
                    json!({"Fn::Equals": [1, 1]})
                } else {
                    json!({"Fn::Or": [{"Condition": next}, false]})
                });
            }
            json!({"Conditions": c, "Resources": {"Q": {"Type": "AWS::SQS::Queue", "Condition": "C0"}}})
        }),
        // `Fn::If` nested past the depth limit and below it.
        (1usize..60).prop_map(|n| {
            let v = (0..n).fold(json!("leaf"), |v, _| f("Fn::If", json!(["C", v, "other"])));
            json!({"Conditions": {"C": true}, "Resources": {"Q": queue(v)}})
        }),
        // `Fn::Sub` that names its variable `fanout` times, `levels` deep.
        (1usize..21, 1usize..6).prop_map(|(levels, fanout)| {
            let text = "${a}".repeat(fanout);
            let v = (0..levels).fold(json!("xy"), |v, _| f("Fn::Sub", json!([text, {"a": v}])));
            json!({"Resources": {"Q": queue(v)}})
        }),
        // Nested `Fn::Base64` over a long parameter.
        (1usize..60, 0usize..50_000).prop_map(|(n, len)| {
            let v = (0..n).fold(json!({"Ref": "P"}), |v, _| f("Fn::Base64", v));
            json!({"Parameters": {"P": {"Type": "String", "Default": "p".repeat(len)}},
                   "Resources": {"Q": queue(v)}})
        }),
        // `Fn::Join` of a long parameter, many times, nested.
        (0usize..400_000, 1usize..8, 1usize..4).prop_map(|(len, times, levels)| {
            let v = (0..levels).fold(json!({"Ref": "P"}), |v, _| {
                f("Fn::Join", json!(["", vec![v; times]]))
            });
            json!({"Parameters": {"P": {"Type": "String", "Default": "j".repeat(len)}},
                   "Resources": {"Q": queue(v)}})
        }),
        // A large mapping value used from many resources and outputs.
        (0usize..300_000, 1usize..300).prop_map(|(len, n)| {
            let mut t = json!({"Mappings": {"M": {"k": {"v": "m".repeat(len)}}}, "Resources": {}});
            for i in 0..n {
                t["Resources"][format!("Q{i}")] = queue(f("Fn::FindInMap", json!(["M", "k", "v"])));
            }
            t
        }),
        // `Fn::Select` and `Fn::Cidr` with numbers out of every range.
        ("-?[0-9]{1,30}", "-?[0-9]{1,12}", "-?[0-9]{1,4}").prop_map(|(i, n, bits)| {
            json!({"Resources": {"Q": queue(json!({"Fn::Select": [i, {"Fn::Cidr": ["10.0.0.0/8", n, bits]}]}))}})
        }),
    ]
}

fn clear(stage: &str, e: &TemplateError) -> Outcome {
    // What the plan would have seen: a template that plans names only what exists, in no
    // circle, with functions it supports.
    let static_kind = matches!(
        e.kind,
        ErrorKind::UnresolvedReference
            | ErrorKind::Cycle
            | ErrorKind::MissingParameter
            | ErrorKind::Structure
            | ErrorKind::UnsupportedFunction
            | ErrorKind::UnsupportedTransform
    );
    if static_kind && ["state", "second plan", "deploy"].contains(&stage) {
        return Err(format!("the plan passed, the {stage} found: {e}"));
    }
    let bounded = |s: &str| s.chars().count() <= MAX_MESSAGE_CHARS + 3;
    if e.message.trim().is_empty() || !bounded(&e.message) || !bounded(&e.path) {
        return Err(format!("unclear error: {e:?}"));
    }
    // Errors past the model are about a place in a section of the template.
    let sections = [
        "Resources",
        "Outputs",
        "Conditions",
        "Parameters",
        "Mappings",
        "Transform",
    ];
    let first = e.path.split(['.', '[']).next().unwrap_or_default();
    if stage != "model" && !sections.contains(&first) {
        return Err(format!("an error that names no place in the template: {e}"));
    }
    if stage == "model"
        && e.path.is_empty()
        && !matches!(e.kind, ErrorKind::Structure | ErrorKind::Limit)
    {
        return Err(format!("an error without a path: {e}"));
    }
    if std::env::var("STACKFLOW_FUZZ_DETAIL").is_ok() {
        let m: String = e.message.chars().take(40).collect();
        return Ok(format!("{stage} error: {:?} {m}", e.kind));
    }
    Ok(format!("{stage} error: {:?}", e.kind))
}

fn pseudo() -> Pseudo {
    Pseudo {
        region: "us-east-1".into(),
        account_id: Some("123456789012".into()),
        stack_name: "fuzz".into(),
        stack_id: None,
    }
}

/// Plans `t` against `state`; what it plans must go to JSON and come back.
fn plan_once(
    t: &Template,
    params: &stackflow_core::intrinsics::BoundParameters,
    state: &CurrentState,
) -> Result<(), TemplateError> {
    let p = plan(&PlanInput {
        stack: "fuzz",
        template: t,
        parameters: params,
        pseudo: &pseudo(),
        state,
        env: &SyntheticEnvironment,
        digest_key: None,
        secret_digests: None,
    })?;
    let text = serde_json::to_string(&p).expect("a plan serializes");
    if let Err(e) = serde_json::from_str::<Value>(&text) {
        panic!("a plan that cannot be read back: {e}");
    }
    Ok(())
}

/// Every resource the deploy creates resolved as the deploy resolves it (every value
/// known).
fn deploy_resolve(
    t: &Template,
    params: &stackflow_core::intrinsics::BoundParameters,
) -> Result<(), TemplateError> {
    let pseudo = pseudo();
    let conditions = evaluate_conditions(t, params, &pseudo, &SyntheticEnvironment)?;
    let r = Resolver::new(
        t,
        params,
        &pseudo,
        &conditions,
        &SyntheticEnvironment,
        Mode::Deploy,
    );
    for (id, res) in &t.resources {
        if res.condition.as_ref().is_none_or(|c| conditions[c]) {
            r.resolve_properties(id)?;
        }
    }
    Ok(())
}

fn check(v: &Value) -> Outcome {
    let t = match Template::from_value(v) {
        Ok(t) => t,
        Err(e) => return clear("model", &e),
    };
    let params = match bind_parameters(&t, &IndexMap::new()) {
        Ok(p) => p,
        Err(e) => return clear("parameters", &e),
    };
    if let Err(e) = plan_once(&t, &params, &CurrentState::default()) {
        return clear("plan", &e);
    }
    let state = match synthetic_state(&t, &params, &pseudo()) {
        Ok(s) => s,
        Err(e) => return clear("state", &e),
    };
    if let Err(e) = plan_once(&t, &params, &state) {
        return clear("second plan", &e);
    }
    match deploy_resolve(&t, &params) {
        Ok(()) => Ok("planned".to_string()),
        Err(e) => clear("deploy", &e),
    }
}

#[test]
fn fuzz_plan() {
    let templates = prop_oneof![
        3 => random_template(),
        2 => tidy_template(),
        1 => adversarial(),
    ];
    fuzz_support::fuzz("plan", 200, templates, check);
}
