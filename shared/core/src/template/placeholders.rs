//! Placeholders that nothing will substitute: `${AWS::AccountId}`, `${AWS::Region}` and
//! the other pseudo parameters written as text in a resource's properties or an output,
//! outside the template string of an `Fn::Sub`. CloudFormation sends such text to AWS as
//! it is written (a bucket named `stackflow-${AWS::AccountId}-...` does not exist), so a
//! template holding one is refused before any AWS call, naming each place.
//!
//! Only the `AWS::` pseudo parameters are looked for: other `${...}` text is legitimate
//! outside `Fn::Sub` (a state machine's `DefinitionString` filled by
//! `DefinitionSubstitutions`, a shell variable in a script, a JavaScript template literal
//! in inline code), and `${AWS::...}` is valid in none of those.

use indexmap::IndexMap;
use serde_json::Value;

use super::{NestedTemplate, StackTemplate, Template};
use crate::error::{ErrorKind, Path, Result, TemplateError};

/// What a pseudo parameter's placeholder starts with.
const PSEUDO_PLACEHOLDER: &str = "${AWS::";

/// The places of `template` (resource properties, output values and export names) where
/// text holds a pseudo parameter's placeholder outside an `Fn::Sub` template string, in
/// template order.
pub fn literal_placeholders(template: &Template) -> Vec<Path> {
    let mut found = Vec::new();
    for (id, r) in &template.resources {
        let at = Path::from_keys(["Resources", id.as_str(), "Properties"]);
        for (key, v) in &r.properties {
            walk(v, &at.key(key), &mut found);
        }
    }
    for (id, o) in &template.outputs {
        let at = Path::from_keys(["Outputs", id.as_str()]);
        walk(&o.value, &at.key("Value"), &mut found);
        if let Some(name) = &o.export_name {
            walk(name, &at.key("Export").key("Name"), &mut found);
        }
    }
    found
}

/// Fails when [`literal_placeholders`] finds any, naming the first and how many more.
pub fn check_literal_placeholders(template: &Template) -> Result<()> {
    let found = literal_placeholders(template);
    let Some(first) = found.first() else {
        return Ok(());
    };
    let more = match found.len() - 1 {
        0 => String::new(),
        1 => " (and 1 more place)".to_string(),
        n => format!(" (and {n} more places)"),
    };
    Err(TemplateError::new(
        ErrorKind::InvalidFunction,
        first,
        format!(
            "this text holds a `${{AWS::...}}` placeholder outside Fn::Sub, which AWS would \
             receive as written{more}"
        ),
    )
    .with_hint(
        "wrap the value in {\"Fn::Sub\": \"...\"} so the placeholder is substituted, or \
         write the account, region or partition out",
    ))
}

/// [`check_literal_placeholders`] over `stacks` and all their nested stacks' templates,
/// each error naming its template file.
pub fn check_stacks_placeholders(stacks: &[StackTemplate]) -> Result<()> {
    fn nested(n: &IndexMap<String, NestedTemplate>) -> Result<()> {
        for t in n.values() {
            check_literal_placeholders(&t.template).map_err(|e| e.in_file(t.file.display()))?;
            nested(&t.nested)?;
        }
        Ok(())
    }
    for s in stacks {
        check_literal_placeholders(&s.template).map_err(|e| e.in_file(s.file.display()))?;
        nested(&s.nested)?;
    }
    Ok(())
}

fn walk(v: &Value, at: &Path, found: &mut Vec<Path>) {
    match v {
        Value::String(s) if s.contains(PSEUDO_PLACEHOLDER) => found.push(at.clone()),
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                walk(x, &at.index(i), found);
            }
        }
        Value::Object(m) => {
            if m.len() == 1
                && let Some(arg) = m.get("Fn::Sub")
            {
                let at = at.key("Fn::Sub");
                match arg {
                    // The template string is substituted; its variables' values are not.
                    Value::String(_) => {}
                    Value::Array(args) => {
                        if let Some(Value::Object(vars)) = args.get(1) {
                            let at = at.index(1);
                            for (name, x) in vars {
                                walk(x, &at.key(name), found);
                            }
                        }
                    }
                    other => walk(other, &at, found),
                }
                return;
            }
            for (k, x) in m {
                walk(x, &at.key(k), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(v: Value) -> Template {
        Template::from_value(&v).unwrap()
    }

    #[test]
    fn placeholders_outside_fn_sub_are_found_with_their_paths() {
        let t = template(json!({
            "Resources": {
                "Layer": {"Type": "AWS::Lambda::LayerVersion", "Properties": {
                    "Content": {"S3Bucket": "stackflow-${AWS::AccountId}-${AWS::Region}",
                                "S3Key": "k.zip"}}},
                "Grant": {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": {
                    "Statement": [{"Resource": [
                        {"Fn::Join": ["", ["arn:", "${AWS::Partition}", ":s3:::b"]]},
                        {"Fn::Sub": "arn:${AWS::Partition}:s3:::b/*"},
                        {"Fn::Sub": ["${X}", {"X": "${AWS::Region}"}]}]}]}}},
                "Fine": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {
                    "DefinitionString": "{\"Resource\": \"${FunctionArn}\"}",
                    "DefinitionSubstitutions": {"FunctionArn": "arn"}}}
            },
            "Outputs": {"Bucket": {"Value": "stackflow-${AWS::AccountId}",
                                   "Export": {"Name": {"Fn::Sub": "${AWS::StackName}-b"}}}}
        }));
        let found: Vec<String> = literal_placeholders(&t)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                "Resources.Layer.Properties.Content.S3Bucket",
                "Resources.Grant.Properties.PolicyDocument.Statement[0].Resource[0].Fn::Join[1][1]",
                "Resources.Grant.Properties.PolicyDocument.Statement[0].Resource[2].Fn::Sub[1].X",
                "Outputs.Bucket.Value",
            ]
        );
        let e = check_literal_placeholders(&t).unwrap_err();
        assert_eq!(e.path, "Resources.Layer.Properties.Content.S3Bucket");
        assert!(e.message.contains("and 3 more places"), "{e}");
        assert!(e.hint.as_deref().unwrap().contains("Fn::Sub"), "{e}");
        assert_eq!(e.kind, ErrorKind::InvalidFunction);
    }

    #[test]
    fn a_template_without_them_passes() {
        let t = template(json!({"Resources": {"Q": {"Type": "AWS::SQS::Queue",
            "Properties": {"QueueName": {"Fn::Sub": "${AWS::StackName}-q"},
                           "Tags": [{"Key": "k", "Value": "${NotPseudo}"}]}}}}));
        assert_eq!(check_literal_placeholders(&t), Ok(()));
    }
}
