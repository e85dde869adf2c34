//! How a deploy records what it resolved: properties and attributes with the values
//! computed from secrets masked (see [`crate::secrets`]), and the attribute values kept
//! sealed in memory for `Fn::GetAtt` during the deploy.

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_core::secrets::Masking;
use stackflow_events::EventStore;

use super::Deployment;
use crate::secrets::{as_map, mask_attributes, sensitive};

impl<S: EventStore + 'static> Deployment<S> {
    /// Runs `f` with this stack's [`Masking`].
    pub(crate) fn with_masking<T>(&self, f: impl FnOnce(&Masking<'_>) -> T) -> T {
        let state = self.recorder.state();
        let is_sensitive = |r: &str, a: &str| sensitive(&state, &self.sealed, r, a);
        f(&Masking::new(
            &self.input.parameters,
            self.digest_key.as_ref(),
            &is_sensitive,
        ))
    }

    /// Resource `id`'s resolved properties as they are recorded (values computed from
    /// secrets replaced by their digests), and those values as sent, to mask messages.
    pub(crate) fn record_properties(
        &self,
        id: &str,
        resolved: &Map<String, Value>,
    ) -> (Map<String, Value>, Vec<String>) {
        let template = self
            .input
            .template
            .resources
            .get(id)
            .map(|r| Value::Object(r.properties.clone()))
            .unwrap_or(Value::Null);
        let resolved = Value::Object(resolved.clone());
        self.with_masking(|m| {
            (
                as_map(m.mask(&template, &resolved)),
                m.tainted_values(&template, &resolved),
            )
        })
    }

    /// The attributes a provider reported for `id`, as they are recorded: all masked when
    /// the provider said they are secret, else each value that holds one of `needles`
    /// (the call's resolved secrets and tainted values). The values masked are kept
    /// sealed for `Fn::GetAtt` during this deploy.
    pub(crate) fn record_attributes(
        &self,
        id: &str,
        attributes: IndexMap<String, Value>,
        all_secret: bool,
        needles: &[String],
    ) -> IndexMap<String, Value> {
        let recorded = self.with_masking(|m| mask_attributes(m, &attributes, all_secret, needles));
        let sealed: IndexMap<String, Value> = attributes
            .into_iter()
            .filter(|(k, v)| recorded.get(k) != Some(v))
            .collect();
        self.seal(id, sealed);
        recorded
    }

    /// Keeps `values` of resource `id`'s attributes for `Fn::GetAtt` during this deploy.
    pub(crate) fn seal(&self, id: &str, values: IndexMap<String, Value>) {
        if !values.is_empty() {
            let mut all = self.sealed.read();
            all.entry(id.to_string()).or_default().extend(values);
        }
    }
}
