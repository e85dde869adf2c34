//! The lookups of a stack before it is planned: every value the template asks AWS or
//! other stacks for (availability zones, exports, outputs, SSM parameters), stackflow's
//! own records first; and the other stacks' records a destroy checks.

use std::collections::BTreeSet;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;
use stackflow_core::Path;
use stackflow_core::intrinsics::{Mode, Resolver, StackOutputRef, evaluate_conditions};
use stackflow_core::plan::{Plan, PlanInput, plan};
use stackflow_core::secrets::DigestKey;
use stackflow_events::EventStore;

use crate::engine::{Engine, EngineError};
use crate::lookups::{Answers, Questions, Recording};
use crate::preflight;
use crate::recorder::Recorder;
use crate::stack::{DeployEnv, StackInput};

impl<S: EventStore + 'static> Engine<S> {
    /// Answers every lookup the template asks for: availability zones, exports and
    /// outputs (stackflow's own records first, then CloudFormation), SSM parameters. With
    /// `strict` a failed lookup stops the deploy; without it (a plan) the value shows as
    /// known after deploy. Also returns the exports the template imports.
    pub(crate) async fn gather(
        &self,
        input: &StackInput,
        rec: &Recorder<S>,
        strict: bool,
    ) -> Result<(Answers, Vec<String>), EngineError> {
        let mut g = Gathering {
            engine: self,
            input,
            strict,
            answers: Answers::default(),
            tried: Questions::default(),
        };
        // `Fn::GetAZs` can sit where plan mode stops early (inside a value that is not
        // known yet), so its regions are also found by reading the template.
        let mut regions = BTreeSet::new();
        for r in input.template.resources.values() {
            get_azs_regions(
                &Value::Object(r.properties.clone()),
                &input.pseudo.region,
                &mut regions,
            );
        }
        for o in input.template.outputs.values() {
            get_azs_regions(&o.value, &input.pseudo.region, &mut regions);
        }
        g.zones(&regions).await?;
        let mut imports: BTreeSet<String> = BTreeSet::new();
        // Each round's answers can reveal new questions (an export named by an output).
        for _ in 0..4 {
            let asked = questions(input, rec, &g.answers);
            imports.extend(asked.exports.iter().cloned());
            let missing = g.answers.missing(&asked, &g.tried);
            if missing.is_empty() {
                break;
            }
            g.zones(&missing.regions).await?;
            g.exports(&missing.exports).await?;
            g.outputs(&missing.outputs).await?;
            g.ssm(&missing.ssm).await?;
            g.tried.regions.extend(missing.regions);
            g.tried.exports.extend(missing.exports);
            g.tried.outputs.extend(missing.outputs);
            g.tried.ssm.extend(missing.ssm);
        }
        let mut answers = g.answers;
        answers.secret_digests = self.current_digests(input, rec, &answers).await;
        Ok((answers, imports.into_iter().collect()))
    }

    /// Gives `input` its stack id before it is planned for review: the recorded one, or
    /// the one its first deploy will record. A plan of a new stack then shows the values
    /// made from `AWS::StackId` as the deploy will make them, so the deploy of a reviewed
    /// plan has the same plan. True when the stack id was recorded.
    pub async fn settle_stack_id(&self, input: &mut StackInput) -> Result<bool, EngineError> {
        let state =
            stackflow_events::load_state(self.store.as_ref(), &self.stream(&input.name)).await?;
        let recorded = state.stack_id.is_some();
        input.settle_stack_id(state.stack_id);
        Ok(recorded)
    }

    /// What a deploy of `input` would do now: the same lookups and the same recorded
    /// state a deploy uses, without taking the lock or calling anything that writes.
    pub async fn plan_only(&self, input: &StackInput) -> Result<Plan, EngineError> {
        let recorder = Recorder::load(self.store.clone(), self.stream(&input.name)).await?;
        // A deployed stack's id is known; a new stack's is made by its first deploy.
        let mut bound;
        let input = match recorder.state().stack_id.clone() {
            Some(id) if input.pseudo.stack_id.is_none() => {
                bound = input.clone();
                bound.pseudo.stack_id = Some(id);
                &bound
            }
            _ => input,
        };
        let (answers, _) = self.gather(input, &recorder, false).await?;
        let key = self.stack_digest_key(&input.name);
        plan_of(input, &recorder, &answers, key.as_ref())
    }

    /// [`Engine::plan_only`], and what would stop that deploy before it changes anything
    /// (one line per problem, with its template path; a replacement that destroys data
    /// is one unless `allow_stateful`).
    pub async fn preview(
        self: &Arc<Self>,
        input: &StackInput,
        allow_stateful: bool,
    ) -> Result<(Plan, Vec<String>), EngineError> {
        let plan = self.plan_only(input).await?;
        let state =
            stackflow_events::load_state(self.store.as_ref(), &self.stream(&input.name)).await?;
        let problems = preflight::problems(
            self,
            &Arc::new(input.clone()),
            &plan,
            &state,
            allow_stateful,
        );
        Ok((plan, problems))
    }

    /// An export recorded by another stackflow stack of this region.
    async fn find_export(&self, own: &str, name: &str) -> Result<Option<Value>, EngineError> {
        for stream in self.store.streams().await? {
            if stream.region != self.region || stream.stack == own {
                continue;
            }
            let state = stackflow_events::load_state(self.store.as_ref(), &stream).await?;
            if let Some(v) = state.exports.get(name) {
                return Ok(Some(v.clone()));
            }
        }
        Ok(None)
    }

    /// The stacks of this region that import one of `exports`, with the export.
    pub(crate) async fn importers(
        &self,
        own: &str,
        exports: &IndexMap<String, Value>,
    ) -> Result<Vec<(String, String)>, EngineError> {
        let mut out = Vec::new();
        if exports.is_empty() {
            return Ok(out);
        }
        for stream in self.store.streams().await? {
            if stream.region != self.region || stream.stack == own {
                continue;
            }
            let state = stackflow_events::load_state(self.store.as_ref(), &stream).await?;
            for i in &state.imports {
                if exports.contains_key(i) && !state.resources.is_empty() {
                    out.push((stream.stack.clone(), i.clone()));
                }
            }
        }
        Ok(out)
    }
}

/// The regions `Fn::GetAZs` asks for in `v`: a literal region, or the stack's region for
/// `""` and any expression.
fn get_azs_regions(v: &Value, own: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            if let Some(arg) = m.get("Fn::GetAZs") {
                match arg {
                    Value::String(r) if !r.is_empty() => out.insert(r.clone()),
                    _ => out.insert(own.to_string()),
                };
            }
            m.values().for_each(|x| get_azs_regions(x, own, out));
        }
        Value::Array(items) => items.iter().for_each(|x| get_azs_regions(x, own, out)),
        _ => {}
    }
}

/// The plan of `input` against the state `recorder` holds now.
pub(crate) fn plan_of<S: EventStore>(
    input: &StackInput,
    recorder: &Recorder<S>,
    answers: &Answers,
    key: Option<&DigestKey>,
) -> Result<Plan, EngineError> {
    let state = recorder.state().to_current_state();
    plan(&PlanInput {
        stack: &input.name,
        template: &input.template,
        parameters: &input.parameters,
        pseudo: &input.pseudo,
        state: &state,
        env: answers,
        digest_key: key,
        secret_digests: Some(&answers.secret_digests),
    })
    .map_err(|e| {
        // What the pre-flight check would say of the template, said now too.
        let e = e.with_more(preflight::template_property_errors(&input.template));
        EngineError::Template(e.in_file(&input.source))
    })
}

/// The questions a resolution of `input` asks, given the answers so far.
fn questions<S: EventStore>(input: &StackInput, rec: &Recorder<S>, answers: &Answers) -> Questions {
    let state = rec.state();
    let base = DeployEnv {
        sealed: None,
        state: &state,
        answers,
    };
    let recording = Recording::new(&base);
    if let Ok(conditions) = evaluate_conditions(
        &input.template,
        &input.parameters,
        &input.pseudo,
        &recording,
    ) {
        let resolver = Resolver::new(
            &input.template,
            &input.parameters,
            &input.pseudo,
            &conditions,
            &recording,
            Mode::Plan,
        );
        for id in input.template.resources.keys() {
            let _ = resolver.resolve_properties(id);
        }
        for (name, o) in &input.template.outputs {
            let p = Path::from_keys(["Outputs", name]);
            let _ = resolver.resolve(&o.value, &p);
            if let Some(e) = &o.export_name {
                let _ = resolver.resolve(e, &p);
            }
        }
    }
    recording.into_questions()
}

/// The lookups of one stack, as they are answered.
struct Gathering<'a, S> {
    engine: &'a Engine<S>,
    input: &'a StackInput,
    strict: bool,
    answers: Answers,
    tried: Questions,
}

impl<S: EventStore + 'static> Gathering<'_, S> {
    /// A failed lookup: fatal when strict, else noted (the value is known after deploy).
    fn soft(&self, message: String) -> Result<(), EngineError> {
        if self.strict {
            Err(EngineError::Lookup(message))
        } else {
            self.engine.note(
                &self.input.name,
                &format!("{message} (shown as known after deploy)"),
            );
            Ok(())
        }
    }

    /// A secret that another stack recorded masked cannot be consumed: the consumer
    /// would deploy the mask.
    fn refuse_masked(&self, v: &Value, what: &str) -> Result<(), EngineError> {
        if !stackflow_core::secrets::contains_mask(v) {
            return Ok(());
        }
        Err(EngineError::Refused(format!(
            "{}: {what} reads a secret (a NoEcho value, recorded masked), which cannot be \
             passed to another stack; read the secret itself in both stacks with a dynamic \
             reference ({{{{resolve:secretsmanager:...}}}})",
            self.input.source
        )))
    }

    async fn zones(&mut self, regions: &BTreeSet<String>) -> Result<(), EngineError> {
        for region in regions {
            match self.engine.lookups.availability_zones(region).await {
                Ok(zones) => {
                    self.answers.zones.insert(region.clone(), zones);
                }
                Err(e) => self.soft(format!("{}: Fn::GetAZs needs {e}", self.input.source))?,
            }
        }
        Ok(())
    }

    async fn exports(&mut self, names: &BTreeSet<String>) -> Result<(), EngineError> {
        for name in names {
            if let Some(v) = self.engine.find_export(&self.input.name, name).await? {
                self.refuse_masked(&v, &format!("Fn::ImportValue of `{name}`"))?;
                self.answers.exports.insert(name.clone(), v);
            } else if self.engine.cloudformation_fallback {
                match self.engine.lookups.cloudformation_export(name).await {
                    Ok(Some(v)) => {
                        self.answers.exports.insert(name.clone(), v);
                    }
                    Ok(None) => {}
                    Err(e) => self.soft(e.to_string())?,
                }
            }
        }
        Ok(())
    }

    async fn outputs(&mut self, refs: &[StackOutputRef]) -> Result<(), EngineError> {
        let engine = self.engine;
        for r in refs {
            // This store's records of the stack, in the region the reference names (a
            // stack deployed to another region or account by this store's deploys is
            // recorded here under its region).
            let region = r.region.as_deref().unwrap_or(&engine.region);
            let stream = stackflow_events::StreamId::new(region, &r.stack_name);
            let state = stackflow_events::load_state(engine.store.as_ref(), &stream).await?;
            let own = state.outputs.get(&r.output_name).cloned();
            let v = match own {
                Some(v) => {
                    let what = format!("Fn::GetStackOutput of {}.{}", r.stack_name, r.output_name);
                    self.refuse_masked(&v, &what)?;
                    Some(v)
                }
                None if engine.cloudformation_fallback => {
                    match engine.lookups.cloudformation_output(r).await {
                        Ok(v) => v,
                        Err(e) => {
                            self.soft(e.to_string())?;
                            None
                        }
                    }
                }
                None => None,
            };
            if let Some(v) = v {
                self.answers.outputs.push((r.clone(), v));
            }
        }
        Ok(())
    }

    async fn ssm(&mut self, names: &BTreeSet<String>) -> Result<(), EngineError> {
        for name in names {
            match self.engine.lookups.ssm_parameter(name).await {
                Ok(Some(v)) => {
                    self.answers.ssm.insert(name.clone(), v);
                }
                Ok(None) => {}
                Err(e) => self.soft(e.to_string())?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn get_azs_regions_are_found_anywhere() {
        let mut out = BTreeSet::new();
        let v = json!({
            "A": {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
            "B": [{"Fn::GetAZs": "eu-west-1"}],
            "C": {"Fn::GetAZs": {"Ref": "AWS::Region"}},
            "D": "Fn::GetAZs"
        });
        get_azs_regions(&v, "us-east-1", &mut out);
        assert_eq!(
            out.into_iter().collect::<Vec<_>>(),
            vec!["eu-west-1".to_string(), "us-east-1".to_string()]
        );
    }
}
