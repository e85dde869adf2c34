//! CDK cloud assemblies: `manifest.json`, its stack artifacts, their order and their
//! nested stacks.

use std::collections::{HashMap, HashSet};
use std::path::{Path as FsPath, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use super::confine::Root;
use super::{Environment, NestedTemplate, StackTemplate, Template, load_template_file};
use crate::error::{ErrorKind, Path, Result, TemplateError};
use crate::limits::{
    MAX_NESTED_STACK_DEPTH, MAX_NESTED_STACKS, MAX_TEMPLATE_BYTES, read_bounded, show_bytes,
};

fn assembly_error(file: &FsPath, message: impl Into<String>) -> TemplateError {
    TemplateError::new(ErrorKind::Assembly, "", message).in_file(file.display())
}

/// Reads a cloud assembly directory: every stack artifact of `manifest.json` (and of nested
/// assemblies, such as CDK stages), in an order where each stack comes after the stacks it
/// depends on.
pub fn load_assembly(dir: &FsPath) -> Result<Vec<StackTemplate>> {
    let mut stacks = Vec::new();
    let root = Root::new(dir)
        .map_err(|e| assembly_error(dir, format!("cannot read the cloud assembly: {e}")))?;
    collect(&root, dir, &mut stacks, 0)?;
    order(stacks, &dir.join("manifest.json"))
}

/// `named` (relative to `dir`, as the manifest `manifest_path` gives it) inside the
/// assembly, or the error that says where it leads.
fn inside(root: &Root, dir: &FsPath, named: &str, manifest_path: &FsPath) -> Result<PathBuf> {
    root.resolve(dir, named)
        .map_err(|why| assembly_error(manifest_path, why.to_string()))
}

fn collect(
    root: &Root,
    dir: &FsPath,
    out: &mut Vec<(String, StackTemplate)>,
    depth: usize,
) -> Result<()> {
    let manifest_path = dir.join("manifest.json");
    if depth > 8 {
        return Err(assembly_error(
            &manifest_path,
            "cloud assemblies nested too deeply",
        ));
    }
    let manifest = read_manifest(&manifest_path)?;
    refuse_missing_context(&manifest, &manifest_path)?;
    let artifacts = manifest
        .get("artifacts")
        .and_then(Value::as_object)
        .ok_or_else(|| assembly_error(&manifest_path, "the manifest has no `artifacts`"))?;
    let stack_ids: HashSet<&str> = artifacts
        .iter()
        .filter(|(_, a)| a.get("type").and_then(Value::as_str) == Some("aws:cloudformation:stack"))
        .map(|(id, _)| id.as_str())
        .collect();
    let asset_manifests = asset_manifests(root, dir, &manifest_path, artifacts)?;
    for (id, artifact) in artifacts {
        match artifact.get("type").and_then(Value::as_str) {
            Some("aws:cloudformation:stack") => {
                let at = (root, dir, manifest_path.as_path());
                let mut stack = stack_artifact(at, id, artifact, &stack_ids)?;
                stack.assets = artifact
                    .get("dependencies")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .find_map(|d| asset_manifests.get(d).cloned());
                out.push((id.clone(), stack));
            }
            Some("cdk:cloud-assembly") => {
                if let Some(sub) = artifact
                    .get("properties")
                    .and_then(|p| p.get("directoryName"))
                    .and_then(Value::as_str)
                {
                    let sub = inside(root, dir, sub, &manifest_path)?;
                    collect(root, &sub, out, depth + 1)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The files of the asset manifest artifacts (`cdk:asset-manifest`) of a manifest, by
/// artifact id; each, and every asset source it names, inside the assembly.
fn asset_manifests(
    root: &Root,
    dir: &FsPath,
    manifest_path: &FsPath,
    artifacts: &serde_json::Map<String, Value>,
) -> Result<HashMap<String, PathBuf>> {
    let mut out = HashMap::new();
    for (id, a) in artifacts {
        if a.get("type").and_then(Value::as_str) != Some("cdk:asset-manifest") {
            continue;
        }
        let Some(file) = a
            .get("properties")
            .and_then(|p| p.get("file"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let file = inside(root, dir, file, manifest_path)?;
        if file.is_file() {
            check_sources(root, &file)?;
        }
        out.insert(id.clone(), file);
    }
    Ok(out)
}

/// Fails when a source the asset manifest `file` names (a file asset's path, an image's
/// directory) resolves outside the assembly.
fn check_sources(root: &Root, file: &FsPath) -> Result<()> {
    // A manifest that does not parse fails where its assets are published, as before;
    // nothing of it is read until then.
    let Ok(manifest) = crate::asset_manifest::load_asset_manifest(file) else {
        return Ok(());
    };
    let zipped = |f: &crate::asset_manifest::FileAsset| {
        f.packaging == crate::asset_manifest::Packaging::ZipDirectory
    };
    let sources = manifest
        .files
        .iter()
        .map(|f| (&f.id, Some(&f.path), zipped(f)))
        .chain(
            manifest
                .images
                .iter()
                .map(|i| (&i.id, i.directory.as_ref(), false)),
        );
    for (id, path, zip) in sources {
        let Some(path) = path else { continue };
        root.check(path)
            .and_then(|()| if zip { root.check_tree(path) } else { Ok(()) })
            .map_err(|why| assembly_error(file, format!("asset `{id}`: {why}")))?;
    }
    Ok(())
}

/// A context value a CDK app asked for and did not have when it was synthesized (the
/// manifest's `missing`): its templates hold a placeholder (`dummy-value-for-...`) where
/// the value goes, until a lookup gives it and the app runs again.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingContext {
    /// The context key, e.g. `ssm:account=1:parameterName=/p:region=us-east-1`.
    pub key: String,
    /// The lookup that gives it, e.g. `ssm`, `availability-zones`, `vpc-provider`.
    pub provider: String,
    /// What to look up (`account`, `region`, `lookupRoleArn`, the provider's own).
    pub props: serde_json::Map<String, Value>,
}

/// The context values the manifest of `dir` says its app was missing.
pub fn missing_context(dir: &FsPath) -> Result<Vec<MissingContext>> {
    let manifest_path = dir.join("manifest.json");
    Ok(missing_of(&read_manifest(&manifest_path)?))
}

fn missing_of(manifest: &Value) -> Vec<MissingContext> {
    let entries = manifest.get("missing").and_then(Value::as_array);
    entries
        .into_iter()
        .flatten()
        .filter_map(|m| {
            Some(MissingContext {
                key: m.get("key")?.as_str()?.to_string(),
                provider: m.get("provider")?.as_str()?.to_string(),
                props: m.get("props")?.as_object()?.clone(),
            })
        })
        .collect()
}

/// Refuses an assembly synthesized without the context its app asked for: its templates
/// hold placeholders, which would be deployed as values.
fn refuse_missing_context(manifest: &Value, manifest_path: &FsPath) -> Result<()> {
    let missing = missing_of(manifest);
    if missing.is_empty() {
        return Ok(());
    }
    let keys: Vec<String> = missing
        .iter()
        .map(|m| format!("{} ({} lookup)", m.key, m.provider))
        .collect();
    Err(assembly_error(
        manifest_path,
        format!(
            "the app was synthesized without context it looks up, so its templates hold \
             placeholders (such as dummy-value-for-...) where the values go: {}",
            keys.join(", ")
        ),
    )
    .with_hint(
        "run stackflow in the app's folder (it looks the values up and runs the app again), \
         or run `cdk synth` there first, which saves them in cdk.context.json",
    ))
}

/// The manifest of a cloud assembly, as JSON.
fn read_manifest(manifest_path: &FsPath) -> Result<Value> {
    let text = read_bounded(manifest_path)
        .map_err(|e| {
            assembly_error(manifest_path, format!("cannot read the manifest: {e}")).with_hint(
                "point stackflow at a template file or at a cdk.out directory made by `cdk synth`",
            )
        })?
        .ok_or_else(|| {
            assembly_error(
                manifest_path,
                format!(
                    "the manifest is more than {} long",
                    show_bytes(MAX_TEMPLATE_BYTES)
                ),
            )
        })?;
    serde_json::from_str(&text)
        .map_err(|e| assembly_error(manifest_path, format!("invalid JSON: {e}")))
}

/// One stack artifact `id` of the manifest of `dir`: its template (and nested templates),
/// its name, the stacks among `stack_ids` it depends on, and its parameters.
fn stack_artifact(
    (root, dir, manifest_path): (&Root, &FsPath, &FsPath),
    id: &str,
    artifact: &Value,
    stack_ids: &HashSet<&str>,
) -> Result<StackTemplate> {
    let props = artifact.get("properties").cloned().unwrap_or(Value::Null);
    let file = props
        .get("templateFile")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            assembly_error(
                manifest_path,
                format!("stack artifact `{id}` has no `properties.templateFile`"),
            )
        })?;
    let template_path = inside(root, dir, file, manifest_path)?;
    let template = load_template_file(&template_path)?;
    let nested = walk_nested(root, dir, &template_path, &template)?;
    let name = props
        .get("stackName")
        .and_then(Value::as_str)
        .unwrap_or(id)
        .to_string();
    let dependencies = artifact
        .get("dependencies")
        .and_then(Value::as_array)
        .map(|deps| {
            deps.iter()
                .filter_map(Value::as_str)
                .filter(|d| stack_ids.contains(d))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let display_name = artifact
        .get("displayName")
        .and_then(Value::as_str)
        .map(str::to_string);
    let environment = artifact
        .get("environment")
        .and_then(Value::as_str)
        .and_then(Environment::parse)
        .unwrap_or_default()
        .with_role(props.get("assumeRoleArn").and_then(Value::as_str));
    Ok(StackTemplate {
        name,
        display_name,
        file: template_path,
        template,
        dependencies,
        parameters: stack_parameters(&props),
        nested,
        assets: None,
        environment,
    })
}

/// `properties.parameters` of a stack artifact, each value as text.
fn stack_parameters(props: &Value) -> IndexMap<String, String> {
    props
        .get("parameters")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Orders stacks so that dependencies come first, keeping manifest order otherwise.
/// Dependencies are artifact ids; they are rewritten to stack names.
fn order(stacks: Vec<(String, StackTemplate)>, manifest: &FsPath) -> Result<Vec<StackTemplate>> {
    let names: HashMap<String, String> = stacks
        .iter()
        .map(|(id, s)| (id.clone(), s.name.clone()))
        .collect();
    let mut pending: Vec<(String, StackTemplate)> = stacks;
    let mut done: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    while !pending.is_empty() {
        let before = pending.len();
        let mut rest = Vec::new();
        for (id, s) in pending {
            if s.dependencies.iter().all(|d| done.contains(d)) {
                done.insert(id);
                out.push(s);
            } else {
                rest.push((id, s));
            }
        }
        if rest.len() == before {
            let ids: Vec<_> = rest.iter().map(|(id, _)| id.as_str()).collect();
            return Err(assembly_error(
                manifest,
                format!(
                    "stacks depend on each other in a circle: {}",
                    ids.join(", ")
                ),
            ));
        }
        pending = rest;
    }
    for s in &mut out {
        s.dependencies = s
            .dependencies
            .iter()
            .map(|d| names.get(d).cloned().unwrap_or_else(|| d.clone()))
            .collect();
    }
    Ok(out)
}

/// Finds the templates of the nested stacks of `template` (read from `file`): CDK writes
/// each one as a file asset beside the parent and names it in the resource's
/// `aws:asset:path` metadata. Nested stacks may nest [`MAX_NESTED_STACK_DEPTH`] levels deep
/// and load [`MAX_NESTED_STACKS`] templates in all; a template that includes itself is an
/// error.
/// Their paths stay inside `dir`.
pub(crate) fn load_nested(
    dir: &FsPath,
    file: &FsPath,
    template: &Template,
) -> Result<IndexMap<String, NestedTemplate>> {
    let root = Root::new(dir)
        .map_err(|e| assembly_error(file, format!("cannot read the template's directory: {e}")))?;
    walk_nested(&root, dir, file, template)
}

/// [`load_nested`] inside `root`.
fn walk_nested(
    root: &Root,
    dir: &FsPath,
    file: &FsPath,
    template: &Template,
) -> Result<IndexMap<String, NestedTemplate>> {
    let mut walk = NestedWalk {
        root,
        dir,
        chain: vec![file.to_path_buf()],
        loaded: 0,
    };
    walk.load(template)
}

/// The walk through nested stack templates: the files from the top template down to the
/// one being read, and how many were loaded.
struct NestedWalk<'d> {
    root: &'d Root,
    dir: &'d FsPath,
    chain: Vec<PathBuf>,
    loaded: usize,
}

impl NestedWalk<'_> {
    fn load(&mut self, template: &Template) -> Result<IndexMap<String, NestedTemplate>> {
        let mut out = IndexMap::new();
        for (id, r) in &template.resources {
            if !r.is_nested_stack() {
                continue;
            }
            let Some(asset) = r
                .metadata
                .as_ref()
                .and_then(|m| m.get("aws:asset:path"))
                .and_then(Value::as_str)
            else {
                continue;
            };
            let parent = self.chain.last().cloned().unwrap_or_default();
            let file = self.root.resolve(self.dir, asset).map_err(|why| {
                TemplateError::new(
                    ErrorKind::Assembly,
                    Path::from_keys(["Resources", id.as_str(), "Metadata", "aws:asset:path"]),
                    why.to_string(),
                )
                .in_file(parent.display())
            })?;
            if !file.is_file() {
                continue;
            }
            self.check(id, &file)?;
            let nested_template = load_template_file(&file)?;
            self.chain.push(file.clone());
            let nested = self.load(&nested_template);
            self.chain.pop();
            out.insert(
                id.clone(),
                NestedTemplate {
                    file,
                    template: nested_template,
                    nested: nested?,
                },
            );
        }
        Ok(out)
    }

    /// Fails when the nested stack `id` of the template being read, in `file`, closes a
    /// circle or goes past the limits.
    fn check(&mut self, id: &str, file: &FsPath) -> Result<()> {
        let parent = self.chain.last().cloned().unwrap_or_default();
        let path = Path::from_keys(["Resources", id]);
        let canonical = |f: &FsPath| std::fs::canonicalize(f).unwrap_or_else(|_| f.to_path_buf());
        let target = canonical(file);
        if let Some(from) = self.chain.iter().position(|f| canonical(f) == target) {
            let names: Vec<String> = self.chain[from..]
                .iter()
                .chain([&file.to_path_buf()])
                .map(|f| f.display().to_string())
                .collect();
            return Err(TemplateError::new(
                ErrorKind::Cycle,
                path,
                format!(
                    "nested stack templates include each other in a circle: {}",
                    names.join(" -> ")
                ),
            )
            .in_file(parent.display()));
        }
        if self.chain.len() > MAX_NESTED_STACK_DEPTH {
            return Err(TemplateError::new(
                ErrorKind::Limit,
                path,
                format!("nested stacks nest more than {MAX_NESTED_STACK_DEPTH} levels deep"),
            )
            .in_file(parent.display()));
        }
        self.loaded += 1;
        if self.loaded > MAX_NESTED_STACKS {
            return Err(TemplateError::new(
                ErrorKind::Limit,
                path,
                format!("the stack has more than {MAX_NESTED_STACKS} nested stack templates"),
            )
            .in_file(parent.display()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An assembly whose app asked for an SSM lookup it did not have: its template holds
    /// CDK's placeholder.
    fn assembly_missing_a_lookup(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let key = "ssm:account=111111111111:parameterName=/app/setting:region=us-east-1";
        let manifest = json!({"version": "36.0.0",
            "artifacts": {"App": {"type": "aws:cloudformation:stack",
                "properties": {"templateFile": "App.template.json"}}},
            "missing": [{"key": key, "provider": "ssm", "props": {
                "account": "111111111111", "region": "us-east-1",
                "parameterName": "/app/setting", "dummyValue": "dummy-value-for-/app/setting"}}]});
        std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
        let template = json!({"Resources": {"T": {"Type": "AWS::SNS::Topic",
            "Properties": {"DisplayName": "dummy-value-for-/app/setting"}}}});
        std::fs::write(dir.join("App.template.json"), template.to_string()).unwrap();
        dir
    }

    #[test]
    fn an_assembly_missing_the_context_it_looks_up_is_refused_with_the_keys() {
        let dir = assembly_missing_a_lookup("missing-context");
        let missing = missing_context(&dir).unwrap();
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].provider, "ssm");
        assert_eq!(missing[0].props["parameterName"], "/app/setting");
        let refused = load_assembly(&dir).unwrap_err().to_string();
        assert!(
            refused.contains("manifest.json")
                && refused.contains("placeholders (such as dummy-value-for-...)")
                && refused.contains(
                    "ssm:account=111111111111:parameterName=/app/setting:region=us-east-1 (ssm lookup)"
                )
                && refused.contains("cdk.context.json"),
            "{refused}"
        );
        // With the value given (the app run again), nothing is missing.
        let mut manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
                .unwrap();
        manifest.as_object_mut().unwrap().remove("missing");
        std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
        assert!(missing_context(&dir).unwrap().is_empty());
        assert_eq!(load_assembly(&dir).unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
