//! The end of `--migrate-from-cloudformation`: once stackflow records the resources, the
//! CloudFormation stack lets go of them. Each stack of the source (the root first, then
//! its nested stacks, each updated on its own) is updated to its current template with
//! `DeletionPolicy: Retain` and `UpdateReplacePolicy: Retain` on every resource stackflow
//! adopted; then the root is deleted, which deletes its nested stacks and leaves every
//! retained resource in place. Nothing is touched while the source holds a resource that
//! deleting it would delete (one stackflow did not adopt), nor when the import recorded
//! nothing; a failure stops there and says where things are. stackflow never deletes a
//! resource itself here.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use stackflow_core::template::parse_text;
use stackflow_events::EventStore;
use stackflow_events::event::ProviderKind;
use stackflow_events::projection::ResourceState;
use stackflow_providers::lookups::MAX_TEMPLATE_URL_SIZE;
use stackflow_providers::provider::CurrentState;

use super::migrate::{MigrateFrom, Source, live, recorded_physical_ids};
use crate::engine::Engine;
use crate::keys::NESTED_STACK_TYPE;

/// What became of the CloudFormation stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigrationOutcome {
    /// Retained and deleted: stackflow alone manages the resources.
    Deleted,
    /// Left as it was (nothing recorded, or resources stackflow did not adopt).
    Untouched,
    /// Setting Retain failed: the stack still manages the resources.
    RetainFailed,
    /// Retain was set everywhere, but deleting the stack failed.
    DeleteFailed,
    /// The stack was deleted, and took adopted resources with it although Retain was set
    /// (read back after the delete: they are gone).
    ResourcesLost,
}

/// The CloudFormation side of a migration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationReport {
    /// The source stack.
    pub source: String,
    /// What became of it.
    pub outcome: MigrationOutcome,
    /// The resources given `DeletionPolicy: Retain`, as `stack/logical id`.
    pub retained: Vec<String>,
    /// Adopted resources that were gone once the stack was deleted, as `logical id
    /// (physical id)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<String>,
    /// What happened, and what to do when it did not finish.
    pub message: String,
}

impl MigrationReport {
    fn new(source: &Source, outcome: MigrationOutcome, message: String) -> Self {
        MigrationReport {
            source: source.stack.clone(),
            outcome,
            retained: vec![],
            lost: vec![],
            message,
        }
    }
}

/// What to do with each stack of the source: the logical ids to retain, by stack.
struct Decision<'a> {
    retain: Vec<(&'a Source, Vec<String>)>,
    /// Resources deleting the stack would delete: `logical id (type, physical id) in stack`.
    blocking: Vec<String>,
    /// Custom resources retained without being adopted.
    custom: Vec<String>,
}

fn decide<'a>(source: &'a Source, adopted: &HashSet<String>) -> Decision<'a> {
    let mut decision = Decision {
        retain: vec![],
        blocking: vec![],
        custom: vec![],
    };
    for stack in source.stacks() {
        let mut ids = Vec::new();
        for r in stack.resources.iter().filter(|r| live(r)) {
            let ty = r.resource_type.as_str();
            let physical = r.physical_id.clone().unwrap_or_default();
            if ty == NESTED_STACK_TYPE || ty == "AWS::CDK::Metadata" {
                continue;
            }
            if adopted.contains(&physical) {
                ids.push(r.logical_id.clone());
            } else if ty.starts_with("Custom::") || ty == "AWS::CloudFormation::CustomResource" {
                decision
                    .custom
                    .push(format!("{} in {}", r.logical_id, stack.stack));
                ids.push(r.logical_id.clone());
            } else {
                decision.blocking.push(format!(
                    "{} ({ty}, {physical}) in {}",
                    r.logical_id, stack.stack
                ));
            }
        }
        decision.retain.push((stack, ids));
    }
    decision
}

/// Why `Retain` could not be set in a CloudFormation stack's template. `what` names the
/// template.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RetainError {
    /// The template could not be read or parsed.
    #[error(transparent)]
    Template(#[from] stackflow_core::error::TemplateError),
    #[error("{what} has no Resources")]
    NoResources { what: String },
    #[error("{what} does not declare {id}")]
    Undeclared { what: String, id: String },
    #[error("{what} cannot be written as JSON: {message}")]
    Json { what: String, message: String },
    #[error(
        "{what} with Retain is {bytes} bytes, more than the {MAX_TEMPLATE_URL_SIZE} UpdateStack \
         takes (from S3)"
    )]
    TooLarge { what: String, bytes: usize },
    /// CloudFormation's answer to reading or updating it.
    #[error(transparent)]
    CloudFormation(#[from] stackflow_providers::lookups::LookupError),
}

/// `text` (a template, JSON or YAML) as JSON with `DeletionPolicy` and
/// `UpdateReplacePolicy` `Retain` on each of `ids`.
pub(crate) fn with_retain(text: &str, stack: &str, ids: &[String]) -> Result<String, RetainError> {
    let what = format!("the template of CloudFormation stack {stack}");
    let mut template = parse_text(text, &what)?;
    let resources = template
        .get_mut("Resources")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| RetainError::NoResources { what: what.clone() })?;
    for id in ids {
        let r = resources
            .get_mut(id)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| RetainError::Undeclared {
                what: what.clone(),
                id: id.clone(),
            })?;
        r.insert("DeletionPolicy".into(), "Retain".into());
        r.insert("UpdateReplacePolicy".into(), "Retain".into());
    }
    // A body over UpdateStack's inline limit goes by S3 (the lookups' template bucket);
    // one over what S3 can give it cannot be sent at all.
    let body = serde_json::to_string(&template).map_err(|e| RetainError::Json {
        what: what.clone(),
        message: e.to_string(),
    })?;
    if body.len() > MAX_TEMPLATE_URL_SIZE {
        return Err(RetainError::TooLarge {
            what,
            bytes: body.len(),
        });
    }
    Ok(body)
}

/// Retains what `stack` (stackflow's) adopted from `source`, then deletes the source.
pub(crate) async fn retire<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    from: &MigrateFrom,
    source: &Source,
    stack: &str,
) -> MigrationReport {
    let adopted: HashSet<String> = match recorded_physical_ids(engine, stack).await {
        Ok(ids) => ids.into_iter().collect(),
        Err(e) => {
            let why = format!(
                "stackflow's records of stack {stack} could not be read ({e}), so CloudFormation \
                 stack {} is left as it is: run the import again",
                source.stack
            );
            return MigrationReport::new(source, MigrationOutcome::Untouched, why);
        }
    };
    let decision = decide(source, &adopted);
    if let Some(why) = untouched_because(&decision, source, stack) {
        return MigrationReport::new(source, MigrationOutcome::Untouched, why);
    }
    let mut report = MigrationReport::new(source, MigrationOutcome::Deleted, String::new());
    let mut done: Vec<&str> = Vec::new();
    for (s, ids) in &decision.retain {
        if ids.is_empty() {
            continue;
        }
        if let Err(why) = retain_in(from, s, ids).await {
            report.outcome = MigrationOutcome::RetainFailed;
            report.message = retain_failed(source, s, stack, &done, &why.to_string());
            return report;
        }
        done.push(&s.stack);
        report
            .retained
            .extend(ids.iter().map(|id| format!("{}/{id}", s.stack)));
    }
    if let Err(e) = from.cloudformation.delete_stack(&source.stack).await {
        report.outcome = MigrationOutcome::DeleteFailed;
        report.message = format!(
            "{e}. Where things are: stackflow's records of stack {stack} hold the adopted \
             resources, and each of them has DeletionPolicy: Retain in CloudFormation stack \
             {root} (and its nested stacks), so deleting it leaves them in place; stackflow \
             deleted nothing. Fix the cause and delete it yourself (`aws cloudformation \
             delete-stack --stack-name {root}`), or run this import again with --force. Do not \
             update {root} with CloudFormation meanwhile.",
            root = source.stack
        );
        return report;
    }
    report.lost = gone_after_delete(engine, stack).await;
    if !report.lost.is_empty() {
        report.outcome = MigrationOutcome::ResourcesLost;
        report.message = format!(
            "CloudFormation stack {root} was deleted, and it deleted {} resource(s) stackflow \
             adopted although they had DeletionPolicy: Retain (read back after the delete): \
             {}. They are gone from AWS; stackflow's records of stack {stack} still hold them, \
             so `stackflow drift --stack {stack}` reports them deleted and `stackflow deploy` \
             creates them again (their data is not restored: recover it from a backup).",
            report.lost.len(),
            report.lost.join(", "),
            root = source.stack
        );
        return report;
    }
    report.message = format!(
        "CloudFormation stack {} was deleted; the {} resources stackflow adopted were retained \
         (each read back in AWS after the delete) and stackflow alone manages them now.{}",
        source.stack,
        report.retained.len() - decision.custom.len(),
        custom_note(&decision.custom)
    );
    report
}

/// The resources of stackflow's `stack` (and of its nested stacks) that AWS no longer
/// has, read back one by one after the CloudFormation stack was deleted: `logical id
/// (physical id)`. A resource that cannot be read is not counted as gone.
async fn gone_after_delete<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    stack: &str,
) -> Vec<String> {
    let Ok(recorder) =
        crate::recorder::Recorder::load(engine.store.clone(), engine.stream(stack)).await
    else {
        return vec![];
    };
    let resources: Vec<(String, ResourceState)> = recorder
        .state()
        .resources
        .iter()
        .map(|(id, r)| (id.clone(), r.clone()))
        .collect();
    let mut gone = Vec::new();
    for (id, r) in resources {
        if r.provider == ProviderKind::NestedStack {
            gone.extend(Box::pin(gone_after_delete(engine, &r.physical_id)).await);
            continue;
        }
        let request = crate::observe::read_request(stack, &id, &r);
        if crate::observe::read_now(engine, &request, r.provider).await == CurrentState::NotFound {
            gone.push(format!("{id} ({})", r.physical_id));
        }
    }
    gone
}

/// Why the source must be left as it is, if it must.
fn untouched_because(decision: &Decision<'_>, source: &Source, stack: &str) -> Option<String> {
    let retained: usize = decision.retain.iter().map(|(_, ids)| ids.len()).sum();
    if retained == decision.custom.len() {
        return Some(format!(
            "the import recorded nothing from CloudFormation stack {}, so it is left as it is",
            source.stack
        ));
    }
    if decision.blocking.is_empty() {
        return None;
    }
    Some(format!(
        "CloudFormation stack {root} is left as it is (no Retain set, not deleted): deleting \
         it would delete resources stackflow did not adopt: {}. Adopt them (declare them in \
         the template, or pass --resource ID=PHYSICAL for a type that cannot be looked up) \
         and run the import again with --force; stackflow's records of stack {stack} keep \
         what this import adopted meanwhile.",
        decision.blocking.join(", "),
        root = source.stack
    ))
}

fn custom_note(custom: &[String]) -> String {
    if custom.is_empty() {
        return String::new();
    }
    format!(
        " Custom resources were retained too, so that their Delete handlers did not run: {}; \
         stackflow does not import custom resources: the next deploy runs their Create.",
        custom.join(", ")
    )
}

async fn retain_in(from: &MigrateFrom, s: &Source, ids: &[String]) -> Result<(), RetainError> {
    let text = from.cloudformation.current_template(&s.stack).await?;
    let body = with_retain(&text, &s.stack, ids)?;
    from.cloudformation.update_template(&s.stack, body).await?;
    Ok(())
}

fn retain_failed(
    source: &Source,
    failed: &Source,
    stack: &str,
    done: &[&str],
    why: &str,
) -> String {
    let root = &source.stack;
    let already = if done.is_empty() {
        "no stack has Retain set yet".to_string()
    } else {
        format!("Retain is set in {} already", done.join(", "))
    };
    format!(
        "setting DeletionPolicy: Retain in CloudFormation stack {} failed: {why}. Where things \
         are: stackflow's records of stack {stack} hold the adopted resources; CloudFormation \
         stack {root} still exists and still manages them ({already}; {} and the stacks after \
         it are without Retain). stackflow deleted nothing. Do not delete {root} as it is: it \
         would delete them. Fix the cause and run this import again with --force (it adopts \
         the same resources and retries), or set DeletionPolicy: Retain on them yourself \
         before deleting {root}.",
        failed.stack, failed.stack
    )
}
