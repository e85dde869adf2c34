//! Every template of cfn-lint's "good" test fixtures plans, or fails with a clear error
//! (one that names where in the template), and never panics.
//!
//! The templates are another project's test data and are not copied into this one: the
//! test reads them from `STACKFLOW_CFN_LINT_CORPUS`, or from `../shared/corpus/cfn-lint-good`
//! beside the workspace, and passes with a note when neither exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::plan::{CurrentState, PlanInput, SyntheticEnvironment, plan};
use stackflow_core::template::{Parameter, StackTemplate, load_path};
use stackflow_core::{ErrorKind, TemplateError};

fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("STACKFLOW_CFN_LINT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/cfn-lint-good")
        });
    dir.is_dir().then_some(dir)
}

/// Every template file under `dir`, sorted.
fn templates(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            if p.is_dir() {
                dirs.push(p);
            } else if !name.starts_with('_')
                && [".yaml", ".yml", ".json", ".template"]
                    .iter()
                    .any(|x| name.ends_with(x))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A value for a parameter without a `Default`, as a user would pass it: the first
/// allowed value, the first of a few usual values that matches the `AllowedPattern`, or
/// a value of the parameter's type.
fn dummy(p: &Parameter) -> String {
    if let Some(v) = p.allowed_values.as_ref().and_then(|a| a.first()) {
        return v.clone();
    }
    if let Some(pattern) = &p.allowed_pattern
        && let Ok(re) = regex::Regex::new(&format!("^(?:{pattern})$"))
    {
        let usual = [
            "dummy",
            "a",
            "1",
            "10.0.0.0/8",
            "/dummy",
            "/",
            "dev",
            "prod",
            "abc123",
            "arn:aws:iam::123456789012:role/dummy",
            "user@example.com",
        ];
        if let Some(v) = usual.iter().find(|v| re.is_match(v)) {
            return v.to_string();
        }
    }
    let base = match p.ty.as_str() {
        "Number" => p.min_value.map_or("1".to_string(), |m| m.to_string()),
        "List<Number>" => "1,2".to_string(),
        "CommaDelimitedList" => "a,b".to_string(),
        t if t.starts_with("AWS::SSM::Parameter::Value<") => "/dummy/parameter".to_string(),
        t if t.contains("VPC::Id") => "vpc-0123456789abcdef0".to_string(),
        t if t.contains("Subnet::Id") => "subnet-0123456789abcdef0".to_string(),
        t if t.contains("SecurityGroup::Id") => "sg-0123456789abcdef0".to_string(),
        t if t.contains("Image::Id") => "ami-0123456789abcdef0".to_string(),
        t if t.starts_with("List<") => "a,b".to_string(),
        _ => "dummy".to_string(),
    };
    let min = usize::try_from(p.min_length.unwrap_or(0)).unwrap_or(0);
    format!("{base:x<min$}")
}

/// What happened to one template: `planned`, or the error.
fn plan_file(file: &Path) -> Result<usize, TemplateError> {
    let stacks = load_path(file)?;
    let mut planned = 0;
    for s in &stacks {
        plan_stack(s)?;
        planned += 1;
    }
    Ok(planned)
}

fn plan_stack(s: &StackTemplate) -> Result<(), TemplateError> {
    let given: IndexMap<String, String> = s
        .template
        .parameters
        .iter()
        .filter(|(_, p)| p.default.is_none())
        .map(|(n, p)| (n.clone(), dummy(p)))
        .collect();
    let params = bind_parameters(&s.template, &given)?;
    let pseudo = Pseudo {
        region: "us-east-1".into(),
        account_id: Some("123456789012".into()),
        stack_name: s.name.clone(),
        stack_id: None,
    };
    plan(&PlanInput {
        stack: &s.name,
        template: &s.template,
        parameters: &params,
        pseudo: &pseudo,
        state: &CurrentState::default(),
        env: &SyntheticEnvironment,
        digest_key: None,
        secret_digests: None,
    })
    .map(|_| ())
}

/// Why a template does not plan, in a few words (what the report groups by).
fn reason(e: &TemplateError) -> String {
    let m = &e.message;
    let short = if m.starts_with("transform `") {
        "transform not supported".to_string()
    } else if m.starts_with("intrinsic function `") {
        m.split('`').take(2).collect::<Vec<_>>().join("`") + "` not supported"
    } else {
        m.chars().take(60).collect()
    };
    format!("{:?}: {short}", e.kind)
}

#[test]
fn every_good_template_plans_or_fails_clearly() {
    let Some(dir) = corpus() else {
        eprintln!("cfn-lint-good: no corpus (set STACKFLOW_CFN_LINT_CORPUS); skipped");
        return;
    };
    let files = templates(&dir);
    let mut planned = 0;
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let shown = file
            .strip_prefix(&dir)
            .unwrap_or(file)
            .display()
            .to_string();
        let f = file.clone();
        let result = std::thread::spawn(move || plan_file(&f))
            .join()
            .unwrap_or_else(|_| panic!("{shown}: panicked"));
        match result {
            Ok(_) => planned += 1,
            Err(e) => {
                assert!(!e.message.is_empty(), "{shown}: an empty message");
                let whole = matches!(e.kind, ErrorKind::Syntax | ErrorKind::Io);
                assert!(
                    whole || !e.path.is_empty(),
                    "{shown}: an error that names no place: {e}"
                );
                assert!(
                    e.file.is_some() || !e.path.is_empty(),
                    "{shown}: an error that names neither the file nor a place: {e}"
                );
                reasons.entry(reason(&e)).or_default().push(shown);
            }
        }
    }
    let failed: usize = reasons.values().map(Vec::len).sum();
    eprintln!(
        "cfn-lint-good: {} templates, {planned} plan, {failed} fail:",
        files.len()
    );
    for (r, fs) in &reasons {
        eprintln!("  {:>3}  {r}  ({})", fs.len(), fs.join(", "));
    }
    assert_eq!(planned + failed, files.len());
}
