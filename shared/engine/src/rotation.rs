//! Seeing a rotated secret: each resource records a keyed digest of the values its
//! dynamic references resolved to when it was sent ([`digest`]); before a plan, the same
//! digest of what they resolve to now is taken ([`current_digests`]), and a resource
//! whose digest differs is updated (`Reason::SecretChanged`) although its recorded text
//! (`{{resolve:...}}`) is the same. The values themselves are never recorded.

use indexmap::IndexMap;
use serde_json::Value;
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::{Mode, Resolver, evaluate_conditions};
use stackflow_core::secrets::DigestKey;
use stackflow_events::EventStore;

use crate::engine::Engine;
use crate::lookups::Answers;
use crate::recorder::Recorder;
use crate::stack::{DeployEnv, StackInput};

/// The digest of the values a resource's dynamic references resolved to (`values`: the
/// reference's text to its value); `None` without a key or references.
pub(crate) fn digest(key: Option<&DigestKey>, values: &IndexMap<String, String>) -> Option<String> {
    let key = key?;
    if values.is_empty() {
        return None;
    }
    let mut pairs: Vec<(&String, &String)> = values.iter().collect();
    pairs.sort();
    let mut text = String::new();
    for (reference, value) in pairs {
        text.push_str(reference);
        text.push('\0');
        text.push_str(value);
        text.push('\0');
    }
    Some(key.token(&text))
}

/// The `{{resolve:...}}` texts in each resource's properties as the template resolves
/// now (in plan mode: what is not known yet is left out).
fn references_by_resource<S: EventStore>(
    input: &StackInput,
    rec: &Recorder<S>,
    answers: &Answers,
) -> IndexMap<String, Vec<String>> {
    let state = rec.state();
    let env = DeployEnv {
        state: &state,
        answers,
        sealed: None,
    };
    let mut out = IndexMap::new();
    let Ok(conditions) =
        evaluate_conditions(&input.template, &input.parameters, &input.pseudo, &env)
    else {
        return out;
    };
    let resolver = Resolver::new(
        &input.template,
        &input.parameters,
        &input.pseudo,
        &conditions,
        &env,
        Mode::Plan,
    );
    for id in input.template.resources.keys() {
        let Ok(props) = resolver.resolve_properties(id) else {
            continue;
        };
        let mut texts = Vec::new();
        crate::secrets::collect_references(&Value::Object(props), &mut texts);
        if !texts.is_empty() {
            out.insert(id.clone(), texts);
        }
    }
    out
}

/// Said when a stack holds secrets and the store keeps no digest key: a rotation would
/// otherwise be ignored without a word.
const NO_KEY: &str = "secret rotation is not checked: this store keeps no digest key (a \
    DynamoDB store without --store-bucket has none), so a NoEcho parameter or a \
    {{resolve:...}} secret whose value changed is not seen as a change and the resources \
    that use it are not updated; pass --store-bucket BUCKET (its stackflow/digest.key is \
    made once) to have rotations deployed";

impl<S: EventStore + 'static> Engine<S> {
    /// The digest of what each resource's dynamic references resolve to now, by logical
    /// id. A reference that cannot be read now leaves its resource out (the call that
    /// needs it reports why).
    pub(crate) async fn current_digests(
        &self,
        input: &StackInput,
        rec: &Recorder<S>,
        answers: &Answers,
    ) -> IndexMap<String, String> {
        let key = self.stack_digest_key(&input.name);
        let mut out = IndexMap::new();
        if key.is_none() {
            let secrets = !input.parameters.secret_values().is_empty()
                || !references_by_resource(input, rec, answers).is_empty();
            if secrets {
                self.note(&input.name, NO_KEY);
            }
            return out;
        }
        let mut cache: IndexMap<String, Option<String>> = IndexMap::new();
        for (id, texts) in references_by_resource(input, rec, answers) {
            let mut values = IndexMap::new();
            for text in texts {
                if !cache.contains_key(&text) {
                    let value = match DynamicReference::parse(&text) {
                        Ok(r) => self.lookups.dynamic_reference(&r).await.ok(),
                        Err(_) => None,
                    };
                    cache.insert(text.clone(), value);
                }
                match &cache[&text] {
                    Some(v) => values.insert(text, v.clone()),
                    None => {
                        values.clear();
                        break;
                    }
                };
            }
            if let Some(d) = digest(key.as_ref(), &values) {
                out.insert(id, d);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_follows_the_values_not_their_order() {
        let key = DigestKey::new([3; 32]);
        let a: IndexMap<String, String> = [
            (
                "{{resolve:secretsmanager:a}}".to_string(),
                "one".to_string(),
            ),
            ("{{resolve:ssm:/b}}".to_string(), "two".to_string()),
        ]
        .into();
        let mut b = IndexMap::new();
        b.insert("{{resolve:ssm:/b}}".to_string(), "two".to_string());
        b.insert(
            "{{resolve:secretsmanager:a}}".to_string(),
            "one".to_string(),
        );
        assert_eq!(digest(Some(&key), &a), digest(Some(&key), &b));
        b.insert("{{resolve:ssm:/b}}".to_string(), "three".to_string());
        assert_ne!(digest(Some(&key), &a), digest(Some(&key), &b));
        assert_eq!(digest(None, &a), None);
        assert_eq!(digest(Some(&key), &IndexMap::new()), None);
        let d = digest(Some(&key), &a).unwrap();
        assert!(!d.contains("one") && !d.contains("two"));
    }
}
