//! Template text to a JSON value, with YAML short-form tags normalised to the long form.

use serde_json::{Map, Value};

use crate::error::{ErrorKind, Result, TemplateError};

/// Parses a CloudFormation template written in JSON or YAML into a JSON value in the long
/// form (`!Ref X` becomes `{"Ref": "X"}`, `!GetAtt A.B` becomes `{"Fn::GetAtt": ["A", "B"]}`).
///
/// The format is chosen by the first character that is not white space: `{` is JSON,
/// anything else YAML. `source` names the text in errors.
pub fn parse_text(text: &str, source: &str) -> Result<Value> {
    let trimmed = text.trim_start_matches('\u{feff}');
    if trimmed.trim_start().starts_with('{') {
        serde_json::from_str(trimmed).map_err(|e| {
            TemplateError::new(
                ErrorKind::Syntax,
                "",
                format!(
                    "invalid JSON at line {}, column {}: {e}",
                    e.line(),
                    e.column()
                ),
            )
            .in_file(source)
        })
    } else {
        let yaml: yaml_serde::Value = yaml_serde::from_str(trimmed).map_err(|e| {
            let at = e
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            TemplateError::new(ErrorKind::Syntax, "", format!("invalid YAML{at}: {e}"))
                .in_file(source)
        })?;
        yaml_to_json(yaml).map_err(|e| e.in_file(source))
    }
}

/// The long-form function name for a YAML short-form tag (`!Sub` is `Fn::Sub`, `!Ref` is
/// `Ref`, `!Condition` is `Condition`).
fn long_form(tag: &str) -> String {
    match tag {
        "Ref" | "Condition" => tag.to_string(),
        other => format!("Fn::{other}"),
    }
}

fn yaml_to_json(v: yaml_serde::Value) -> Result<Value> {
    use yaml_serde::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => number_to_json(&n),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(yaml_to_json)
                .collect::<Result<Vec<_>>>()?,
        ),
        Y::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                // A non-specific tag (`! "Ref"`) leaves the scalar as it is.
                let k = match k {
                    Y::Tagged(t) if t.tag.to_string().trim_start_matches('!').is_empty() => t.value,
                    k => k,
                };
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    Y::Null => "null".to_string(),
                    other => {
                        return Err(TemplateError::new(
                            ErrorKind::Structure,
                            "",
                            format!("a mapping key must be a plain scalar, found {other:?}"),
                        ));
                    }
                };
                out.insert(key, yaml_to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            if name.is_empty() {
                return yaml_to_json(tagged.value);
            }
            let inner = yaml_to_json(tagged.value)?;
            let arg = if name == "GetAtt" {
                match inner {
                    // `!GetAtt Resource.Attribute`: split at the first dot; attribute names
                    // such as `Outputs.Name` or `Endpoint.Address` keep their own dots.
                    Value::String(s) => match s.split_once('.') {
                        Some((res, attr)) => Value::Array(vec![res.into(), attr.into()]),
                        None => Value::String(s),
                    },
                    other => other,
                }
            } else {
                inner
            };
            let mut out = Map::new();
            out.insert(long_form(name), arg);
            Value::Object(out)
        }
    })
}

fn number_to_json(n: &yaml_serde::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::from(i)
    } else if let Some(u) = n.as_u64() {
        Value::from(u)
    } else if let Some(f) = n.as_f64() {
        serde_json::Number::from_f64(f)
            .map(Value::Number)
            // .inf and .nan have no JSON number: keep their YAML spelling.
            .unwrap_or_else(|| Value::String(n.to_string()))
    } else {
        Value::String(n.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(text: &str) -> Value {
        parse_text(text, "t.yaml").unwrap()
    }

    #[test]
    fn every_short_form_tag_becomes_the_long_form() {
        let v = yaml(
            r#"
A: !Ref X
B: !GetAtt Res.Arn
C: !GetAtt [Res, Arn]
D: !GetAtt Stack.Outputs.Name
E: !Sub "${X}-y"
F: !Sub ["${a}", {a: !Ref X}]
G: !Join [",", [a, b]]
H: !Select [0, !GetAZs ""]
I: !Split [",", "a,b"]
J: !Base64 text
K: !If [Cond, a, b]
L: !Equals [a, b]
M: !And [!Condition C1, !Not [!Condition C2]]
N: !Or [!Condition C1, !Condition C2]
O: !FindInMap [M, K1, K2]
P: !Cidr ["10.0.0.0/16", 2, 8]
Q: !ImportValue Export
R: !GetStackOutput {StackName: s, OutputName: o}
S: !Transform {Name: AWS::Include, Parameters: {Location: x}}
T: !ToJsonString {a: 1}
U: {! "Ref": X}
"#,
        );
        assert_eq!(v["A"], json!({"Ref": "X"}));
        assert_eq!(v["B"], json!({"Fn::GetAtt": ["Res", "Arn"]}));
        assert_eq!(v["C"], json!({"Fn::GetAtt": ["Res", "Arn"]}));
        assert_eq!(v["D"], json!({"Fn::GetAtt": ["Stack", "Outputs.Name"]}));
        assert_eq!(v["E"], json!({"Fn::Sub": "${X}-y"}));
        assert_eq!(v["F"], json!({"Fn::Sub": ["${a}", {"a": {"Ref": "X"}}]}));
        assert_eq!(v["G"], json!({"Fn::Join": [",", ["a", "b"]]}));
        assert_eq!(v["H"], json!({"Fn::Select": [0, {"Fn::GetAZs": ""}]}));
        assert_eq!(v["I"], json!({"Fn::Split": [",", "a,b"]}));
        assert_eq!(v["J"], json!({"Fn::Base64": "text"}));
        assert_eq!(v["K"], json!({"Fn::If": ["Cond", "a", "b"]}));
        assert_eq!(v["L"], json!({"Fn::Equals": ["a", "b"]}));
        assert_eq!(
            v["M"],
            json!({"Fn::And": [{"Condition": "C1"}, {"Fn::Not": [{"Condition": "C2"}]}]})
        );
        assert_eq!(
            v["N"],
            json!({"Fn::Or": [{"Condition": "C1"}, {"Condition": "C2"}]})
        );
        assert_eq!(v["O"], json!({"Fn::FindInMap": ["M", "K1", "K2"]}));
        assert_eq!(v["P"], json!({"Fn::Cidr": ["10.0.0.0/16", 2, 8]}));
        assert_eq!(v["Q"], json!({"Fn::ImportValue": "Export"}));
        assert_eq!(
            v["R"],
            json!({"Fn::GetStackOutput": {"StackName": "s", "OutputName": "o"}})
        );
        assert_eq!(
            v["S"],
            json!({"Fn::Transform": {"Name": "AWS::Include", "Parameters": {"Location": "x"}}})
        );
        assert_eq!(v["T"], json!({"Fn::ToJsonString": {"a": 1}}));
        assert_eq!(v["U"], json!({"Ref": "X"}));
    }

    #[test]
    fn yaml_quirks_follow_cloudformation() {
        let v = yaml("AWSTemplateFormatVersion: 2010-09-09\nOn: yes\nN: 30\nF: 1.5\n");
        assert_eq!(v["AWSTemplateFormatVersion"], json!("2010-09-09"));
        // YAML 1.2: `yes` and `On` are strings, as in CloudFormation.
        assert_eq!(v["On"], json!("yes"));
        assert_eq!(v["N"], json!(30));
        assert_eq!(v["F"], json!(1.5));
    }

    #[test]
    fn json_is_detected_and_order_kept() {
        let v = parse_text(r#" {"b": 1, "a": {"Ref": "X"}}"#, "t.json").unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, vec!["b", "a"]);
    }

    #[test]
    fn syntax_errors_name_file_and_position() {
        let e = parse_text("{\"a\": }", "bad.json").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Syntax);
        assert!(
            e.to_string()
                .starts_with("bad.json: invalid JSON at line 1"),
            "{e}"
        );
        let e = parse_text("a: [1, 2\nb: 3", "bad.yaml").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Syntax);
        assert!(e.to_string().contains("bad.yaml: invalid YAML"), "{e}");
    }
}
