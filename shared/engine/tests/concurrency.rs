//! Two runs of one stack that overlap: the second plans from the log as it is once it
//! holds the lock, never from what it read before.

mod support;

use std::sync::Arc;

use serde_json::Value;
use serde_json::json;
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::StackOutputRef;
use stackflow_engine::lookups::{LookupError, Lookups};
use stackflow_engine::{StackStatus, deploy_stack};
use stackflow_providers::provider::BoxFuture;
use support::{FakeLookups, Gate, Rig, deploy_ok, input, options};

/// Lookups that stop at `gate` on their first availability zone question.
struct Stalled {
    inner: FakeLookups,
    gate: Arc<Gate>,
    once: std::sync::atomic::AtomicBool,
}

impl Lookups for Stalled {
    fn availability_zones<'a>(
        &'a self,
        region: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, LookupError>> {
        Box::pin(async move {
            if !self.once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.gate.pass().await;
            }
            self.inner.availability_zones(region).await
        })
    }
    fn cloudformation_export<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        self.inner.cloudformation_export(name)
    }
    fn cloudformation_output<'a>(
        &'a self,
        r: &'a StackOutputRef,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        self.inner.cloudformation_output(r)
    }
    fn ssm_parameter<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        self.inner.ssm_parameter(name)
    }
    fn dynamic_reference<'a>(
        &'a self,
        reference: &'a DynamicReference,
    ) -> BoxFuture<'a, Result<String, LookupError>> {
        self.inner.dynamic_reference(reference)
    }
}

#[tokio::test]
async fn a_deploy_that_finishes_while_another_plans_leaves_no_duplicate() {
    let rig = Rig::new();
    let template = json!({
        "Resources": {
            "Topic": {
                "Type": "AWS::SNS::Topic",
                "Properties": { "DisplayName": {"Fn::Select": [0, {"Fn::GetAZs": ""}]} }
            }
        }
    });
    let v1 = input("app", template);
    // The slow deploy reads the (empty) stack, then stalls in its lookups...
    let gate = Arc::new(Gate::new());
    let stalled = support::build_engine(
        rig.store.clone(),
        rig.cloud.clone(),
        Arc::new(Stalled {
            inner: FakeLookups::default(),
            gate: gate.clone(),
            once: Default::default(),
        }),
        rig.lines.clone(),
        rig.holders_gone.clone(),
    );
    let slow = tokio::spawn(deploy_stack(stalled, v1.clone(), options()));
    gate.entered().await;
    // ...while another deploy of the same template runs to its end.
    deploy_ok(&rig, &v1).await;
    gate.release();
    let report = slow.await.unwrap().unwrap();
    // The slow one holds the lock next, sees the topic, and makes nothing new.
    assert!(
        matches!(
            report.status,
            StackStatus::Succeeded | StackStatus::NoChanges
        ),
        "{report:#?}"
    );
    assert_eq!(report.created, 0, "{report:#?}");
    assert_eq!(rig.cloud.physical_ids("app", "Topic").len(), 1);
    let state = rig.state("app").await;
    assert!(state.lock.is_none());
    assert_eq!(state.resources.len(), 1);
}
