//! The embedded runner: a deploy of one stack run in-process, each phase on the scheduler
//! (a resource starts as soon as its own dependencies are done, at most `concurrency` at
//! once), through the one phase loop, [`run_phase`].

use std::sync::Arc;
use std::time::Instant;

use stackflow_events::EventStore;

use crate::deploy::{Deployment, cleanup_items, cleanup_of};
use crate::engine::{DeployOptions, Engine, EngineError};
use crate::phase::{Subject, Tally, run_phase};
use crate::progress::ProgressEvent;
use crate::report::{Failure, StackReport, StackStatus};
use crate::stack::StackInput;

/// Deploys one stack with the embedded runner: plan, provision (each resource as soon
/// as its own dependencies are done, at most `concurrency` at once), cleanup, finish; on
/// failure, record it and roll back unless told not to.
pub async fn deploy_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    input: StackInput,
    options: DeployOptions,
) -> Result<StackReport, EngineError> {
    let started = Instant::now();
    let (lease_lost, options) = crate::lease::stoppable(options);
    let (deployment, mut report) = Deployment::begin(engine.clone(), input, options).await?;
    let Some(d) = deployment else {
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    };
    let d = Arc::new(d);
    let keeper = crate::lease::keep(
        &engine,
        d.recorder.stream().clone(),
        d.deploy_id.clone(),
        lease_lost,
    );
    let tally = Tally::default();
    let cleaned = run_phases(&engine, &d, &tally).await;
    if keeper.as_ref().is_some_and(crate::lease::Keeper::lost) {
        return Err(crate::lease::lost_error(d.stack()));
    }
    let stopped_by_user = d.options.stopped();
    // The baseline reads still running are throttled into the same tally: they end
    // before it is recorded, or the event would miss what they met. What they read is
    // appended with the run's last write (or, when it fails, before the failure).
    d.observations.close().await;
    tally
        .throttles
        .record(&d.recorder, &d.deploy_id, &d.holds())
        .await?;
    tally.into_report(&mut report)?;
    if cleaned && !report.failures.is_empty() {
        // A failure during cleanup cannot be undone (a replaced resource's old copy may
        // be gone already): the deploy is done, and what is left to delete stays in the
        // state for the next deploy or destroy to finish.
        if finish_or_fail(&d, &mut report).await? {
            report.status = StackStatus::Partial;
        }
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    conclude(&d, &mut report, stopped_by_user).await?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The deploy's phases on the scheduler: provision, then (when every resource is done
/// and nothing stopped it) cleanup: deletes of removed resources and replaced
/// predecessors. True when cleanup ran.
async fn run_phases<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    d: &Arc<Deployment<S>>,
    tally: &Tally,
) -> bool {
    let tasks = d.provision_tasks();
    let planned_cleanups = d.planned_cleanups();
    engine.progress.report(ProgressEvent::StackStarted {
        stack: d.stack(),
        operation: "deploy",
        total: tasks.len() + planned_cleanups,
    });
    let provisioned = run_phase(
        engine,
        d.stack(),
        &tasks,
        &d.options,
        tally,
        |id| {
            let rp = d.plan.resource(id);
            Subject {
                logical_id: id.to_string(),
                resource_type: rp.map(|r| r.resource_type.clone()).unwrap_or_default(),
                action: rp
                    .map(|r| r.action.as_str())
                    .unwrap_or_default()
                    .to_string(),
            }
        },
        |id| {
            let d = d.clone();
            async move { d.provision(&id).await }
        },
    )
    .await;
    let cleaned = provisioned.all_succeeded() && !tally.has_fatal() && !d.options.stopped();
    if cleaned {
        let (items, cleanup_tasks) = d.cleanup_tasks();
        let by_id = cleanup_items(&items);
        run_phase(
            engine,
            d.stack(),
            &cleanup_tasks,
            &d.options,
            tally,
            |id| cleanup_of(&d.recorder, &by_id[id]),
            |id| {
                let (d, item) = (d.clone(), by_id[&id].clone());
                async move { d.cleanup(&item).await }
            },
        )
        .await;
    }
    cleaned
}

/// Finishes the deploy (true), or fails it when its outputs cannot be resolved (an
/// `Fn::GetAtt` of an attribute the provider did not return), as CloudFormation fails such
/// a stack: the failure recorded, what the deploy did rolled back unless told not to, the
/// lock released (false; the report says failed). A store error is the caller's.
async fn finish_or_fail<S: EventStore + 'static>(
    d: &Deployment<S>,
    report: &mut StackReport,
) -> Result<bool, EngineError> {
    let e = match d.outputs() {
        Err(EngineError::Template(e)) => e,
        Err(other) => return Err(other),
        Ok(resolved) => {
            report.outputs = d.finish_with(resolved).await?;
            return Ok(true);
        }
    };
    let output = e
        .path
        .split(".Value")
        .next()
        .and_then(|p| p.split(".Export").next())
        .unwrap_or(&e.path)
        .to_string();
    let failure = Failure {
        logical_id: output,
        resource_type: "output".into(),
        action: "resolve".into(),
        error: d.plain().info("InvalidTemplate", &e.to_string()),
    };
    report.failures.push(failure.clone());
    report.rollback = d
        .fail(Some(&failure), "failed", !d.options.no_rollback)
        .await?;
    report.status = StackStatus::Failed;
    Ok(false)
}

/// The end of a deploy: finished when nothing failed, else failed (and rolled back
/// unless told not to; a deploy the user stopped is not rolled back: what it did stays
/// recorded, for `stackflow rollback` or the next deploy).
async fn conclude<S: EventStore + 'static>(
    d: &Deployment<S>,
    report: &mut StackReport,
    stopped_by_user: bool,
) -> Result<(), EngineError> {
    if report.failures.is_empty() && !stopped_by_user {
        if finish_or_fail(d, report).await? {
            report.status = if report.skipped.is_empty() {
                StackStatus::Succeeded
            } else {
                StackStatus::Partial
            };
        }
        return Ok(());
    }
    let first = report.failures.first().cloned();
    let why = if stopped_by_user {
        "stopped by the user"
    } else {
        "failed"
    };
    report.rollback = d.fail(first.as_ref(), why, !stopped_by_user).await?;
    report.status = if stopped_by_user {
        StackStatus::Interrupted
    } else {
        StackStatus::Failed
    };
    Ok(())
}
