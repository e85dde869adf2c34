//! The arguments of running a CDK app: `stackflow synth`, `stackflow list`, and the
//! options `deploy` and `diff` share with them when no PATH is given.

use std::path::PathBuf;

use clap::Args;

use super::parse_key_value;

/// Which CDK app to run, and how (as the CDK CLI's own options).
#[derive(Debug, Clone, Default, Args)]
pub struct SynthArgs {
    /// The CDK app: a command that synthesizes it (`node bin/app.js`, run by `sh -c` in
    /// this folder), or a cloud assembly directory, read as it is (default: `app` in
    /// ./cdk.json)
    #[arg(long, value_name = "CMD|DIR")]
    pub app: Option<String>,

    /// Context for the app (repeatable), over the `context` of cdk.json and
    /// cdk.context.json
    #[arg(short = 'c', long = "context", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub context: Vec<(String, String)>,

    /// Where the app writes its cloud assembly (default: `output` in cdk.json, else
    /// cdk.out)
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
}

/// `stackflow synth`
#[derive(Debug, Args)]
pub struct SynthCommandArgs {
    #[command(flatten)]
    pub synth: SynthArgs,

    /// Print the stacks synthesized as JSON
    #[arg(long)]
    pub json: bool,
}

/// `stackflow list`
#[derive(Debug, Args)]
pub struct ListArgs {
    /// A cdk.out directory or a template file (default: the CDK app of ./cdk.json, run
    /// first)
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,

    #[command(flatten)]
    pub synth: SynthArgs,

    /// Each stack with its display path, what it depends on and its template file
    #[arg(long, short = 'l')]
    pub long: bool,

    /// Print them as JSON
    #[arg(long)]
    pub json: bool,
}
