//! The AWS lookups a template's intrinsic functions need (availability zones, other
//! stacks' exports and outputs, SSM parameters, dynamic references), and how they are
//! fetched before the (synchronous) resolver runs.
//!
//! The resolver of `stackflow-core` asks an [`Environment`] synchronously. AWS answers
//! asynchronously, so a stack's lookups are collected first: the template is resolved in
//! plan mode with an environment that answers nothing and writes down every question
//! ([`Questions`]); the questions are then answered through [`Lookups`] (all at once), and
//! the answers ([`Answers`]) serve every later resolution of that deploy.

use std::collections::BTreeSet;
use std::sync::Mutex;

use indexmap::IndexMap;
use serde_json::Value;
use stackflow_core::intrinsics::{Environment, StackOutputRef};
pub use stackflow_providers::lookups::{
    CloudFormationSource, DeployedParameters, LookupError, Lookups, NoLookups, SourceResource,
};

/// The lookups a template asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Questions {
    /// Regions whose availability zones are asked for.
    pub regions: BTreeSet<String>,
    /// Export names.
    pub exports: BTreeSet<String>,
    /// Stack outputs.
    pub outputs: Vec<StackOutputRef>,
    /// SSM parameter names.
    pub ssm: BTreeSet<String>,
}

impl Questions {
    /// True when nothing is asked.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
            && self.exports.is_empty()
            && self.outputs.is_empty()
            && self.ssm.is_empty()
    }
}

/// The answers to a template's lookups; an [`Environment`] for everything but resources.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Answers {
    /// Availability zones by region.
    pub zones: IndexMap<String, Vec<String>>,
    /// Export values by name (absent: no such export).
    pub exports: IndexMap<String, Value>,
    /// Stack outputs.
    pub outputs: Vec<(StackOutputRef, Value)>,
    /// SSM parameter values by name.
    pub ssm: IndexMap<String, Value>,
    /// The keyed digests of what each resource's dynamic references resolve to now (see
    /// [`crate::rotation`]); digests only, never a value.
    #[serde(default)]
    pub secret_digests: IndexMap<String, String>,
}

impl Answers {
    /// The questions of `asked` that these answers do not cover yet.
    pub fn missing(&self, asked: &Questions, tried: &Questions) -> Questions {
        Questions {
            regions: asked
                .regions
                .iter()
                .filter(|r| !self.zones.contains_key(*r) && !tried.regions.contains(*r))
                .cloned()
                .collect(),
            exports: asked
                .exports
                .iter()
                .filter(|e| !self.exports.contains_key(*e) && !tried.exports.contains(*e))
                .cloned()
                .collect(),
            outputs: asked
                .outputs
                .iter()
                .filter(|o| {
                    !self.outputs.iter().any(|(k, _)| k == *o) && !tried.outputs.contains(o)
                })
                .cloned()
                .collect(),
            ssm: asked
                .ssm
                .iter()
                .filter(|s| !self.ssm.contains_key(*s) && !tried.ssm.contains(*s))
                .cloned()
                .collect(),
        }
    }
}

impl Environment for Answers {
    fn resource_ref(&self, _: &str) -> Option<Value> {
        None
    }
    fn resource_attribute(&self, _: &str, _: &str) -> Option<Value> {
        None
    }
    fn availability_zones(&self, region: &str) -> Option<Vec<String>> {
        self.zones.get(region).cloned()
    }
    fn import_value(&self, name: &str) -> Option<Value> {
        self.exports.get(name).cloned()
    }
    fn stack_output(&self, r: &StackOutputRef) -> Option<Value> {
        self.outputs
            .iter()
            .find_map(|(k, v)| (k == r).then(|| v.clone()))
    }
    fn ssm_parameter(&self, name: &str) -> Option<Value> {
        self.ssm.get(name).cloned()
    }
}

/// An environment that answers from [`Answers`] and writes down every lookup question it
/// cannot answer (resources are answered by `inner`).
pub struct Recording<'a> {
    /// Answers resources (the stack's state) and what is already known.
    pub inner: &'a dyn Environment,
    /// The questions asked that `inner` could not answer.
    pub asked: Mutex<Questions>,
}

impl<'a> Recording<'a> {
    /// Records the questions `inner` cannot answer.
    pub fn new(inner: &'a dyn Environment) -> Self {
        Recording {
            inner,
            asked: Mutex::new(Questions::default()),
        }
    }

    /// The questions asked.
    pub fn into_questions(self) -> Questions {
        self.asked.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, f: impl FnOnce(&mut Questions)) {
        let mut q = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut q);
    }
}

impl Environment for Recording<'_> {
    fn resource_ref(&self, id: &str) -> Option<Value> {
        self.inner.resource_ref(id)
    }
    fn resource_attribute(&self, id: &str, attr: &str) -> Option<Value> {
        self.inner.resource_attribute(id, attr)
    }
    fn availability_zones(&self, region: &str) -> Option<Vec<String>> {
        let v = self.inner.availability_zones(region);
        if v.is_none() {
            self.note(|q| {
                q.regions.insert(region.to_string());
            });
        }
        v
    }
    fn import_value(&self, name: &str) -> Option<Value> {
        let v = self.inner.import_value(name);
        if v.is_none() {
            self.note(|q| {
                q.exports.insert(name.to_string());
            });
        }
        v
    }
    fn stack_output(&self, r: &StackOutputRef) -> Option<Value> {
        let v = self.inner.stack_output(r);
        if v.is_none() {
            self.note(|q| {
                if !q.outputs.contains(r) {
                    q.outputs.push(r.clone());
                }
            });
        }
        v
    }
    fn ssm_parameter(&self, name: &str) -> Option<Value> {
        let v = self.inner.ssm_parameter(name);
        if v.is_none() {
            self.note(|q| {
                q.ssm.insert(name.to_string());
            });
        }
        v
    }
}
