//! The engine installed by `stackflow engine deploy` on the emulator (infra/engine.yaml,
//! deployed by the embedded engine, its functions the real bootstrap built for this host
//! and run by the container stand-in), for the tests that start from an installed engine.
//!
//! The CLI talks to the emulator through [`InlineS3Code`]: fakecloud 0.51.0 keeps no code
//! for a function created from an S3 object. After the install, the provisioning role's
//! trust is widened for the emulator ([`emulator_trusts_role_sessions`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Emulator;
use crate::cli::{Cli, Run};
use crate::lambda::{InlineS3Code, engine_bootstrap_arch, engine_bootstrap_zip};

/// The engine bucket of the emulator's account and region.
pub const ENGINE_BUCKET: &str = "stackflow-123456789012-us-east-1";
const ACCOUNT: &str = "123456789012";

/// What the suites' engines may deploy: the types of their templates (and of the
/// corpus's wide-200 and deep-chain-50).
pub const SUITE_TYPES: &str =
    "AWS::SNS::*,AWS::SQS::*,AWS::SSM::Parameter,AWS::Logs::LogGroup,Custom::*";

/// A run's stdout as JSON.
pub fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.describe()))
}

/// An engine name of at most 20 characters (its names, `<name>-fn-pipelinejob` and
/// the like, must stay within IAM's 64).
pub fn engine_name() -> String {
    let engine = crate::unique_name("e").to_lowercase().replace('_', "-");
    engine[..engine.len().min(20)].to_string()
}

/// An engine installed by `stackflow engine deploy`.
pub struct Installed {
    /// The test's directory: the CLI's working directory and its local store.
    pub dir: PathBuf,
    /// The CLI, through the proxy, with the local store the engine's stack is in.
    pub cli: Cli,
    /// The engine's name.
    pub name: String,
    /// The bootstrap's zip it was installed with.
    pub bootstrap: PathBuf,
    /// How long `engine deploy` took.
    pub took: Duration,
    pub proxy: InlineS3Code,
}

impl Installed {
    /// Runs `stackflow engine deploy --name <new name> --bootstrap <this build>
    /// --arch <its architecture> <extra>` (the host's build, which the stand-in runs as a
    /// process, or the arm64 artifact, which it runs under qemu), then
    /// widens the provisioning role's trust for the emulator. The engine may deploy
    /// [`SUITE_TYPES`] unless `extra` names its own `--allow-type`.
    pub async fn install(emu: &'static Emulator, extra: &[&str]) -> Installed {
        let dir = std::env::temp_dir().join(crate::unique_name("engine"));
        std::fs::create_dir_all(&dir).unwrap();
        let bootstrap = dir.join("v1.zip");
        let zip = tokio::task::spawn_blocking(engine_bootstrap_zip)
            .await
            .unwrap();
        std::fs::write(&bootstrap, zip).unwrap();
        let proxy = InlineS3Code::start(emu).await;
        let cli = Cli::local(&dir, proxy.endpoint());
        let name = engine_name();
        let mut args = vec![
            "engine",
            "deploy",
            "--name",
            &name,
            "--bootstrap",
            bootstrap.to_str().unwrap(),
            "--arch",
            engine_bootstrap_arch(),
        ];
        if !extra.contains(&"--allow-type") {
            args.extend_from_slice(&["--allow-type", SUITE_TYPES]);
        }
        args.extend_from_slice(extra);
        let started = Instant::now();
        let run = cli.run(&args);
        assert_eq!(run.code, Some(0), "{}", run.describe());
        let took = started.elapsed();
        let iam = aws_sdk_iam::Client::new(&emu.sdk_config().await);
        emulator_trusts_role_sessions(&iam, &name).await;
        Installed {
            dir,
            cli,
            name,
            bootstrap,
            took,
            proxy,
        }
    }

    /// The event table.
    pub fn table(&self) -> String {
        format!("{}-events", self.name)
    }

    /// The CLI with the engine's table as its store (what `--remote` needs).
    pub fn remote(&self) -> Cli {
        Cli {
            store: format!("dynamodb:{}", self.table()),
            bucket: Some(ENGINE_BUCKET.into()),
            ..self.cli.clone()
        }
    }

    /// The ARN of the state machine `<name>-<op>`.
    pub fn machine(&self, op: &str) -> String {
        format!(
            "arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:{}-{op}",
            self.name
        )
    }

    /// `stackflow engine destroy --name <name> <extra>`, asserted to succeed.
    pub fn destroy(&self, extra: &[&str]) -> Run {
        let mut args = vec!["engine", "destroy", "--name", &self.name];
        args.extend_from_slice(extra);
        let run = self.cli.run(&args);
        assert_eq!(run.code, Some(0), "{}", run.describe());
        run
    }

    /// `stackflow deploy <template> --remote --engine <name> <extra>`, as it ends.
    pub fn run_remote(&self, template: &Path, extra: &[&str]) -> Run {
        let mut args = vec![
            "deploy",
            template.to_str().unwrap(),
            "--remote",
            "--engine",
            &self.name,
        ];
        args.extend_from_slice(extra);
        self.remote().run(&args)
    }

    /// `stackflow deploy <template> --remote --engine <name>`, asserted to succeed.
    pub fn deploy_remote(&self, template: &Path) -> Run {
        let run = self.run_remote(template, &[]);
        assert_eq!(run.code, Some(0), "{}", run.describe());
        run
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An emulator-only step: fakecloud 0.51.0 matches a trust policy's role principal
/// (`"AWS": "arn:...:role/NAME"`) only against that exact ARN, never against the role's
/// sessions, which is what the engine's functions call as (AWS matches the sessions of a
/// role). So the test lets the engine's function sessions assume the provisioning role by
/// their session ARNs; the template keeps the trust AWS needs.
pub async fn emulator_trusts_role_sessions(iam: &aws_sdk_iam::Client, engine: &str) {
    let trust = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": "sts:AssumeRole",
            "Condition": {"ArnLike": {
                "aws:PrincipalArn": format!("arn:aws:sts::*:assumed-role/{engine}-fn-*/*")
            }}
        }]
    });
    iam.update_assume_role_policy()
        .role_name(format!("{engine}-provisioning"))
        .policy_document(trust.to_string())
        .send()
        .await
        .expect("the provisioning role's trust updated");
}

/// A policy document as IAM answers it: URL-encoded on AWS (`%7B...`), maybe not on the
/// emulator.
pub fn policy_document(text: &str) -> String {
    if text.trim_start().starts_with('{') {
        return text.to_string();
    }
    let mut out = Vec::new();
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        let hex = tail.get(..2).and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(decoded) if b == b'%' => {
                out.push(decoded);
                rest = &tail[2..];
            }
            _ => {
                out.push(if b == b'+' { b' ' } else { b });
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
