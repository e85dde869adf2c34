//! Synthetic histories for benchmarks and tests: realistic streams of many events.

use serde_json::json;
use stackflow_core::template::Policy;

use crate::event::{Baseline, Event, NewEvent, Operation, ProviderKind, ResourceRecord};

/// A history of `n` events (rounded down to whole deploys) for one stack: deploys of 100
/// resources each, every resource announced by an intent and then created or updated,
/// with a baseline, in the shape the engine writes.
pub fn history(n: usize) -> Vec<NewEvent> {
    let mut out = Vec::with_capacity(n);
    let mut deploy = 0;
    while out.len() + 203 <= n.max(203) && out.len() < n {
        deploy += 1;
        let d = format!("d{deploy}");
        out.push(NewEvent::new(
            format!("{d}/start"),
            Event::DeployStarted {
                deploy_id: d.clone(),
                who: "bench@host".into(),
                template_digest: format!("digest-{deploy}"),
                parameters: [("Env".to_string(), json!("prod"))].into(),
                no_rollback: false,
                stack_id: None,
            },
        ));
        for r in 0..100 {
            let id = format!("Queue{r}");
            let op = if deploy == 1 {
                Operation::Create
            } else {
                Operation::Update
            };
            out.push(NewEvent::new(
                format!("{d}/{id}/intent"),
                Event::ResourceIntent {
                    deploy_id: d.clone(),
                    logical_id: id.clone(),
                    resource_type: "AWS::SQS::Queue".into(),
                    operation: op,
                    token: format!("{d}-{id}"),
                    provider: ProviderKind::Sdk,
                    physical_id: None,
                    properties: None,
                },
            ));
            let resource = ResourceRecord {
                logical_id: id.clone(),
                resource_type: "AWS::SQS::Queue".into(),
                physical_id: format!("https://sqs.us-east-1.amazonaws.com/123456789012/q{r}"),
                properties: json!({
                    "QueueName": format!("q{r}"),
                    "VisibilityTimeout": 30 + deploy,
                    "Tags": [{"Key": "deploy", "Value": d}]
                })
                .as_object()
                .expect("object")
                .clone(),
                attributes: [(
                    "Arn".to_string(),
                    json!(format!("arn:aws:sqs:us-east-1:123456789012:q{r}")),
                )]
                .into(),
                dependencies: if r > 0 {
                    vec![format!("Queue{}", r - 1)]
                } else {
                    vec![]
                },
                provider: ProviderKind::Sdk,
                deletion_policy: Some(Policy::Delete),
                update_replace_policy: None,
                secret_digest: None,
            };
            let baseline = Some(Baseline::Recorded {
                observed: resource.properties.clone(),
            });
            let event = if deploy == 1 {
                Event::ResourceCreated {
                    deploy_id: d.clone(),
                    resource,
                    replaces: None,
                    baseline,
                }
            } else {
                let previous_properties = resource.properties.clone();
                Event::ResourceUpdated {
                    deploy_id: d.clone(),
                    resource,
                    previous_properties,
                    baseline,
                }
            };
            out.push(NewEvent::new(format!("{d}/{id}/done"), event));
        }
        out.push(NewEvent::new(
            format!("{d}/completed"),
            Event::DeployCompleted {
                deploy_id: d.clone(),
                outputs: [("Url".to_string(), json!("https://example"))].into(),
                exports: Default::default(),
                imports: vec![],
            },
        ));
        out.push(NewEvent::new(
            format!("{d}/unlocked"),
            Event::LockReleased { deploy_id: d },
        ));
    }
    out.truncate(n);
    out
}
