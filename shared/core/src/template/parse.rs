//! Template text to a JSON value, with YAML short-form tags normalised to the long form.

use serde::de::DeserializeSeed;
use serde_json::Value;

use super::reader::Reader;
use crate::error::{ErrorKind, Result, TemplateError};
use crate::limits::{MAX_TEMPLATE_BYTES, show_bytes};

/// Parses a CloudFormation template written in JSON or YAML into a JSON value in the long
/// form (`!Ref X` becomes `{"Ref": "X"}`, `!GetAtt A.B` becomes `{"Fn::GetAtt": ["A", "B"]}`).
///
/// The format is chosen by the first character that is not white space: `{` is JSON,
/// anything else YAML. `source` names the text in errors. A text longer than
/// [`MAX_TEMPLATE_BYTES`], nested deeper than [`crate::limits::MAX_DEPTH`] or whose YAML
/// aliases expand past [`crate::limits::MAX_EXPANDED_SIZE`] is an [`ErrorKind::Limit`]
/// error.
pub fn parse_text(text: &str, source: &str) -> Result<Value> {
    if text.len() > MAX_TEMPLATE_BYTES {
        return Err(too_large(text.len()).in_file(source));
    }
    let trimmed = text.trim_start_matches('\u{feff}');
    if trimmed.trim_start().starts_with('{') {
        parse_json(trimmed).map_err(|e| e.in_file(source))
    } else {
        parse_yaml(trimmed).map_err(|e| e.in_file(source))
    }
}

/// The error for a template of `len` bytes, past [`MAX_TEMPLATE_BYTES`].
pub(crate) fn too_large(len: usize) -> TemplateError {
    TemplateError::new(
        ErrorKind::Limit,
        "",
        format!(
            "the template is {len} bytes long, more than the {} stackflow reads",
            show_bytes(MAX_TEMPLATE_BYTES)
        ),
    )
    .with_hint("split the stack, or move large values (code, documents) out of the template")
}

fn parse_json(text: &str) -> Result<Value> {
    let reader = Reader::new(false);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = reader
        .root()
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    parsed.map_err(|e| {
        reader.take_error().unwrap_or_else(|| {
            TemplateError::new(
                ErrorKind::Syntax,
                "",
                format!(
                    "invalid JSON at line {}, column {}: {e}",
                    e.line(),
                    e.column()
                ),
            )
        })
    })
}

fn parse_yaml(text: &str) -> Result<Value> {
    let reader = Reader::new(true);
    let de = yaml_serde::Deserializer::from_str(text);
    reader.root().deserialize(de).map_err(|e| {
        reader.take_error().unwrap_or_else(|| {
            let at = e
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            TemplateError::new(ErrorKind::Syntax, "", format!("invalid YAML{at}: {e}"))
        })
    })
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
