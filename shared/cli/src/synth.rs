//! Running a CDK app into a cloud assembly, as the CDK CLI does: the `app` of `cdk.json`
//! (or `--app`) is run by `sh -c` in the app's folder with `CDK_OUTDIR` (where to write
//! the assembly) and `CDK_CONTEXT_JSON` (the context of `cdk.json`, then
//! `cdk.context.json`, then each `-c KEY=VALUE`), and `CDK_DEFAULT_REGION` /
//! `CDK_DEFAULT_ACCOUNT` when known. The app's own output goes to stderr, so that the
//! command's stdout (`--json`) stays what the command prints.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Map, Value};

use crate::args::{GlobalArgs, SynthArgs};

/// The project file of a CDK app.
pub const CDK_JSON: &str = "cdk.json";
/// The context values the CDK CLI keeps beside it (lookups).
const CDK_CONTEXT_JSON: &str = "cdk.context.json";

/// What a CDK app's folder says about running it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Project {
    /// The command that synthesizes the app.
    pub app: Option<String>,
    /// Where it writes the assembly, relative to the folder.
    pub output: Option<String>,
    /// The context of `cdk.json`, then of `cdk.context.json`.
    pub context: Map<String, Value>,
}

impl Project {
    /// Reads `cdk.json` (and `cdk.context.json`) in `dir`; `None` when there is no
    /// `cdk.json`.
    pub fn read(dir: &Path) -> anyhow::Result<Option<Project>> {
        let file = dir.join(CDK_JSON);
        if !file.is_file() {
            return Ok(None);
        }
        let json = read_object(&file)?;
        let text = |key: &str| -> anyhow::Result<Option<String>> {
            match json.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => bail!(
                    "{}: `{key}` must be a string, found {other}",
                    file.display()
                ),
            }
        };
        let mut context = match json.get("context") {
            Some(Value::Object(c)) => c.clone(),
            None => Map::new(),
            Some(other) => bail!(
                "{}: `context` must be an object, found {other}",
                file.display()
            ),
        };
        let saved = dir.join(CDK_CONTEXT_JSON);
        if saved.is_file() {
            context.extend(read_object(&saved)?);
        }
        Ok(Some(Project {
            app: text("app")?,
            output: text("output")?,
            context,
        }))
    }
}

fn read_object(file: &Path) -> anyhow::Result<Map<String, Value>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{}: cannot be read", file.display()))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => bail!("{}: expected a JSON object", file.display()),
        Err(e) => bail!("{}: not JSON: {e}", file.display()),
    }
}

/// How to run an app: its command, where it writes, with what context.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub command: String,
    /// The folder it runs in.
    pub dir: PathBuf,
    pub output: PathBuf,
    pub context: Map<String, Value>,
}

/// What to read: `path` itself, an assembly directory given as `--app`, or the app to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Path(PathBuf),
    App(Run),
}

/// Decides what a command reads, in folder `dir`: `path` when given; else `--app` (a
/// directory is an assembly to read, anything else a command); else `cdk.json`'s app.
pub fn source(dir: &Path, path: Option<PathBuf>, synth: &SynthArgs) -> anyhow::Result<Source> {
    if let Some(path) = path {
        if synth.app.is_some() {
            bail!("give a PATH or --app, not both");
        }
        return Ok(Source::Path(path));
    }
    let project = Project::read(dir)?;
    let command = match (&synth.app, &project) {
        (Some(app), _) if dir.join(app).is_dir() => return Ok(Source::Path(dir.join(app))),
        (Some(app), _) => app.clone(),
        (None, Some(Project { app: Some(app), .. })) => app.clone(),
        (None, Some(_)) => bail!(
            "{}: no `app` to run: add one (e.g. \"app\": \"node bin/app.js\"), pass --app, \
             or give a cdk.out directory or a template file",
            dir.join(CDK_JSON).display()
        ),
        (None, None) => bail!(
            "nothing to read: give a template file or a cdk.out directory, or run this in a \
             CDK app's folder (one with {CDK_JSON}), or pass --app"
        ),
    };
    let project = project.unwrap_or_default();
    let output = match (&synth.output, &project.output) {
        (Some(out), _) => out.clone(),
        (None, Some(out)) => PathBuf::from(out),
        (None, None) => PathBuf::from("cdk.out"),
    };
    let mut context = project.context;
    for (key, value) in &synth.context {
        context.insert(key.clone(), Value::String(value.clone()));
    }
    Ok(Source::App(Run {
        command,
        dir: dir.to_path_buf(),
        output: dir.join(output),
        context,
    }))
}

/// The cloud assembly (or template) a command reads, with the app run first when it is
/// one: see [`source`]. Runs in the current folder.
pub async fn assembly(
    global: &GlobalArgs,
    path: Option<PathBuf>,
    synth: &SynthArgs,
) -> anyhow::Result<PathBuf> {
    let dir = std::env::current_dir().context("the current folder")?;
    match source(&dir, path, synth)? {
        Source::Path(path) => Ok(path),
        Source::App(run) => {
            let config = crate::aws::load(global).await;
            // The account, when the command already asked STS (no call is made for it).
            let account = global.account.as_ref().and_then(|a| a.as_ref().ok());
            synthesize_with_lookups(run, &config, account.cloned()).await
        }
    }
}

/// Runs the app until it asks for no context it lacks: each time its manifest lists
/// values to look up (`missing`), they are looked up (see [`crate::lookup`]), saved in
/// `cdk.context.json` and given to the app's next run. An app that asks again for what it
/// was given is stopped.
async fn synthesize_with_lookups(
    mut run: Run,
    config: &aws_types::SdkConfig,
    mut account: Option<String>,
) -> anyhow::Result<PathBuf> {
    let region = crate::aws::region(config).ok();
    let mut given = std::collections::BTreeSet::new();
    loop {
        let out = synthesize(&run, region.as_deref(), account.as_deref()).await?;
        let missing = stackflow_core::template::missing_context(&out)?;
        if missing.is_empty() {
            return Ok(out);
        }
        if let Some(again) = missing.iter().find(|m| given.contains(&m.key)) {
            bail!(
                "the CDK app `{}` asks again for context `{}`, which it was given: it does not \
                 read the value it looked up",
                run.command,
                again.key
            );
        }
        let caller = match &account {
            Some(a) => a.clone(),
            None => crate::aws::account_id(config).await.map_err(|why| {
                anyhow!(
                    "the CDK app looks values up in AWS ({}), and the caller's account is \
                     not known: {why}",
                    missing[0].key
                )
            })?,
        };
        account = Some(caller.clone());
        eprintln!(
            "looking up {} context value(s) the app asks for: {}",
            missing.len(),
            missing
                .iter()
                .map(|m| m.key.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let found = crate::lookup::look_up(config, &caller, &missing).await?;
        crate::lookup::save(&run.dir.join(CDK_CONTEXT_JSON), &found)?;
        for f in found {
            given.insert(f.key.clone());
            run.context.insert(f.key, f.value);
        }
    }
}

/// Runs the app; the assembly directory it wrote.
pub async fn synthesize(
    run: &Run,
    region: Option<&str>,
    account: Option<&str>,
) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(&run.output)
        .with_context(|| format!("{}: cannot be made", run.output.display()))?;
    let output = run
        .output
        .canonicalize()
        .with_context(|| format!("{}", run.output.display()))?;
    // A manifest left by an earlier run must not pass for this one's.
    let manifest = output.join("manifest.json");
    if manifest.exists() {
        std::fs::remove_file(&manifest)
            .with_context(|| format!("{}: cannot be replaced", manifest.display()))?;
    }
    eprintln!("synthesizing: {} (into {})", run.command, output.display());
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(&run.command)
        .current_dir(&run.dir)
        .env("CDK_OUTDIR", &output)
        .env(
            "CDK_CONTEXT_JSON",
            Value::Object(run.context.clone()).to_string(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()));
    if let Some(region) = region {
        command.env("CDK_DEFAULT_REGION", region);
    }
    if let Some(account) = account {
        command.env("CDK_DEFAULT_ACCOUNT", account);
    }
    let status = command
        .status()
        .await
        .with_context(|| format!("the CDK app `{}` could not be started", run.command))?;
    if !status.success() {
        return Err(anyhow!(
            "the CDK app `{}` failed ({status}); its output is above",
            run.command
        ));
    }
    if !manifest.is_file() {
        bail!(
            "the CDK app `{}` ended without writing a cloud assembly in {} (does it call \
             app.synth()? does it write to CDK_OUTDIR?)",
            run.command,
            output.display()
        );
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder of the test's own, holding `files`.
    struct Folder(PathBuf);

    impl Folder {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn folder(files: &[(&str, &str)]) -> Folder {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("stackflow-synth-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        Folder(dir)
    }

    fn args(app: Option<&str>, context: &[(&str, &str)]) -> SynthArgs {
        SynthArgs {
            app: app.map(str::to_string),
            context: context
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            output: None,
        }
    }

    #[test]
    fn cdk_json_names_the_app_its_output_and_context() {
        let dir = folder(&[
            (
                "cdk.json",
                r#"{"app": "node bin/app.js", "output": "out", "context": {"a": 1, "b": "x"}}"#,
            ),
            ("cdk.context.json", r#"{"b": "saved", "lookup": true}"#),
        ]);
        let Source::App(run) = source(dir.path(), None, &args(None, &[("a", "2")])).unwrap() else {
            panic!("an app to run");
        };
        assert_eq!(run.command, "node bin/app.js");
        assert_eq!(run.output, dir.path().join("out"));
        // cdk.json, then cdk.context.json, then -c.
        assert_eq!(
            Value::Object(run.context),
            serde_json::json!({"a": "2", "b": "saved", "lookup": true})
        );
    }

    #[test]
    fn a_path_or_an_assembly_given_as_app_is_read_as_it_is() {
        let dir = folder(&[("cdk.json", r#"{"app": "node bin/app.js"}"#)]);
        std::fs::create_dir(dir.path().join("prebuilt")).unwrap();
        let given = source(dir.path(), Some("t.yaml".into()), &args(None, &[])).unwrap();
        assert_eq!(given, Source::Path("t.yaml".into()));
        let app = source(dir.path(), None, &args(Some("prebuilt"), &[])).unwrap();
        assert_eq!(app, Source::Path(dir.path().join("prebuilt")));
        let both = source(dir.path(), Some("t.yaml".into()), &args(Some("x"), &[]));
        assert!(both.unwrap_err().to_string().contains("not both"));
    }

    #[test]
    fn without_a_path_or_cdk_json_the_error_says_what_to_give() {
        let dir = folder(&[]);
        let e = source(dir.path(), None, &args(None, &[])).unwrap_err();
        assert!(e.to_string().contains("cdk.out directory"), "{e}");
        let dir = folder(&[("cdk.json", r#"{"context": {}}"#)]);
        let e = source(dir.path(), None, &args(None, &[])).unwrap_err();
        assert!(e.to_string().contains("no `app` to run"), "{e}");
        let dir = folder(&[("cdk.json", r#"{"app": 3}"#)]);
        let e = source(dir.path(), None, &args(None, &[])).unwrap_err();
        assert!(e.to_string().contains("`app` must be a string"), "{e}");
    }

    #[tokio::test]
    async fn the_app_gets_its_output_folder_and_context_and_must_write_a_manifest() {
        let dir = folder(&[]);
        let run = Run {
            command: "printf '%s' \"$CDK_CONTEXT_JSON\" > \"$CDK_OUTDIR/context.json\" && \
                      echo '{\"version\":\"36.0.0\",\"artifacts\":{}}' > \"$CDK_OUTDIR/manifest.json\" \
                      && printf '%s' \"$CDK_DEFAULT_REGION\" > \"$CDK_OUTDIR/region\""
                .into(),
            dir: dir.path().to_path_buf(),
            output: dir.path().join("cdk.out"),
            context: serde_json::json!({"k": "v"}).as_object().unwrap().clone(),
        };
        let out = synthesize(&run, Some("eu-west-3"), None).await.unwrap();
        assert_eq!(out, dir.path().join("cdk.out").canonicalize().unwrap());
        let context = std::fs::read_to_string(out.join("context.json")).unwrap();
        assert_eq!(context, r#"{"k":"v"}"#);
        assert_eq!(
            std::fs::read_to_string(out.join("region")).unwrap(),
            "eu-west-3"
        );

        // An app that writes nothing: the earlier manifest does not pass for its own.
        let silent = Run {
            command: "true".into(),
            ..run.clone()
        };
        let e = synthesize(&silent, None, None).await.unwrap_err();
        assert!(
            e.to_string().contains("without writing a cloud assembly"),
            "{e}"
        );
        let failing = Run {
            command: "echo broken >&2; exit 3".into(),
            ..run
        };
        let e = synthesize(&failing, None, None).await.unwrap_err();
        assert!(e.to_string().contains("failed"), "{e}");
    }
}
