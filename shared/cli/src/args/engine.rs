//! The arguments of the commands that install and watch the engine in an account:
//! `stackflow engine deploy | destroy | status` and `stackflow executions`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::parse_key_value;

/// `stackflow engine ...`
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Install or update the engine, deploying infra/engine.yaml with the embedded engine
    /// (the stack <NAME>-engine, recorded in --store); its code (the bootstrap) and state
    /// machine definitions are published to stackflow-<account>-<region> first
    Deploy(EngineDeployArgs),
    /// Remove the engine; its event table stays unless --delete-table
    Destroy(EngineDestroyArgs),
    /// What is installed (bootstrap and template digests), the last executions and any
    /// stack whose lock is held
    Status(EngineStatusArgs),
}

/// The engine's name.
#[derive(Debug, Args)]
pub struct EngineName {
    /// The engine's name: functions <NAME>-<task>, state machines <NAME>-deploy,
    /// <NAME>-destroy, <NAME>-rollback, table <NAME>-events
    #[arg(
        long,
        value_name = "NAME",
        env = "STACKFLOW_ENGINE",
        default_value = "stackflow"
    )]
    pub name: String,
}

/// Arguments of `stackflow engine deploy`.
#[derive(Debug, Args)]
pub struct EngineDeployArgs {
    #[command(flatten)]
    pub engine: EngineName,

    /// The built bootstrap of functions/bootstrap: the executable, or a zip with
    /// `bootstrap` at its root (default: built here with `cargo lambda build`)
    #[arg(long, value_name = "PATH")]
    pub bootstrap: Option<PathBuf>,

    /// The functions' instruction set (the bootstrap must be built for it)
    #[arg(long, value_name = "ARCH", default_value = "arm64", value_parser = ["arm64", "x86_64"])]
    pub arch: String,

    /// A resource type the engine may deploy (repeatable, or comma-separated):
    /// AWS::SNS::Topic, AWS::SQS::* (every type of a service), Custom::* (custom
    /// resources). The provisioning role gets those services' actions and no others;
    /// Plan refuses any other type before any AWS call. Required on the first install;
    /// an update reuses the last install's
    #[arg(long = "allow-type", value_name = "TYPE")]
    pub allow_types: Vec<String>,

    /// An IAM action the provisioning role gets besides its types' services (repeatable),
    /// e.g. secretsmanager:GetSecretValue for dynamic references, iam:PassRole for roles
    /// the stacks do not make
    #[arg(long = "allow-action", value_name = "SERVICE:ACTION")]
    pub allow_actions: Vec<String>,

    /// An IAM principal (role or user ARN) that may start a deploy (repeatable): put
    /// objects under deploy/ of the engine bucket, send Deploy Requested events to the
    /// engine's bus. Default: the last install's, or the principal installing
    #[arg(long = "deployer", value_name = "ARN")]
    pub deployers: Vec<String>,

    /// A parameter of infra/engine.yaml (repeatable), e.g.
    /// ProvisioningPolicyArns=arn:aws:iam::123456789012:policy/deployable
    #[arg(long = "parameter", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub parameters: Vec<(String, String)>,

    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `stackflow engine destroy`.
#[derive(Debug, Args)]
pub struct EngineDestroyArgs {
    #[command(flatten)]
    pub engine: EngineName,

    /// Delete the event table too (every stack's records: they cannot be recovered but
    /// from its point-in-time backups)
    #[arg(long)]
    pub delete_table: bool,
}

/// Arguments of `stackflow engine status`.
#[derive(Debug, Args)]
pub struct EngineStatusArgs {
    #[command(flatten)]
    pub engine: EngineName,

    /// Print it as JSON
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `stackflow executions`.
#[derive(Debug, Args)]
pub struct ExecutionsArgs {
    #[command(flatten)]
    pub engine: EngineName,

    /// Only the runs of this stack
    #[arg(long, value_name = "STACK")]
    pub stack: Option<String>,

    /// At most this many runs
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,

    /// Print them as JSON
    #[arg(long)]
    pub json: bool,
}
