//! Reviewing a plan before it is applied: `deploy --require-approval` asks on the
//! terminal, and `diff --out FILE` saves a plan that `deploy FILE` applies exactly. Both
//! hand the engine the reviewed plan ([`ExpectedPlan`]), which refuses to start when its
//! own plan is another (before the lock and again after it).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use stackflow_core::plan::Plan;
use stackflow_core::plan::review::{Widening, digest, widenings};
use stackflow_core::template::StackTemplate;
use stackflow_engine::ExpectedPlan;
use stackflow_engine::stack::StackInput;

use crate::args::RequireApproval;
use crate::confirm::{NotConfirmed, confirm};
use crate::select::given_to;
use crate::setup::Setup;

/// The version of the saved plan's format.
const FORMAT: u32 = 1;

/// A plan saved by `diff --out`, for `deploy FILE`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedPlan {
    /// The format's version; also what tells a saved plan from a template.
    pub stackflow_plan: u32,
    /// The template file or cloud assembly the plan was made from (absolute).
    pub source: PathBuf,
    /// The region it was made for.
    pub region: String,
    /// Each stack's plan, in deploy order.
    pub stacks: Vec<SavedStack>,
}

/// One stack of a saved plan.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedStack {
    /// The stack.
    pub stack: String,
    /// The stack id the plan was made with (a new stack's, made by its first deploy).
    pub stack_id: Option<String>,
    /// The region the stack's plan was made for (the one its cloud assembly pins it to,
    /// else the plan's; absent in plans saved before stacks were placed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The digest of the template the plan was made from.
    pub template_digest: String,
    /// The command-line parameters that reached the stack, NoEcho ones left out.
    pub parameters: Vec<(String, String)>,
    /// The digest of `plan`: an edited file is refused.
    pub plan_digest: String,
    /// The plan.
    pub plan: Plan,
}

impl SavedPlan {
    /// A plan of `stacks`, made from `source` for `region`.
    pub fn new(source: &Path, region: &str, stacks: Vec<SavedStack>) -> anyhow::Result<SavedPlan> {
        let source = source
            .canonicalize()
            .with_context(|| format!("reading {}", source.display()))?;
        Ok(SavedPlan {
            stackflow_plan: FORMAT,
            source,
            region: region.to_string(),
            stacks,
        })
    }

    /// `path` as a saved plan; `None` when it is something else (a template).
    pub fn read(path: &Path) -> anyhow::Result<Option<SavedPlan>> {
        if path.is_dir() || path.extension().and_then(|e| e.to_str()) != Some("json") {
            return Ok(None);
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
            return Ok(None);
        };
        if value.get("stackflowPlan").is_none() {
            return Ok(None);
        }
        let saved: SavedPlan = serde_json::from_value(value).with_context(|| {
            format!(
                "{}: a saved plan this stackflow cannot read",
                path.display()
            )
        })?;
        if saved.stackflow_plan != FORMAT {
            bail!(
                "{}: a saved plan of format {} (this stackflow reads {FORMAT}): save it again \
                 with `stackflow diff --out`",
                path.display(),
                saved.stackflow_plan
            );
        }
        if let Some(s) = saved
            .stacks
            .iter()
            .find(|s| digest(&s.plan) != s.plan_digest)
        {
            return Err(NotConfirmed(format!(
                "{}: the plan of stack {} was edited after it was saved, so it is not \
                 applied: save it again with `stackflow diff --out`",
                path.display(),
                s.stack
            ))
            .into());
        }
        Ok(Some(saved))
    }

    /// Writes the plan to `path`.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        std::fs::write(path, text)
            .with_context(|| format!("writing the plan to {}", path.display()))
    }

    /// The names of its stacks, in order.
    pub fn names(&self) -> Vec<String> {
        self.stacks.iter().map(|s| s.stack.clone()).collect()
    }

    /// The parameters to bind: the saved ones (each for its stack), then `given` (the
    /// NoEcho values, which are never saved).
    pub fn parameters(&self, given: &[(String, String)]) -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = self
            .stacks
            .iter()
            .flat_map(|s| {
                s.parameters
                    .iter()
                    .map(|(k, v)| (format!("{}:{k}", s.stack), v.clone()))
            })
            .collect();
        all.extend(given.iter().cloned());
        all
    }

    /// The reviewed plan of `input`'s stack, with `input` given the stack id the plan was
    /// made with. Refused when the plan was made elsewhere, from another template, or
    /// for a stack made again since.
    pub async fn pin(&self, setup: &Setup, input: &mut StackInput) -> anyhow::Result<ExpectedPlan> {
        let name = input.name.clone();
        let refuse = |why: String| -> anyhow::Error {
            NotConfirmed(format!(
                "stack {name}: {why}, so the saved plan is not applied (nothing was done): \
                 save a new one with `stackflow diff --out`"
            ))
            .into()
        };
        let Some(saved) = self.stacks.iter().find(|s| s.stack == input.name) else {
            return Err(refuse("the plan has no such stack".into()));
        };
        let made_for = saved.region.as_deref().unwrap_or(&self.region);
        if setup.region != made_for {
            return Err(refuse(format!(
                "the plan was made for region {made_for}, not {}",
                setup.region
            )));
        }
        if input.digest() != saved.template_digest {
            return Err(refuse(format!(
                "the template changed since the plan was made from {}",
                self.source.display()
            )));
        }
        input.pseudo.stack_id = None;
        let recorded = setup.engine.settle_stack_id(input).await?;
        if recorded && input.pseudo.stack_id != saved.stack_id {
            return Err(refuse("the stack was destroyed and made again".into()));
        }
        input.pseudo.stack_id = saved.stack_id.clone();
        Ok(ExpectedPlan::of(saved.plan.clone()))
    }
}

/// One stack's entry of a plan to save: `given` are the command-line parameters of all
/// `of` stacks being planned.
pub fn saved_stack(
    stack: &StackTemplate,
    of: usize,
    given: &[(String, String)],
    input: &StackInput,
    plan: &Plan,
) -> SavedStack {
    let parameters = given
        .iter()
        .filter_map(|(key, value)| {
            let k = given_to(of, stack, key)?;
            let secret = stack.template.parameters.get(k).is_some_and(|p| p.no_echo);
            (!secret).then(|| (k.to_string(), value.clone()))
        })
        .collect();
    SavedStack {
        stack: input.name.clone(),
        stack_id: input.pseudo.stack_id.clone(),
        region: Some(input.pseudo.region.clone()),
        template_digest: input.digest(),
        parameters,
        plan_digest: digest(plan),
        plan: plan.clone(),
    }
}

/// `--require-approval`: when the plan of `input` has changes of the kind `mode` asks
/// about, shows them and asks. `Some(plan)`: the approved plan, which the deploy must
/// then be; `None`: nothing needed approval.
pub async fn approve(
    setup: &Setup,
    input: &mut StackInput,
    mode: RequireApproval,
    yes: bool,
) -> anyhow::Result<Option<Plan>> {
    if yes || mode == RequireApproval::Never {
        return Ok(None);
    }
    setup.engine.settle_stack_id(input).await?;
    let plan = setup.engine.plan_only(input).await?;
    let shown = match mode {
        RequireApproval::AnyChange => {
            (!plan.is_empty()).then(|| crate::render::plan(&plan, &input.source, 0))
        }
        RequireApproval::Broadening => {
            let w = widenings(&plan);
            (!w.is_empty()).then(|| render_widenings(&input.name, &w))
        }
        RequireApproval::Never => None,
    };
    let Some(shown) = shown else {
        return Ok(None);
    };
    eprint!("{shown}");
    confirm(
        false,
        &format!("Deploy stack {} with these changes?", input.name),
        "review them with `stackflow diff`, then deploy with --yes or --require-approval \
         never, or save the plan with `stackflow diff --out plan.json` and deploy that file",
    )
    .await?;
    Ok(Some(plan))
}

/// The changes that widen access, as shown for approval.
fn render_widenings(stack: &str, w: &[Widening]) -> String {
    let mut out = format!(
        "Stack {stack}: these changes widen access (IAM, resource policies, security groups):\n"
    );
    for c in w {
        let at = c
            .path
            .as_deref()
            .map(|p| format!(" {p}"))
            .unwrap_or_default();
        let value = serde_json::to_string(&c.value).unwrap_or_default();
        let _ = writeln!(
            out,
            "  + {} ({}, {}){at}: {value}",
            c.logical_id,
            c.resource_type,
            c.action.as_str()
        );
    }
    out
}
