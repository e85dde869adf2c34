//! Which template resources an import looks up, and which requests it refuses before it
//! reads anything.
//!
//! - **Whole stack** (no overrides, `--auto`, or a migration): every template resource,
//!   each by its override, else by the CloudFormation stack of the same name when one
//!   exists, else by the name the template gives. Over recorded resources it needs
//!   `force`: every record is made again.
//! - **Selective** (overrides without `--auto`): only the resources the overrides name.
//!   The others stay as recorded ([`super::ImportStatus::Kept`]), or, when nothing is
//!   recorded for them, out of scope (the next deploy creates them). A named resource
//!   recorded under another physical id is replaced only with `force`.

use super::ImportOptions;
use crate::engine::EngineError;
use crate::stack::StackInput;
use stackflow_events::projection::StackState;

impl ImportOptions {
    /// True when only the resources the overrides name are imported.
    pub fn selective(&self) -> bool {
        !self.overrides.is_empty() && !self.auto && self.migrate.is_none()
    }
}

/// Refuses an import that names resources the template does not have, or that would
/// overwrite recorded resources without `force`.
pub(super) fn check_request(
    state: &StackState,
    input: &StackInput,
    options: &ImportOptions,
) -> Result<(), EngineError> {
    let unknown: Vec<&String> = options
        .overrides
        .keys()
        .filter(|id| !input.template.resources.contains_key(*id))
        .collect();
    if !unknown.is_empty() {
        return Err(EngineError::Refused(format!(
            "{}: the resource mapping names {unknown:?}, which the template does not \
             declare (check the logical ids: `stackflow diff` lists them)",
            input.source
        )));
    }
    if options.force {
        return Ok(());
    }
    if options.selective() {
        let replaced: Vec<String> = options
            .overrides
            .iter()
            .filter_map(|(id, physical)| {
                let recorded = state.resources.get(id)?;
                (recorded.physical_id != *physical)
                    .then(|| format!("{id} (recorded {}, given {physical})", recorded.physical_id))
            })
            .collect();
        if !replaced.is_empty() {
            return Err(EngineError::Refused(format!(
                "stack {} already records {}: pass --force to replace the record (the \
                 resource recorded now stays in AWS, no longer in stackflow's records)",
                input.name,
                replaced.join(", ")
            )));
        }
        return Ok(());
    }
    if !state.resources.is_empty() {
        return Err(EngineError::Refused(format!(
            "stack {} already has {} recorded resources: pass --force to import every \
             template resource again over them, or --resource ID=PHYSICAL to add or \
             replace only those",
            input.name,
            state.resources.len()
        )));
    }
    Ok(())
}
