//! Templates: parsing (JSON, YAML with short-form tags), the model, and CDK cloud
//! assemblies.

mod assembly;
mod confine;
mod model;
mod parse;
mod placeholders;
mod reader;

use std::path::{Path as FsPath, PathBuf};

use indexmap::IndexMap;

pub use assembly::{MissingContext, load_assembly, missing_context};
pub use model::{Output, Parameter, Policy, Resource, Template, type_name};
pub use parse::parse_text;
pub use placeholders::{
    check_literal_placeholders, check_stacks_placeholders, literal_placeholders,
};

use crate::error::{ErrorKind, Result, TemplateError};
use crate::limits::read_bounded;

/// A template to deploy as one stack, with what the source tells about it.
#[derive(Debug, Clone, PartialEq)]
pub struct StackTemplate {
    /// The stack name: a cloud assembly's stack name, or the template file's stem.
    pub name: String,
    /// A cloud assembly's display path of the stack (`Stage/Api`), when it gives one.
    pub display_name: Option<String>,
    /// The file the template was read from.
    pub file: PathBuf,
    /// The template.
    pub template: Template,
    /// Names of the stacks this one depends on (from a cloud assembly's manifest).
    pub dependencies: Vec<String>,
    /// Parameter values the cloud assembly passes.
    pub parameters: IndexMap<String, String>,
    /// Nested stacks whose template was found beside this one, by logical id.
    pub nested: IndexMap<String, NestedTemplate>,
    /// The stack's asset manifest (`<Stack>.assets.json` of a cloud assembly), when it
    /// has one.
    pub assets: Option<PathBuf>,
    /// Where a cloud assembly pins the stack (its manifest `environment`).
    pub environment: Environment,
}

/// The account and region a cloud assembly pins a stack to (`aws://<account>/<region>`);
/// each is `None` when the stack is environment-agnostic there (`unknown-account`,
/// `unknown-region`), and both for a template file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    pub account: Option<String>,
    pub region: Option<String>,
    /// The role a deploy of the stack takes (the stack artifact's `assumeRoleArn`, its
    /// `${AWS::Partition}`, `${AWS::AccountId}` and `${AWS::Region}` filled in from this
    /// environment), when the manifest names one.
    pub role: Option<String>,
}

impl Environment {
    /// Reads a manifest's `aws://<account>/<region>`; `None` when it is not of that form.
    pub fn parse(text: &str) -> Option<Environment> {
        let (account, region) = text.strip_prefix("aws://")?.split_once('/')?;
        let known = |v: &str, unknown: &str| (!v.is_empty() && v != unknown).then(|| v.to_string());
        Some(Environment {
            account: known(account, "unknown-account"),
            region: known(region, "unknown-region"),
            role: None,
        })
    }

    /// This environment with the role `arn` (a manifest's `assumeRoleArn`), its
    /// placeholders filled in; kept only when none is left unfilled (an
    /// environment-agnostic stack's role names no account: it is not taken).
    pub fn with_role(mut self, arn: Option<&str>) -> Environment {
        let filled = arn.map(|arn| {
            let mut arn = arn.to_string();
            if let Some(region) = &self.region {
                arn = arn
                    .replace("${AWS::Region}", region)
                    .replace("${AWS::Partition}", crate::partition::partition(region));
            }
            if let Some(account) = &self.account {
                arn = arn.replace("${AWS::AccountId}", account);
            }
            arn
        });
        self.role = filled.filter(|arn| !arn.contains("${"));
        self
    }

    /// What differs between this environment and the `region` and `account` a command
    /// runs in (an unknown account differs from none).
    pub fn mismatch(&self, region: &str, account: Option<&str>) -> Option<String> {
        let mut differ = Vec::new();
        if let Some(pinned) = self.region.as_deref().filter(|r| *r != region) {
            differ.push(format!("region {pinned}, not {region}"));
        }
        if let Some(pinned) = self.account.as_deref()
            && account.is_some_and(|a| a != pinned)
        {
            differ.push(format!(
                "account {pinned}, not {}",
                account.unwrap_or_default()
            ));
        }
        (!differ.is_empty()).then(|| differ.join(", "))
    }
}

impl std::fmt::Display for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "aws://{}/{}",
            self.account.as_deref().unwrap_or("unknown-account"),
            self.region.as_deref().unwrap_or("unknown-region")
        )
    }
}

/// The template of a nested stack (`AWS::CloudFormation::Stack`) found in a cloud assembly.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NestedTemplate {
    /// The file the template was read from.
    pub file: PathBuf,
    /// The template.
    pub template: Template,
    /// Its own nested stacks.
    pub nested: IndexMap<String, NestedTemplate>,
}

/// The files of the nested stacks' templates in `nested`, at every depth.
pub fn nested_files(nested: &IndexMap<String, NestedTemplate>) -> Vec<PathBuf> {
    nested
        .values()
        .flat_map(|n| {
            let mut files = vec![n.file.clone()];
            files.extend(nested_files(&n.nested));
            files
        })
        .collect()
}

/// Reads and parses one template file (of at most [`MAX_TEMPLATE_BYTES`]).
pub fn load_template_file(file: &FsPath) -> Result<Template> {
    let shown = file.display().to_string();
    let text = read_bounded(file)
        .map_err(|e| {
            TemplateError::new(ErrorKind::Io, "", format!("cannot read the template: {e}"))
                .in_file(&shown)
        })?
        .ok_or_else(|| {
            let len = std::fs::metadata(file).map_or(0, |m| m.len());
            parse::too_large(usize::try_from(len).unwrap_or(usize::MAX)).in_file(&shown)
        })?;
    let value = parse_text(&text, &shown)?;
    Template::from_value(&value).map_err(|e| e.in_file(&shown))
}

/// The default stack name for a template file: its file name without the extension and
/// without a `.template` suffix (`MyStack.template.json` is `MyStack`).
pub fn stack_name_from_file(file: &FsPath) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "stack".to_string());
    let mut stem = name.as_str();
    for ext in [".json", ".yaml", ".yml", ".template", ".txt"] {
        if let Some(s) = stem.strip_suffix(ext) {
            stem = s;
        }
    }
    if let Some(s) = stem.strip_suffix(".template") {
        stem = s;
    }
    stem.to_string()
}

/// Loads what a user points stackflow at: a template file, or a cloud assembly directory
/// (`cdk.out`, with a `manifest.json`). The stacks come in deployment order.
pub fn load_path(path: &FsPath) -> Result<Vec<StackTemplate>> {
    if path.is_dir() {
        return load_assembly(path);
    }
    if !path.exists() {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        let cdk_app = path.file_name().is_some_and(|n| n == "cdk.out")
            || parent
                .unwrap_or(FsPath::new("."))
                .join("cdk.json")
                .is_file();
        let hint = if cdk_app {
            "run `cdk synth` first: it writes the cloud assembly (cdk.out) that stackflow reads"
        } else {
            "give a template file (.json, .yaml, .yml, .template) or a cdk.out directory"
        };
        return Err(
            TemplateError::new(ErrorKind::Io, "", "no such file or directory")
                .in_file(path.display())
                .with_hint(hint),
        );
    }
    let template = load_template_file(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => FsPath::new("."),
    };
    let nested = assembly::load_nested(dir, path, &template)?;
    Ok(vec![StackTemplate {
        display_name: None,
        name: stack_name_from_file(path),
        file: path.to_path_buf(),
        template,
        dependencies: vec![],
        parameters: IndexMap::new(),
        nested,
        assets: None,
        environment: Environment::default(),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stacks_role_is_filled_in_from_its_environment() {
        let cdk = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/cdk-hnb659fds-deploy-role-${AWS::AccountId}-${AWS::Region}";
        let pinned = Environment::parse("aws://111111111111/cn-north-1")
            .unwrap()
            .with_role(Some(cdk));
        assert_eq!(
            pinned.role.as_deref(),
            Some(
                "arn:aws-cn:iam::111111111111:role/cdk-hnb659fds-deploy-role-111111111111-cn-north-1"
            )
        );
        // An environment-agnostic stack's role names no account: it is not taken.
        let agnostic = Environment::default().with_role(Some(cdk));
        assert_eq!(agnostic.role, None);
        let none = Environment::parse("aws://111111111111/eu-west-1")
            .unwrap()
            .with_role(None);
        assert_eq!(none.role, None);
    }

    #[test]
    fn environments_read_as_cdk_writes_them() {
        let pinned = Environment::parse("aws://111111111111/eu-west-1").unwrap();
        assert_eq!(pinned.account.as_deref(), Some("111111111111"));
        assert_eq!(pinned.region.as_deref(), Some("eu-west-1"));
        assert_eq!(pinned.to_string(), "aws://111111111111/eu-west-1");
        let agnostic = Environment::parse("aws://unknown-account/unknown-region").unwrap();
        assert_eq!(agnostic, Environment::default());
        assert_eq!(agnostic.mismatch("us-east-1", Some("2")), None);
        assert_eq!(Environment::parse("gcp://x/y"), None);
        assert_eq!(pinned.mismatch("eu-west-1", Some("111111111111")), None);
        assert_eq!(
            pinned.mismatch("eu-west-1", None),
            None,
            "an account not known"
        );
        assert_eq!(
            pinned.mismatch("us-east-1", Some("222222222222")).unwrap(),
            "region eu-west-1, not us-east-1, account 111111111111, not 222222222222"
        );
    }

    #[test]
    fn stack_names_from_files() {
        assert_eq!(
            stack_name_from_file(FsPath::new("a/MyStack.template.json")),
            "MyStack"
        );
        assert_eq!(stack_name_from_file(FsPath::new("web.yaml")), "web");
        assert_eq!(stack_name_from_file(FsPath::new("x.yml")), "x");
        assert_eq!(stack_name_from_file(FsPath::new("x.template")), "x");
    }

    #[test]
    fn a_missing_file_says_what_to_give() {
        let e = load_path(FsPath::new("/nonexistent/t.yaml")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.to_string().contains("/nonexistent/t.yaml"));
        assert!(e.hint.is_some());
        // A CDK app's missing assembly says how to make it.
        let e = load_path(FsPath::new("/nonexistent/cdk.out")).unwrap_err();
        assert!(e.to_string().contains("run `cdk synth` first"), "{e}");
    }
}
