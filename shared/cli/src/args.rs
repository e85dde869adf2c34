//! Command-line arguments.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

use crate::store::StoreSpec;

mod engine;
mod synth;
pub use engine::*;
pub use synth::*;

/// Deploy CloudFormation templates and CDK apps without CloudFormation.
///
/// stackflow resolves intrinsic functions itself and creates, updates and deletes each
/// resource directly through AWS APIs. Standard AWS configuration applies: AWS_PROFILE,
/// AWS_REGION, AWS_ENDPOINT_URL (and per-service AWS_ENDPOINT_URL_<SERVICE>), shared config
/// and credentials files; the options below override them.
#[derive(Debug, Parser)]
#[command(name = "stackflow", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// AWS region (default: AWS_REGION or the profile's region); `bootstrap` takes it
    /// more than once
    #[arg(long = "region", global = true, value_name = "REGION", action = ArgAction::Append)]
    pub regions: Vec<String>,

    /// Send every AWS call to this endpoint, e.g. a local emulator (default: AWS_ENDPOINT_URL)
    #[arg(long, global = true, value_name = "URL")]
    pub endpoint_url: Option<String>,

    /// Named profile from the AWS config files (default: AWS_PROFILE)
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,

    /// Where stack state lives: local[:DIR] (under .stackflow/ without DIR) or
    /// dynamodb:TABLE. Default: the account's store in this region when `stackflow
    /// bootstrap` made one (table stackflow-<account>-<region>, with the bucket of the same
    /// name), else the local store of this folder
    #[arg(
        long = "store",
        global = true,
        value_name = "STORE",
        env = "STACKFLOW_STORE"
    )]
    pub store_given: Option<StoreSpec>,

    /// The store the command uses: `--store`, or the one found (see `store::resolve`).
    #[arg(skip = StoreSpec::Local(PathBuf::from(".stackflow")))]
    pub store: StoreSpec,

    /// True when no store was given and none of the account's was found: the local store
    /// of this folder, said once, when it is made.
    #[arg(skip)]
    pub store_defaulted: bool,

    /// What STS answered when the store was picked (the account id, or why not), so that
    /// it is asked once per command.
    #[arg(skip)]
    pub account: Option<Result<String, crate::call::CallFailed>>,

    /// The engine's S3 bucket: custom resource handlers answer there, and events over
    /// DynamoDB's item size limit go there (with --store dynamodb:TABLE)
    #[arg(long, global = true, value_name = "BUCKET", env = "STACKFLOW_BUCKET")]
    pub store_bucket: Option<String>,

    /// Say more (repeat for even more)
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,

    /// Answer yes to every confirmation and approval: destroy, drift --revert, import
    /// --migrate-from-cloudformation, engine destroy, and a deploy's changes that widen
    /// access. Without it, and without a terminal to ask on, those commands are refused
    /// (exit 4)
    #[arg(
        short = 'y',
        long,
        global = true,
        env = "STACKFLOW_YES",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub yes: bool,

    /// A role to take for this command's AWS calls (STS AssumeRole). A stack the cloud
    /// assembly pins to another account is deployed through the role its manifest names
    /// (`assumeRoleArn`, CDK's deploy role) instead
    #[arg(long, global = true, value_name = "ARN")]
    pub role_arn: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Deploy a template file or the stacks of a cdk.out directory
    Deploy(DeployArgs),
    /// Show what the next deploy would do, per resource and per property
    Diff(DiffArgs),
    /// Delete every resource of a stack, in reverse dependency order
    Destroy(DestroyArgs),
    /// Undo what a failed (or interrupted) deploy did
    Rollback(RollbackArgs),
    /// Run the engine's Step Functions tasks on this machine (polls their activities)
    Worker(WorkerArgs),
    /// Create the event store where it does not exist (a DynamoDB table, or the local database)
    Init,
    /// The recorded state of a stack
    #[command(subcommand)]
    State(StateCommand),
    /// The event stream of a stack, readably
    Events(EventsArgs),
    /// Break the lock of a stack whose deploy is gone (never done silently)
    Unlock(StackArg),
    /// Find secrets stored in plaintext in a stack's log, and repair what can be repaired
    ///
    /// Looks, in every event of the stack's log, in the state folded from them and in its
    /// latest snapshot, for the current value of each secret: every
    /// `{{resolve:ssm-secure:...}}` and `{{resolve:secretsmanager:...}}` that the template
    /// (PATH) or the log spells, resolved now, and the NoEcho values given again with
    /// --parameter; each raw, in base64 and JSON-escaped. Findings name the event, the
    /// resource, the JSON pointer and the secret, never its value.
    ///
    /// Unless --dry-run, it then appends events (under the stack's lock) that replace each
    /// plaintext in the state by its `{{resolve:...}}` text, or by **** for a NoEcho value.
    /// The events themselves are never changed in an append-only log: their stored bodies
    /// keep the plaintext, and the report names them, unless --rewrite. Exit 0 when no
    /// plaintext is found (and with --fail, 1 when some is). Rotate every secret found.
    Scrub(ScrubArgs),
    /// Compare each recorded resource with what AWS holds now
    ///
    /// Per resource, AWS now (the provider's read, else Cloud Control) against its drift
    /// baseline (what AWS held after the last create, update or import; else the
    /// properties recorded from the template). Reordered tags, unordered lists, AWS
    /// defaults and AWS-added tags, and values AWS spells differently (an ARN for a name,
    /// JSON text for an object, "5" for 5) are not drift; write-only properties are not
    /// compared, and said so. Secrets are shown as ***.
    ///
    /// --all checks every stack of the region in the store; --dry-run with --accept or
    /// --revert says what they would do and does nothing.
    ///
    /// Exit 0 when everything is in sync, 1 when anything drifted or was deleted (still
    /// so: also after --dry-run), 2 when the only differences are masked (***) positions
    /// that cannot be compared, or when --accept/--revert declined a resource (a refused
    /// baseline, a deleted resource).
    Drift(DriftArgs),
    /// Adopt resources that already exist in AWS into a stack's records
    ///
    /// Per template resource, the physical id comes from --resource (or a resource
    /// mapping), else from the CloudFormation stack of the same name when one exists (a
    /// stack `cdk deploy` made: generated names are found there; the stack is left as it
    /// is), else from the name the template gives (its name property); a describe call
    /// confirms it exists. A resource that does not exist is reported "not deployed yet"
    /// (the next deploy creates it); a type that cannot be looked up by name is
    /// "unsupported" unless --resource names it. What AWS holds is recorded, with a drift
    /// baseline (secrets as their {{resolve:...}} references). Every parameter is bound
    /// at its Default. An import changes nothing in AWS: read `stackflow diff` before the
    /// next deploy.
    ///
    /// With --resource (or a resource mapping) and without --auto, only the resources
    /// named are imported (a selective import): the others stay as recorded, or are "out
    /// of scope" and the next deploy creates them. --dry-run looks everything up and
    /// records nothing; --record-resource-mapping writes what was found, for review and a
    /// later --resource-mapping.
    ///
    /// --migrate-from-cloudformation [CFN_STACK] takes a stack over from CloudFormation
    /// (CFN_STACK defaults to --stack): the physical ids come from the CloudFormation
    /// stack's resources by logical id (--resource still wins), nested stacks included
    /// (onto stackflow's nested stacks of the same logical id, or, in a flattened
    /// template, onto its resources by logical id); existence is confirmed as above.
    /// Then every adopted resource gets DeletionPolicy and UpdateReplacePolicy Retain in
    /// the CloudFormation stack (UpdateStack with its current template, then each nested
    /// stack; a template over 51,200 bytes goes by S3: --store-bucket, else
    /// stackflow-<account>-<region>), and the stack is deleted: the resources stay, and
    /// stackflow alone manages
    /// them. The stack is left untouched when the import recorded nothing, or when it
    /// holds a resource stackflow did not adopt (deleting it would delete that); if
    /// UpdateStack or DeleteStack fails, the import says where things are and what to do.
    /// Give PATH before this option.
    ///
    /// A stack with recorded resources needs --force (import everything again) or
    /// --resource (add only those; --force to replace a recorded one). Exit 0 unless a
    /// look-up failed, or a migration did not delete its CloudFormation stack (1).
    Import(ImportArgs),
    /// Create stackflow's own bucket in each --region (default: the configured region):
    /// the engine's bucket and, unless
    /// --use-cdk-bootstrap-assets, the region's asset storage
    ///
    /// The bucket is stackflow-<account>-<region>: encrypted (SSE-S3 unless it already has
    /// encryption), every public access blocked, lifecycle rules (custom resource
    /// responses and remote deploy inputs expire after a day, deploy artifacts after 30
    /// days, unfinished uploads after a day), and a tag saying where the region's assets
    /// go. In a region that keeps assets there, deploys publish file assets under
    /// assets/ in it and point the templates' references (Lambda code, nested stack
    /// templates, the IAM grants on the asset bucket) at it instead of the CDK bootstrap
    /// bucket. Idempotent: run it again to repair a setting; it says what it changed.
    Bootstrap(BootstrapArgs),
    /// Install, update, inspect or remove the engine (its Lambda functions, state
    /// machines, event table and roles: infra/engine.yaml) in this account and region
    #[command(subcommand)]
    Engine(EngineCommand),
    /// Recent runs of the engine's state machines (deploy, destroy, rollback), newest first
    Executions(ExecutionsArgs),
    /// Run the CDK app (`app` in ./cdk.json, or --app) into a cloud assembly, as `cdk
    /// synth` does, and list its stacks
    Synth(SynthCommandArgs),
    /// The stacks of a cdk.out (the CDK app of ./cdk.json is run first when no PATH is
    /// given), in deployment order
    List(ListArgs),
    /// Print a completion script for a shell, e.g. `stackflow completions bash >
    /// /etc/bash_completion.d/stackflow`, or `source <(stackflow completions zsh)`
    Completions(CompletionsArgs),
}

/// Arguments of `stackflow completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Arguments of `stackflow bootstrap`.
#[derive(Debug, Args)]
pub struct BootstrapArgs {
    /// Keep publishing assets to the CDK bootstrap bucket (cdk-<qualifier>-assets-*) in
    /// these regions; stackflow's bucket is then only the engine's
    #[arg(long)]
    pub use_cdk_bootstrap_assets: bool,
}

/// Arguments of `stackflow import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A template file or a cdk.out directory
    #[arg(value_name = "PATH", default_value = "cdk.out")]
    pub path: PathBuf,

    /// The stack to import into (for a cdk.out, one of its stacks)
    #[arg(long, value_name = "NAME")]
    pub stack: String,

    /// The physical id of a resource (repeatable): adopts types that cannot be looked up
    /// by name; without --auto, only the resources named are imported
    #[arg(long = "resource", value_name = "ID=PHYSICAL", value_parser = parse_key_value)]
    pub resources: Vec<(String, String)>,

    /// Physical ids by logical id from a JSON file, `{"ID": "PHYSICAL", ...}` (as
    /// --record-resource-mapping writes it); --resource wins over it
    #[arg(long, value_name = "FILE", conflicts_with = "resource_mapping_inline")]
    pub resource_mapping: Option<PathBuf>,

    /// Physical ids by logical id as JSON text, `{"ID": "PHYSICAL", ...}`
    #[arg(long, value_name = "JSON")]
    pub resource_mapping_inline: Option<String>,

    /// Write the physical ids found (logical id to physical id, JSON) to FILE, for review
    /// and a later --resource-mapping (also with --dry-run)
    #[arg(long, value_name = "FILE")]
    pub record_resource_mapping: Option<PathBuf>,

    /// With --resource or a mapping: look every other template resource up too, as
    /// without them
    #[arg(long)]
    pub auto: bool,

    /// Look everything up and report what would be imported; take no lock and record
    /// nothing
    #[arg(long, conflicts_with = "migrate_from_cloudformation")]
    pub dry_run: bool,

    /// Overwrite recorded resources: import every template resource again over the
    /// stack's records, or, with --resource, replace the record of a resource it names
    /// under another physical id
    #[arg(long)]
    pub force: bool,

    /// Take the stack over from this CloudFormation stack (default: --stack): physical
    /// ids from its resources, then Retain on them in it and the stack deleted
    #[arg(
        long = "migrate-from-cloudformation",
        value_name = "CFN_STACK",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub migrate_from_cloudformation: Option<String>,

    /// Publish assets to the CDK bootstrap bucket the asset manifest names
    /// (cdk-<qualifier>-assets-*), even in a region `stackflow bootstrap` opted into
    /// stackflow's own asset storage (also `stackflow.useCdkBootstrapAssets` in cdk.json's
    /// context)
    #[arg(long)]
    pub use_cdk_bootstrap_assets: bool,

    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// `stackflow state ...`
#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// The stacks the store holds records of: region, resources, last run, lock
    List(JsonArg),
    /// Print the state of a stack, now or as of an event
    Show(StateShowArgs),
    /// Read a fresh drift baseline of every resource from AWS (refused baselines stay
    /// refused)
    RefreshObserved(StackArg),
    /// Take resources out of a stack's records, leaving them in AWS as they are
    ///
    /// Each is recorded as retained: stackflow no longer updates, deletes or checks it,
    /// and the records of the resources that referred to it keep the values they were
    /// deployed with. While the template still declares it, the next deploy creates it
    /// again: remove it from the template first (putting its values where others refer to
    /// it). Refused for a resource with a call whose outcome is not recorded, one a failed
    /// deploy's rollback still has to undo, and a nested stack.
    Orphan(StateOrphanArgs),
}

/// Only `--json`.
#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print it as JSON
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `stackflow state orphan`.
#[derive(Debug, Args)]
pub struct StateOrphanArgs {
    /// The stack name
    #[arg(long, value_name = "NAME")]
    pub stack: String,

    /// The logical ids to take out of the records
    #[arg(value_name = "LOGICAL_ID", required = true)]
    pub ids: Vec<String>,

    /// Only say what would be taken out; record nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `stackflow drift`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("act").args(["accept", "revert"]))]
pub struct DriftArgs {
    /// The stack name
    #[arg(long, value_name = "NAME", required_unless_present = "all")]
    pub stack: Option<String>,

    /// Every stack of this region with recorded resources in the store, one after
    /// another (the exit code is the worst of them; a stack that cannot be checked is
    /// an error printed, and the others go on)
    #[arg(long, conflicts_with_all = ["stack", "resource"])]
    pub all: bool,

    /// At most this many resources read, accepted or reverted at once
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,

    /// With --accept or --revert: say what they would do, and do nothing (no lock, no
    /// record, no change in AWS)
    #[arg(long, requires = "act")]
    pub dry_run: bool,

    /// Only this resource (a logical id); repeat for more
    #[arg(long = "resource", value_name = "ID")]
    pub resource: Vec<String>,

    /// Take what AWS holds as the new baseline of each drifted resource
    #[arg(long, conflicts_with = "revert")]
    pub accept: bool,

    /// Put each drifted resource back to its baseline through its provider (only the
    /// properties the template sets; tags others added stay)
    #[arg(long)]
    pub revert: bool,

    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// A stack to act on.
#[derive(Debug, Args)]
pub struct StackArg {
    /// The stack name
    #[arg(long, value_name = "NAME")]
    pub stack: String,
}

/// Arguments of `stackflow state show`.
#[derive(Debug, Args)]
pub struct StateShowArgs {
    /// The stack name
    #[arg(long, value_name = "NAME")]
    pub stack: String,

    /// The state as of this event (its sequence number, from `stackflow events`)
    #[arg(long, value_name = "SEQ")]
    pub at: Option<u64>,

    /// Print the state as JSON
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `stackflow events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The stack name
    #[arg(long, value_name = "NAME")]
    pub stack: String,

    /// Print the events as JSON lines
    #[arg(long)]
    pub json: bool,

    /// Keep printing new events as they are appended (every second), until interrupted
    #[arg(short, long)]
    pub follow: bool,

    /// Draw the last run as a timeline in FILE (an HTML page): one bar per resource action
    /// from its intent to its outcome, the critical path marked, failures in red, actions
    /// sent more than once counted
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "follow"])]
    pub html: Option<PathBuf>,
}

/// Arguments of `stackflow scrub`.
#[derive(Debug, Args)]
pub struct ScrubArgs {
    /// The stack's template file (.json, .yaml, .yml, .template) or cdk.out directory; its
    /// dynamic references are looked for besides the log's own, and --parameter names
    /// must be its NoEcho parameters (without it, each --parameter is taken as NoEcho)
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,

    /// The stack name
    #[arg(long, value_name = "NAME")]
    pub stack: String,

    /// A NoEcho parameter's value, given again to look for it (repeatable)
    #[arg(long = "parameter", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub parameters: Vec<(String, String)>,

    /// Only report: append nothing, rewrite nothing
    #[arg(long, conflicts_with = "rewrite")]
    pub dry_run: bool,

    /// Exit 1 when plaintext was found, or when a dynamic reference could not be resolved
    /// to look for it (for CI, with --dry-run)
    #[arg(long)]
    pub fail: bool,

    /// Also rewrite, in place, the stored bodies of the events that hold plaintext, drop
    /// the stack's snapshots, and append a record of the positions rewritten (local and
    /// DynamoDB stores)
    #[arg(long)]
    pub rewrite: bool,

    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `stackflow diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A template file (.json, .yaml, .yml, .template) or a cdk.out directory (default:
    /// the CDK app of ./cdk.json, synthesized first)
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,

    #[command(flatten)]
    pub synth: SynthArgs,

    /// Only these stacks of a cdk.out (repeatable): names or display paths (`Stage/Api`),
    /// with `*` (within a path segment), `**` and `?`; the stacks they depend on come too
    /// unless --exclusively. For a template file, the stack name (default: the file name
    /// without its extension)
    #[arg(long = "stack", value_name = "PATTERN")]
    pub stacks: Vec<String>,

    /// Every stack of the cdk.out (the default when no --stack is given)
    #[arg(long, conflicts_with = "stacks")]
    pub all: bool,

    /// Only the stacks --stack names, not the stacks they depend on
    #[arg(short = 'e', long, requires = "stacks")]
    pub exclusively: bool,

    /// A parameter value (repeatable): KEY=VALUE goes to each stack that declares KEY,
    /// STACK:KEY=VALUE to that stack only
    #[arg(long = "parameter", value_name = "[STACK:]KEY=VALUE", value_parser = parse_key_value)]
    pub parameters: Vec<(String, String)>,

    /// Print the plan as JSON
    #[arg(long)]
    pub json: bool,

    /// Read other stacks' exports and outputs only from stackflow's own records, never
    /// from CloudFormation
    #[arg(long)]
    pub no_cfn_fallback: bool,

    /// Exit 1 when the deploy would change anything, or would stop on a problem
    #[arg(long)]
    pub fail: bool,

    /// Save the plan to FILE for review: `stackflow deploy FILE` then applies exactly
    /// that plan, and refuses (exit 4, saying what moved) if the records, the template or
    /// what the lookups answer changed since. NoEcho parameter values are not saved:
    /// give them again to the deploy
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Replace resources that hold data (DynamoDB tables, S3 buckets, databases, file
    /// systems, streams, log groups, KMS keys, ...) when a change forces it; without it
    /// the diff lists such a replacement as a problem
    #[arg(long)]
    pub allow_stateful_replacement: bool,

    /// Publish assets to the CDK bootstrap bucket the asset manifest names
    /// (cdk-<qualifier>-assets-*), even in a region `stackflow bootstrap` opted into
    /// stackflow's own asset storage (also `stackflow.useCdkBootstrapAssets` in cdk.json's
    /// context)
    #[arg(long)]
    pub use_cdk_bootstrap_assets: bool,
}

/// Arguments of `stackflow deploy`.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// A template file (.json, .yaml, .yml, .template), a cdk.out directory, or a plan
    /// saved by `stackflow diff --out` (default: the CDK app of ./cdk.json, synthesized
    /// first)
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,

    #[command(flatten)]
    pub synth: SynthArgs,

    /// Only these stacks of a cdk.out (repeatable): names or display paths (`Stage/Api`),
    /// with `*` (within a path segment), `**` and `?`; the stacks they depend on come too
    /// unless --exclusively. For a template file, the stack name (default: the file name
    /// without its extension)
    #[arg(long = "stack", value_name = "PATTERN")]
    pub stacks: Vec<String>,

    /// Every stack of the cdk.out (the default when no --stack is given)
    #[arg(long, conflicts_with = "stacks")]
    pub all: bool,

    /// Only the stacks --stack names, not the stacks they depend on
    #[arg(short = 'e', long, requires = "stacks")]
    pub exclusively: bool,

    /// A parameter value (repeatable): KEY=VALUE goes to each stack that declares KEY,
    /// STACK:KEY=VALUE to that stack only
    #[arg(long = "parameter", value_name = "[STACK:]KEY=VALUE", value_parser = parse_key_value)]
    pub parameters: Vec<(String, String)>,

    /// Which changes wait for a yes on the terminal before the stack is deployed:
    /// `broadening` (IAM statements, resource policies and security group rules that are
    /// added or changed), `any-change`, or `never`. The approved plan is the one
    /// deployed (refused if it moves meanwhile). Without a terminal, a change that needs
    /// approval is refused (exit 4) unless --yes
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        env = "STACKFLOW_REQUIRE_APPROVAL",
        default_value = "broadening"
    )]
    pub require_approval: RequireApproval,

    /// On failure, keep what the deploy did (undo it later with `stackflow rollback`)
    #[arg(long)]
    pub no_rollback: bool,

    /// Replace resources that hold data (DynamoDB tables, S3 buckets, databases, file
    /// systems, streams, log groups, KMS keys, ...) when a change forces it; without it
    /// such a plan is refused before anything is changed
    #[arg(long)]
    pub allow_stateful_replacement: bool,

    /// Pin the number of resource actions at once to N. Without it each AWS service gets
    /// its own limit, which starts at 64, halves when the service throttles and grows
    /// back while calls succeed (at most 256 actions in all). With --remote, the deploy's
    /// Step Functions Map runs at most N actions at once (at most 40, Step Functions'
    /// limit for an inline Map; 40 without it)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: Option<u16>,

    /// Deploy up to N stacks at once: a stack starts when the stacks it depends on have
    /// ended; after a failure nothing new starts (the running ones finish). 1: one
    /// after another, in dependency order
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u16).range(1..=64)
    )]
    pub stack_concurrency: u16,

    /// Read other stacks' exports and outputs only from stackflow's own records, never
    /// from CloudFormation
    #[arg(long)]
    pub no_cfn_fallback: bool,

    /// Print the result as JSON (progress still goes to stderr)
    #[arg(long)]
    pub json: bool,

    /// Write each deployed stack's outputs to FILE as JSON, `{"Stack": {"Key": value}}`
    /// (the shape `cdk deploy --outputs-file` writes); also after a failure, for the
    /// stacks that were deployed
    #[arg(long, value_name = "FILE")]
    pub outputs_file: Option<PathBuf>,

    /// Publish assets to the CDK bootstrap bucket the asset manifest names
    /// (cdk-<qualifier>-assets-*), even in a region `stackflow bootstrap` opted into
    /// stackflow's own asset storage (also `stackflow.useCdkBootstrapAssets` in cdk.json's
    /// context)
    #[arg(long)]
    pub use_cdk_bootstrap_assets: bool,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// When a deploy asks before it changes a stack (`--require-approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RequireApproval {
    /// Never ask.
    Never,
    /// Ask when the stack would change at all.
    AnyChange,
    /// Ask when a change widens access.
    Broadening,
}

/// Arguments of `stackflow destroy`.
#[derive(Debug, Args)]
pub struct DestroyArgs {
    /// The stack name
    #[arg(long, value_name = "NAME")]
    pub stack: String,

    /// Do not ask for a confirmation (the same as --yes)
    #[arg(short = 'f', long)]
    pub force: bool,

    /// Pin the number of deletes at once to N (default: adaptive per AWS service, as for
    /// deploy)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: Option<u16>,

    /// Print the result as JSON (progress still goes to stderr)
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// Arguments of `stackflow rollback`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The stack name
    #[arg(long, value_name = "NAME")]
    pub stack: String,

    /// Print the result as JSON (progress still goes to stderr)
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// Running on the engine's Step Functions state machines instead of in this process.
#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// Start a Step Functions execution of the engine (see --engine) and follow it, instead
    /// of running the workflow in this process; needs --store dynamodb:TABLE (or a store
    /// the engine's tasks share) and --store-bucket
    #[arg(long)]
    pub remote: bool,

    /// With --remote: print the execution ARN and return without following it
    #[arg(long, requires = "remote")]
    pub no_follow: bool,

    /// The engine's name: its state machines are <NAME>-deploy, <NAME>-destroy and
    /// <NAME>-rollback in this account and region
    #[arg(
        long,
        value_name = "NAME",
        env = "STACKFLOW_ENGINE",
        default_value = "stackflow"
    )]
    pub engine: String,
}

/// Arguments of `stackflow worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The engine's name: the activities are <NAME>-<Task>, the state machines <NAME>-deploy,
    /// <NAME>-destroy and <NAME>-rollback
    #[arg(
        long,
        value_name = "NAME",
        env = "STACKFLOW_ENGINE",
        default_value = "stackflow"
    )]
    pub engine: String,

    /// Create (or update) the three state machines, pointed at this engine's activities,
    /// with this IAM role for Step Functions
    #[arg(long, value_name = "ROLE_ARN")]
    pub create_state_machines: Option<String>,

    /// At most this many resource actions (and gates) at once
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
}

/// A command-line value that is not `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected KEY=VALUE, found `{0}`")]
pub struct NotKeyValue(String);

fn parse_key_value(s: &str) -> Result<(String, String), NotKeyValue> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(NotKeyValue(s.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parameters_need_a_key() {
        assert_eq!(
            parse_key_value("A=b=c").unwrap(),
            ("A".into(), "b=c".into())
        );
        assert_eq!(parse_key_value("A=").unwrap(), ("A".into(), String::new()));
        assert!(parse_key_value("=x").is_err());
        assert!(parse_key_value("nothing").is_err());
    }
}
