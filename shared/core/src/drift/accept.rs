//! `drift --accept`: AWS's values become the baseline, unless that would take a value at
//! a masked position on trust.

use serde_json::{Map, Value};

use super::compare::compare;
use super::markers::masked_positions;
use super::observe::observed_baseline;
use super::rules::CompareRules;
use super::{Observed, overlaps};

/// Why [`accept`] kept the old baseline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptRefused {
    /// A difference touches a masked position: the value there changed in a way the
    /// comparison saw, and what it changed to cannot be recorded (it may be a secret) nor
    /// proven to be what the mask stood for.
    #[error(
        "the masked value at {masked:?} cannot be accepted: AWS differs at {difference:?}; \
         deploy the resource (or import it again) to record a new baseline"
    )]
    MaskedPositionDrifted {
        /// The masked position (a JSON pointer into the baseline).
        masked: String,
        /// The path of the difference that touches it.
        difference: String,
    },
}

/// The new baseline after `drift --accept`: AWS's values (`aws`), with the secrets of
/// the old `baseline` kept out as [`observed_baseline`] keeps them out of a first
/// baseline (reference text stays where AWS's value still fits it, a masked position
/// stays [`super::MASKED`]; a position that no longer matches is masked).
///
/// Refused when `baseline` and `aws` compared with `rules` drift at a masked position:
/// when some difference's path is a masked position, lies inside one or holds one
/// (a masked key AWS no longer returns, a list holding a masked item that no longer
/// lines up with AWS's). The masked positions are `masked_positions` together with those
/// the baseline holds and those the comparison met. A masked position alone (not
/// compared) does not refuse: its value is not recorded, so accepting keeps it masked.
pub fn accept(
    baseline: &Map<String, Value>,
    aws: &Map<String, Value>,
    masked: &[String],
    rules: &CompareRules,
) -> Result<Observed, AcceptRefused> {
    let comparison = compare(baseline, aws, rules);
    let mut all: Vec<String> = masked.to_vec();
    all.extend(masked_positions(baseline));
    all.extend(comparison.masked.iter().cloned());
    for d in comparison.differences() {
        if let Some(m) = all.iter().find(|m| overlaps(&d.path, m)) {
            return Err(AcceptRefused::MaskedPositionDrifted {
                masked: m.clone(),
                difference: d.path.clone(),
            });
        }
    }
    Ok(observed_baseline(baseline, aws))
}
