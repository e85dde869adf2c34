//! A fake CloudFormation over the fake cloud, for the import tests: stacks with their
//! resources and templates, which delete the fake cloud's resources as CloudFormation
//! would (unless they have `DeletionPolicy: Retain`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use stackflow_engine::lookups::{CloudFormationSource, LookupError, SourceResource};
use stackflow_providers::provider::BoxFuture;

use super::FakeCloud;

pub const STACK_TYPE: &str = "AWS::CloudFormation::Stack";

/// A CloudFormation stack of the fake: its resources and template.
#[derive(Debug, Clone)]
pub struct CfnStack {
    pub resources: Vec<SourceResource>,
    pub template: Value,
}

#[derive(Default)]
pub struct CfnInner {
    pub stacks: BTreeMap<String, CfnStack>,
    pub calls: Vec<String>,
    pub fail_update: Option<String>,
    pub fail_delete: bool,
    /// The delete takes every resource with it, Retain or not (as the emulator's
    /// CloudFormation, which keeps the policies a stack was created with).
    pub ignore_retain: bool,
}

/// CloudFormation, faked over the fake cloud.
pub struct FakeCfn {
    pub cloud: Arc<FakeCloud>,
    pub inner: Mutex<CfnInner>,
}

impl FakeCfn {
    pub fn new(cloud: &Arc<FakeCloud>) -> Arc<FakeCfn> {
        Arc::new(FakeCfn {
            cloud: cloud.clone(),
            inner: Mutex::new(CfnInner::default()),
        })
    }

    /// Stack `name` running `template`, each resource with the physical id `physical`
    /// gives it.
    pub fn stack(&self, name: &str, template: Value, physical: &[(&str, &str)]) {
        let resources = template["Resources"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(id, r)| SourceResource {
                logical_id: id.clone(),
                physical_id: physical
                    .iter()
                    .find(|(l, _)| l == id)
                    .map(|(_, p)| p.to_string()),
                resource_type: r["Type"].as_str().unwrap().to_string(),
                status: "CREATE_COMPLETE".into(),
            })
            .collect();
        self.inner.lock().unwrap().stacks.insert(
            name.into(),
            CfnStack {
                resources,
                template,
            },
        );
    }

    pub fn calls(&self) -> Vec<String> {
        self.inner.lock().unwrap().calls.clone()
    }

    pub fn template(&self, name: &str) -> Option<Value> {
        let inner = self.inner.lock().unwrap();
        inner.stacks.get(name).map(|s| s.template.clone())
    }

    /// Deletes `name` as CloudFormation does: every resource without Retain goes, a
    /// nested stack with its own resources.
    pub fn remove(&self, inner: &mut CfnInner, name: &str) {
        let Some(stack) = inner.stacks.remove(name) else {
            return;
        };
        for r in &stack.resources {
            let policy = &stack.template["Resources"][&r.logical_id]["DeletionPolicy"];
            let Some(p) = &r.physical_id else { continue };
            if policy == "Retain" && !inner.ignore_retain {
                continue;
            }
            if r.resource_type == STACK_TYPE {
                self.remove(inner, p);
            } else {
                self.cloud.remove(p);
            }
        }
    }
}

fn failed(what: String, message: &str) -> LookupError {
    LookupError {
        what,
        message: message.into(),
    }
}

impl CloudFormationSource for FakeCfn {
    fn stack_resources<'a>(
        &'a self,
        stack: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<SourceResource>>, LookupError>> {
        Box::pin(async move {
            let inner = self.inner.lock().unwrap();
            Ok(inner.stacks.get(stack).map(|s| s.resources.clone()))
        })
    }

    fn current_template<'a>(
        &'a self,
        stack: &'a str,
    ) -> BoxFuture<'a, Result<String, LookupError>> {
        Box::pin(async move {
            self.template(stack)
                .map(|t| t.to_string())
                .ok_or_else(|| failed(stack.into(), "no such stack"))
        })
    }

    fn update_template<'a>(
        &'a self,
        stack: &'a str,
        template: String,
    ) -> BoxFuture<'a, Result<(), LookupError>> {
        Box::pin(async move {
            let mut inner = self.inner.lock().unwrap();
            inner.calls.push(format!("update {stack}"));
            if inner.fail_update.as_deref() == Some(stack) {
                return Err(failed(
                    format!("UpdateStack of CloudFormation stack {stack}"),
                    "the stack ended in UPDATE_ROLLBACK_COMPLETE: AccessDenied",
                ));
            }
            let s = inner.stacks.get_mut(stack).expect("the stack exists");
            s.template = serde_json::from_str(&template).expect("JSON");
            Ok(())
        })
    }

    fn delete_stack<'a>(&'a self, stack: &'a str) -> BoxFuture<'a, Result<(), LookupError>> {
        Box::pin(async move {
            let mut inner = self.inner.lock().unwrap();
            inner.calls.push(format!("delete {stack}"));
            if inner.fail_delete {
                return Err(failed(
                    format!("DeleteStack of CloudFormation stack {stack}"),
                    "the stack ended in DELETE_FAILED: export in use",
                ));
            }
            self.remove(&mut inner, stack);
            Ok(())
        })
    }
}
