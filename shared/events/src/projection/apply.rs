//! The fold: [`StackState::apply`] hands each event to the function that applies its
//! type. The deploy, resource and lock events are applied here; the rollback events in
//! `journal`, the baseline, drift and scrub events in `baseline`.

use indexmap::IndexMap;
use serde_json::Value;

use super::{
    DeployStatus, Journal, JournalEntry, JournalStep, LastDeploy, PendingIntent, Predecessor,
    ResourceState, StackState, pending_key,
};
use crate::event::{
    Baseline, ErrorInfo, Event, Holder, Operation, RefusalCause, ResourceRecord, StoredEvent,
};

impl StackState {
    /// Applies one event. Total: it never fails and never panics.
    pub fn apply(&mut self, stored: &StoredEvent) {
        if stored.seq > self.seq {
            self.seq = stored.seq;
        }
        let seq = stored.seq;
        let at = stored.at.as_str();
        match &stored.event {
            Event::DeployStarted {
                deploy_id,
                who,
                template_digest,
                parameters,
                stack_id,
                ..
            } => {
                if self.stack_id.is_none() {
                    self.stack_id.clone_from(stack_id);
                }
                self.deploy_started(deploy_id, who, template_digest, parameters, at)
            }
            Event::DeployCompleted {
                deploy_id,
                outputs,
                exports,
                imports,
            } => self.deploy_completed(deploy_id, outputs, exports, imports),
            Event::DeployFailed {
                deploy_id, error, ..
            } => self.deploy_failed(deploy_id, error),
            Event::ResourceIntent { .. } => self.resource_intent(&stored.event, seq, at),
            Event::ResourceCreated {
                deploy_id,
                resource,
                replaces,
                baseline,
            } => match replaces {
                None => self.resource_created(seq, deploy_id, resource, baseline),
                Some(old_id) => self.resource_replaced(seq, deploy_id, resource, old_id, baseline),
            },
            Event::ResourceUpdated {
                deploy_id,
                resource,
                baseline,
                ..
            } => self.resource_updated(seq, deploy_id, resource, baseline),
            Event::ResourceDeleted {
                deploy_id,
                logical_id,
                physical_id,
                replaced,
            }
            | Event::ResourceRetained {
                deploy_id,
                logical_id,
                physical_id,
                replaced,
                ..
            } => self.resource_gone(deploy_id, logical_id, physical_id, *replaced),
            Event::ResourceSkipped {
                deploy_id,
                logical_id,
                operation,
                ..
            }
            | Event::ResourceFailed {
                deploy_id,
                logical_id,
                operation,
                ..
            } => self.settle(deploy_id, logical_id, *operation),
            Event::RollbackStarted { deploy_id, .. } => self.rollback_started(deploy_id, at),
            Event::RollbackEntryUndone {
                deploy_id,
                logical_id,
                how,
            } => self.rollback_entry_undone(deploy_id, logical_id, how),
            Event::RollbackFinished {
                deploy_id,
                complete,
                ..
            } => self.rollback_finished(deploy_id, *complete),
            Event::StackDestroyed { .. } => self.stack_destroyed(),
            Event::ResourceImported {
                resource, baseline, ..
            } => self.resource_imported(resource, baseline),
            Event::ImportMarked {
                deploy_id,
                resources,
                ..
            } => self.import_marked(deploy_id, resources),
            Event::BaselineRecorded {
                logical_id,
                baseline,
            }
            | Event::BaselineRefreshed {
                logical_id,
                baseline,
            } => self.baseline_set(logical_id, baseline),
            Event::BaselinesRecorded { baselines } => {
                for (logical_id, baseline) in baselines {
                    self.baseline_set(logical_id, baseline);
                }
            }
            Event::BaselineAccepted {
                logical_id,
                observed,
            } => self.baseline_accepted(logical_id, observed),
            Event::DriftChecked { results, .. } => self.drift_checked(results),
            Event::Scrubbed {
                logical_id,
                paths,
                replaced,
            } => self.scrubbed(logical_id, paths, replaced),
            // The rewritten bodies are what the stream now holds: nothing more to apply.
            Event::EventsRewritten { .. } => {}
            // A measure of the run, for people: nothing of the stack's state.
            Event::Throttled { .. } => {}
            Event::LockTaken { holder } => self.lock = Some(holder.clone()),
            Event::ActionsFenced { deploy_id } => {
                if let Some(lock) = self.lock.as_mut().filter(|l| l.deploy_id == *deploy_id) {
                    lock.fenced.get_or_insert_with(|| at.to_string());
                }
            }
            Event::LockReleased { .. } | Event::LockBroken { .. } => self.lock = None,
        }
    }

    /// Removes the intent of `op` on `logical_id` by `deploy_id`: its outcome is known.
    /// An outcome of a delete that does not name its physical id (skipped, failed)
    /// settles every delete of that resource by that deploy.
    pub(super) fn settle(&mut self, deploy_id: &str, logical_id: &str, op: Operation) {
        if op == Operation::Delete {
            self.pending.retain(|_, p| {
                !(p.operation == op && p.deploy_id == deploy_id && p.logical_id == logical_id)
            });
        } else {
            self.pending
                .shift_remove(&pending_key(deploy_id, logical_id, op));
        }
    }

    /// Removes the intent of the delete of `physical_id`: two old copies of one resource
    /// can be deleted by one deploy, each with its own intent.
    fn settle_delete(&mut self, deploy_id: &str, logical_id: &str, physical_id: &str) {
        let key = pending_key(deploy_id, logical_id, Operation::Delete);
        self.pending.shift_remove(&format!("{key}/{physical_id}"));
        // An intent recorded before deletes were keyed by physical id.
        if self
            .pending
            .get(&key)
            .is_some_and(|p| p.physical_id.as_deref() == Some(physical_id))
        {
            self.pending.shift_remove(&key);
        }
    }

    /// `DeployStarted`: a new last deploy, in progress, with an empty journal and the lock.
    fn deploy_started(
        &mut self,
        deploy_id: &str,
        who: &str,
        template_digest: &str,
        parameters: &IndexMap<String, Value>,
        at: &str,
    ) {
        self.last_deploy = Some(LastDeploy {
            deploy_id: deploy_id.to_string(),
            who: who.to_string(),
            started_at: at.to_string(),
            status: DeployStatus::InProgress,
            error: None,
        });
        self.journal = Journal {
            deploy_id: Some(deploy_id.to_string()),
            entries: vec![],
        };
        self.parameters = parameters.clone();
        self.template_digest = Some(template_digest.to_string());
        self.lock = Some(Holder {
            deploy_id: deploy_id.to_string(),
            who: who.to_string(),
            since: at.to_string(),
            operation: "deploy".into(),
            expires: None,
            fenced: None,
        });
    }

    /// `DeployCompleted`: the outputs, exports and imports are the deploy's, and its
    /// journal is done with.
    fn deploy_completed(
        &mut self,
        deploy_id: &str,
        outputs: &IndexMap<String, Value>,
        exports: &IndexMap<String, Value>,
        imports: &[String],
    ) {
        self.imports = imports.to_vec();
        if let Some(d) = &mut self.last_deploy
            && d.deploy_id == *deploy_id
        {
            d.status = DeployStatus::Completed;
        }
        self.outputs = outputs.clone();
        self.exports = exports.clone();
        if self.journal.deploy_id.as_deref() == Some(deploy_id) {
            self.journal = Journal::default();
        }
    }

    /// `DeployFailed`: the last deploy failed, with its first error.
    fn deploy_failed(&mut self, deploy_id: &str, error: &ErrorInfo) {
        if let Some(d) = &mut self.last_deploy
            && d.deploy_id == *deploy_id
        {
            d.status = DeployStatus::Failed;
            d.error = Some(error.clone());
        }
    }

    /// `ResourceIntent`: the call is pending until its outcome is recorded.
    fn resource_intent(&mut self, event: &Event, seq: u64, at: &str) {
        let Event::ResourceIntent {
            deploy_id,
            logical_id,
            resource_type,
            operation,
            token,
            provider,
            physical_id,
            properties,
        } = event
        else {
            return;
        };
        let mut key = pending_key(deploy_id, logical_id, *operation);
        if let (Operation::Delete, Some(p)) = (operation, physical_id) {
            key = format!("{key}/{p}");
        }
        self.pending.insert(
            key,
            PendingIntent {
                deploy_id: deploy_id.clone(),
                logical_id: logical_id.clone(),
                resource_type: resource_type.clone(),
                operation: *operation,
                token: token.clone(),
                provider: *provider,
                physical_id: physical_id.clone(),
                properties: properties.clone(),
                seq,
                at: (!at.is_empty()).then(|| at.to_string()),
            },
        );
    }

    /// `ResourceCreated` of a new resource: it is in the stack, and journaled.
    fn resource_created(
        &mut self,
        seq: u64,
        deploy_id: &str,
        resource: &ResourceRecord,
        baseline: &Option<Baseline>,
    ) {
        let id = resource.logical_id.clone();
        let new = ResourceState::from_record(resource, baseline.clone());
        // A create that answered with a resource waiting for deletion (a replacement
        // undone by going back to the previous template) made it live again: it is no
        // longer to be deleted.
        self.predecessors.shift_remove(&new.physical_id);
        self.settle(deploy_id, &id, Operation::Create);
        if let Some(j) = self.journal_for(deploy_id) {
            j.entries.push(JournalEntry {
                seq,
                logical_id: id.clone(),
                step: JournalStep::Created {
                    physical_id: new.physical_id.clone(),
                    resource_type: new.resource_type.clone(),
                    provider: new.provider,
                    properties: new.properties.clone(),
                },
                undone: false,
                imported: None,
            });
        }
        self.resources.insert(id, new);
    }

    /// `ResourceCreated` replacing `old_id`: the new copy is in the stack, the old one
    /// waits for deletion, and the replacement is journaled.
    fn resource_replaced(
        &mut self,
        seq: u64,
        deploy_id: &str,
        resource: &ResourceRecord,
        old_id: &str,
        baseline: &Option<Baseline>,
    ) {
        let id = resource.logical_id.clone();
        let new = ResourceState::from_record(resource, baseline.clone());
        // As for a new resource: a copy waiting for deletion that comes back is live.
        self.predecessors.shift_remove(&new.physical_id);
        self.settle(deploy_id, &id, Operation::Replace);
        let old = self.resources.get(&id).cloned();
        // The old copy is deleted later, unless the create answered with that very
        // resource.
        if let Some(old) = old.as_ref().filter(|_| *old_id != new.physical_id) {
            self.predecessors.insert(
                old_id.to_string(),
                Predecessor {
                    logical_id: id.clone(),
                    deploy_id: deploy_id.to_string(),
                    resource: old.clone(),
                },
            );
        }
        if let (Some(j), Some(old)) = (self.journal_for(deploy_id), old) {
            j.entries.push(JournalEntry {
                seq,
                logical_id: id.clone(),
                step: JournalStep::Replaced {
                    new_physical_id: new.physical_id.clone(),
                    resource_type: new.resource_type.clone(),
                    provider: new.provider,
                    previous: old,
                },
                undone: false,
                imported: None,
            });
        }
        self.resources.insert(id, new);
    }

    /// `ResourceUpdated`: the resource as updated, keeping its import mark; its baseline
    /// is the update's own decision, else [`baseline_after_update`]. The update is
    /// journaled.
    fn resource_updated(
        &mut self,
        seq: u64,
        deploy_id: &str,
        resource: &ResourceRecord,
        baseline: &Option<Baseline>,
    ) {
        let id = resource.logical_id.clone();
        self.settle(deploy_id, &id, Operation::Update);
        let mut new = ResourceState::from_record(resource, baseline.clone());
        let previous = self.resources.get(&id).cloned();
        if let Some(prev) = &previous {
            new.imported = prev.imported;
            if new.baseline.is_none() {
                new.baseline = baseline_after_update(prev.baseline.as_ref());
            }
        }
        if let (Some(j), Some(prev)) = (self.journal_for(deploy_id), previous) {
            j.entries.push(JournalEntry {
                seq,
                logical_id: id.clone(),
                step: JournalStep::Updated {
                    physical_id: new.physical_id.clone(),
                    previous: prev,
                },
                undone: false,
                imported: None,
            });
        }
        self.resources.insert(id, new);
    }

    /// `ResourceDeleted` and `ResourceRetained`: a replaced copy is no longer waiting; a
    /// current resource with that physical id leaves the stack, and every dependency on
    /// it goes.
    fn resource_gone(
        &mut self,
        deploy_id: &str,
        logical_id: &str,
        physical_id: &str,
        replaced: bool,
    ) {
        self.settle_delete(deploy_id, logical_id, physical_id);
        if replaced || self.predecessors.contains_key(physical_id) {
            self.predecessors.shift_remove(physical_id);
        } else if self
            .resources
            .get(logical_id)
            .is_some_and(|r| r.physical_id == *physical_id)
        {
            self.resources.shift_remove(logical_id);
            // Nothing can depend on a resource that is gone.
            for r in self.resources.values_mut() {
                r.dependencies.retain(|d| d != logical_id);
            }
        }
    }

    /// `StackDestroyed`: nothing of the last deploy's configuration is left.
    fn stack_destroyed(&mut self) {
        self.outputs.clear();
        self.exports.clear();
        self.imports.clear();
        self.parameters.clear();
        self.template_digest = None;
        self.stack_id = None;
    }

    /// `ResourceImported`: the adopted resource is in the stack, marked as imported.
    fn resource_imported(&mut self, resource: &ResourceRecord, baseline: &Option<Baseline>) {
        let mut r = ResourceState::from_record(resource, baseline.clone());
        r.imported = true;
        self.resources.insert(resource.logical_id.clone(), r);
    }
}

/// The baseline of a resource after an in-place update that did not decide one itself:
/// an `unverifiable-parameter` refusal stays (the update bound the same parameter
/// Default, which it did not necessarily write to AWS); an `incomplete-resolution`
/// refusal clears (the record was rebuilt from the template); a recorded baseline is
/// obsolete (the `BaselineRecorded` read after the update follows).
fn baseline_after_update(previous: Option<&Baseline>) -> Option<Baseline> {
    match previous {
        Some(
            b @ Baseline::Refused {
                cause: RefusalCause::UnverifiableParameter,
            },
        ) => Some(b.clone()),
        _ => None,
    }
}
