//! `stackflow engine deploy | destroy | status`: the engine in an account, installed by
//! stackflow itself. `deploy` makes the engine bucket (`stackflow-<account>-<region>`,
//! as `stackflow bootstrap` does), publishes the bootstrap's zip and the three state
//! machine definitions to it under `assets/`, content-addressed, then deploys
//! `infra/engine.yaml` as the stack `<name>-engine` with the embedded engine. What it
//! installed (the digests) is recorded in the bucket at `stackflow/engine/<name>.json`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context as _;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use stackflow_core::assets::stackflow_bucket_name;
use stackflow_core::template::{StackTemplate, Template, parse_text};
use stackflow_engine::definitions;
use stackflow_engine::{DeployOptions, StackStatus, deploy_stack, destroy_stack};
use stackflow_events::EventStore;
use stackflow_events::dynamo::DynamoStore;
use stackflow_events::event::Holder;
use stackflow_providers::assets::bucket::ensure_bucket;
use stackflow_providers::assets::zip::zip_directory;

use super::executions::{Machines, Run};
use super::{engine_access, engine_scope};
use crate::args::{EngineDeployArgs, EngineDestroyArgs, EngineStatusArgs, GlobalArgs};
use crate::select::bind_all;
use crate::setup::{Setup, setup, stop_on_ctrl_c};

/// The engine's template.
pub const TEMPLATE: &str = include_str!("../../../../infra/engine.yaml");

/// The stack the engine's template is deployed as.
pub fn stack_name(engine: &str) -> String {
    format!("{engine}-engine")
}

/// The event table of the engine named `engine`.
pub fn table_name(engine: &str) -> String {
    format!("{engine}-events")
}

fn record_key(engine: &str) -> String {
    format!("stackflow/engine/{engine}.json")
}

/// What `engine deploy` installed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Installed {
    pub name: String,
    pub stack: String,
    pub bucket: String,
    pub table: String,
    /// `sha256:<hex>` of the bootstrap's zip.
    pub bootstrap: String,
    pub bootstrap_key: String,
    /// `sha256:<hex>` of infra/engine.yaml.
    pub template: String,
    pub architecture: String,
    pub stackflow_version: String,
    /// What the engine may deploy (`--allow-type`), reused by the next install.
    #[serde(default)]
    pub allowed_types: Vec<String>,
    /// The provisioning role's actions beyond the types' (`--allow-action`).
    #[serde(default)]
    pub allowed_actions: Vec<String>,
    /// Who may start a deploy (`--deployer`).
    #[serde(default)]
    pub deployers: Vec<String>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a file is instead of an executable for an architecture stackflow deploys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum NotAnArch {
    #[error("not a Linux executable (no ELF header)")]
    NotElf,
    #[error("a truncated ELF header")]
    Truncated,
    #[error("an executable for ELF machine {0}")]
    Machine(u16),
}

/// The architecture (as `--arch` names it) an ELF executable is built for, from its
/// header's `e_machine`.
fn elf_arch(bytes: &[u8]) -> Result<&'static str, NotAnArch> {
    if !bytes.starts_with(b"\x7fELF") {
        return Err(NotAnArch::NotElf);
    }
    let field = bytes.get(18..20).ok_or(NotAnArch::Truncated)?;
    let machine = if bytes.get(5) == Some(&2) {
        u16::from_be_bytes([field[0], field[1]])
    } else {
        u16::from_le_bytes([field[0], field[1]])
    };
    match machine {
        62 => Ok("x86_64"),
        183 => Ok("arm64"),
        other => Err(NotAnArch::Machine(other)),
    }
}

/// Refuses a bootstrap that is not built for `arch`: every function would fail at init.
fn check_arch(executable: &[u8], arch: &str, from: &Path) -> anyhow::Result<()> {
    let flag = if arch == "arm64" { "arm64" } else { "x86-64" };
    match elf_arch(executable) {
        Ok(built) if built == arch => Ok(()),
        Ok(built) => anyhow::bail!(
            "{}: the bootstrap is built for {built}, not --arch {arch}: every function would \
             fail at init. Build it for {arch} (`cargo lambda build --profile lambda -p \
             stackflow-fn-bootstrap --{flag}`) or pass --arch {built}",
            from.display()
        ),
        Err(what) => anyhow::bail!(
            "{}: the bootstrap is {what}, not the {arch} Linux executable a function runs",
            from.display()
        ),
    }
}

/// The zip a `provided.al2023` function deploys, from `path` (a zip, kept as it is, or
/// the executable, zipped as `bootstrap`), or built here with cargo-lambda. Either way
/// the executable must be built for `arch`.
fn bootstrap_zip(path: Option<&Path>, arch: &str) -> anyhow::Result<Vec<u8>> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => build_with_cargo_lambda(arch)?,
    };
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    // A directory of this call's own: two calls of one process (tests run in parallel)
    // must not unpack into each other's.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir =
        std::env::temp_dir().join(format!("stackflow-bootstrap-{}-{call}", std::process::id()));
    if bytes.starts_with(b"PK\x03\x04") {
        let inside = dir.join("unzipped");
        let found = stackflow_engine::sfn::triggers::unzip::extract(&bytes, &inside)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
            .and_then(|()| {
                std::fs::read(inside.join("bootstrap")).with_context(|| {
                    format!("{}: the zip has no `bootstrap` at its root", path.display())
                })
            });
        let _ = std::fs::remove_dir_all(&dir);
        check_arch(&found?, arch, &path)?;
        return Ok(bytes);
    }
    check_arch(&bytes, arch, &path)?;
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("bootstrap");
    std::fs::write(&file, &bytes)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))?;
    }
    let zipped = zip_directory(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(zipped?)
}

fn build_with_cargo_lambda(arch: &str) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let available = Command::new(&cargo)
        .args(["lambda", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        anyhow::bail!(
            "no --bootstrap given and cargo-lambda is not installed: build functions/bootstrap \
             (`pip install cargo-lambda`, then `cargo lambda build --profile lambda -p \
             stackflow-fn-bootstrap --{arch}`) and pass --bootstrap PATH",
            arch = if arch == "arm64" { "arm64" } else { "x86-64" }
        );
    }
    let flag = if arch == "arm64" {
        "--arm64"
    } else {
        "--x86-64"
    };
    eprintln!("building the bootstrap with cargo lambda ({arch})");
    let status = Command::new(&cargo)
        .args(["lambda", "build", "--profile", "lambda"])
        .args(["-p", "stackflow-fn-bootstrap", flag])
        .status()?;
    if !status.success() {
        anyhow::bail!("cargo lambda build failed ({status})");
    }
    // Where cargo put it: under CARGO_TARGET_DIR when set.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("target"), PathBuf::from);
    Ok(target.join("lambda/stackflow-fn-bootstrap/bootstrap"))
}

/// What [`publish`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Published {
    Sent,
    AlreadyThere,
    /// An object was there with other content than its name's digest: it was replaced.
    Replaced,
}

/// Puts `bytes` at `key` (named by the content's digest) unless the object there holds
/// exactly them: its content is read and hashed, never trusted from its name or a
/// `HeadObject`, since every function would run what it holds.
async fn publish(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    bytes: Vec<u8>,
) -> anyhow::Result<Published> {
    let there = s3.get_object().bucket(bucket).key(key).send().await;
    let replacing = match there {
        Ok(o) => {
            let held = o
                .body
                .collect()
                .await
                .map_err(|e| anyhow::anyhow!("reading s3://{bucket}/{key}: {e}"))?
                .into_bytes();
            if sha256_hex(&held) == sha256_hex(&bytes) {
                return Ok(Published::AlreadyThere);
            }
            eprintln!(
                "warning: s3://{bucket}/{key} held other content (sha256:{}) than its name \
                 says: it is replaced; find out who wrote it",
                sha256_hex(&held)
            );
            true
        }
        Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => false,
        Err(e) => anyhow::bail!(
            "GetObject s3://{bucket}/{key}: {}",
            crate::aws::brief_error(&e)
        ),
    };
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(bytes.into())
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "PutObject s3://{bucket}/{key}: {}",
                crate::aws::brief_error(&e)
            )
        })?;
    Ok(if replacing {
        Published::Replaced
    } else {
        Published::Sent
    })
}

fn account(setup: &Setup) -> anyhow::Result<&str> {
    setup
        .account_id
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("the AWS account is unknown: it names the engine bucket"))
}

fn bucket_of(global: &GlobalArgs, setup: &Setup) -> anyhow::Result<String> {
    match &global.store_bucket {
        Some(b) => Ok(b.clone()),
        None => Ok(stackflow_bucket_name(account(setup)?, &setup.region)),
    }
}

/// Publishes the code and the definitions; the template's parameters naming them.
async fn publish_artifacts(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    zip: Vec<u8>,
) -> anyhow::Result<(IndexMap<String, String>, String)> {
    let digest = sha256_hex(&zip);
    let size = zip.len();
    let code_key = format!("assets/{digest}.zip");
    let sent = publish(s3, bucket, &code_key, zip).await?;
    eprintln!(
        "bootstrap sha256:{digest} ({size} bytes): {}",
        match sent {
            Published::Sent => "uploaded",
            Published::AlreadyThere => "already there (its content checked)",
            Published::Replaced => "replaced",
        }
    );
    let mut parameters = IndexMap::new();
    parameters.insert("BootstrapKey".to_string(), code_key);
    for (name, text) in definitions::ALL {
        let key = format!("assets/{}.asl.json", sha256_hex(text.as_bytes()));
        publish(s3, bucket, &key, text.as_bytes().to_vec()).await?;
        let mut param = name.to_string();
        param[..1].make_ascii_uppercase();
        parameters.insert(format!("{param}DefinitionKey"), key);
    }
    Ok((parameters, format!("sha256:{digest}")))
}

pub async fn deploy(global: &GlobalArgs, args: EngineDeployArgs) -> anyhow::Result<ExitCode> {
    let name = args.engine.name.clone();
    // The account first: a build and a zip of minutes are not made for credentials that
    // do not work.
    let setup = setup(global, true, global.verbose).await?;
    if setup.account_id.is_none() {
        anyhow::bail!(
            "the AWS account is unknown (see the note above): check the credentials before \
             the engine is built and installed"
        );
    }
    let bucket = bucket_of(global, &setup)?;
    let config = crate::aws::load(global).await;
    let s3 = stackflow_providers::aws::s3_client(&config);
    let previous = match read_installed(&s3, &bucket, &name).await {
        Ok(p) => p,
        // A bucket not made yet holds no install.
        Err(_) if !bucket_exists(&s3, &bucket).await => None,
        Err(e) => return Err(e),
    };
    let previous_deployers = previous
        .as_ref()
        .map(|p| p.deployers.clone())
        .unwrap_or_default();
    let mut scope = engine_scope::scope(
        &args.allow_types,
        &args.allow_actions,
        previous.map(|p| engine_scope::Scope {
            types: p.allowed_types,
            actions: p.allowed_actions,
            deployers: vec![],
        }),
    )?;
    // STS is asked only when no deployer is given or recorded.
    let caller = if args.deployers.is_empty() && previous_deployers.is_empty() {
        Some(crate::aws::caller_arn(&config).await)
    } else {
        None
    };
    scope.deployers = engine_scope::deployers(&args.deployers, previous_deployers, caller)?;
    let mut template_parameters = args.parameters.clone();
    engine_scope::parameters(&scope, &mut template_parameters)?;
    let zip = bootstrap_zip(args.bootstrap.as_deref(), &args.arch)?;
    let report = ensure_bucket(&s3, &bucket, &setup.region, None)
        .await
        .map_err(anyhow::Error::msg)?;
    if report.created {
        eprintln!("created s3://{bucket}, the engine bucket");
    }
    for change in &report.changed {
        eprintln!("s3://{bucket}: set {change}");
    }
    let partition = stackflow_core::partition::partition(&setup.region);
    if args
        .parameters
        .iter()
        .any(|(k, v)| k == "Triggers" && v == "off")
    {
        engine_access::apply(&s3, partition, &bucket, &name, None).await?;
    } else {
        bucket_events_on(&s3, &bucket).await?;
        engine_access::apply(&s3, partition, &bucket, &name, Some(&scope.deployers)).await?;
    }
    let (mut parameters, bootstrap) = publish_artifacts(&s3, &bucket, zip).await?;
    parameters.insert("EngineName".into(), name.clone());
    parameters.insert("EngineBucket".into(), bucket.clone());
    parameters.insert("Architecture".into(), args.arch.clone());
    let value = parse_text(TEMPLATE, "infra/engine.yaml")?;
    let stack = StackTemplate {
        display_name: None,
        name: stack_name(&name),
        file: PathBuf::from("infra/engine.yaml"),
        template: Template::from_value(&value)?,
        dependencies: vec![],
        parameters,
        nested: IndexMap::new(),
        assets: None,
        environment: Default::default(),
    };
    let bound = bind_all(std::slice::from_ref(&stack), &template_parameters)?;
    let code_key = stack.parameters["BootstrapKey"].clone();
    let input = setup.input(stack, bound.into_iter().next().unwrap_or_default());
    let mut options = DeployOptions::new();
    options.stop = stop_on_ctrl_c();
    let result = deploy_stack(setup.engine.clone(), input, options).await?;
    let ok = matches!(
        result.status,
        StackStatus::Succeeded | StackStatus::NoChanges
    );
    let installed = Installed {
        name: name.clone(),
        stack: stack_name(&name),
        bucket: bucket.clone(),
        table: table_name(&name),
        bootstrap,
        bootstrap_key: code_key,
        template: format!("sha256:{}", sha256_hex(TEMPLATE.as_bytes())),
        architecture: args.arch.clone(),
        stackflow_version: env!("CARGO_PKG_VERSION").to_string(),
        allowed_types: scope.types.clone(),
        allowed_actions: scope.actions.clone(),
        deployers: scope.deployers.clone(),
    };
    if ok {
        let body = serde_json::to_vec_pretty(&installed)?;
        s3.put_object()
            .bucket(&bucket)
            .key(record_key(&name))
            .body(body.into())
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!("recording the install: {}", crate::aws::brief_error(&e))
            })?;
    }
    if args.json {
        let out = serde_json::json!({ "engine": installed, "stack": result });
        crate::json::print(&out)?;
    } else {
        print!("{}", crate::render::report(&result, "deploy"));
        if ok {
            println!(
                "engine {name}: bootstrap {}, template {}; state machines {name}-deploy, {name}-destroy, {name}-rollback; table {}; bucket {bucket}",
                installed.bootstrap, installed.template, installed.table
            );
            println!(
                "deploy through it: stackflow deploy TEMPLATE --remote --engine {name} --store dynamodb:{} --store-bucket {bucket}",
                installed.table
            );
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub async fn destroy(global: &GlobalArgs, args: EngineDestroyArgs) -> anyhow::Result<ExitCode> {
    let name = args.engine.name.clone();
    let setup = setup(global, true, global.verbose).await?;
    let table = table_name(&name);
    let also = if args.delete_table {
        format!(
            " and delete its event table {table}, with every stack's records (they cannot \
             be recovered but from the table's backups)"
        )
    } else {
        String::new()
    };
    crate::confirm::confirm(
        global.yes,
        &format!("Remove the engine {name} (its state machines, functions and roles){also}?"),
        "pass --yes to go ahead",
    )
    .await?;
    let mut options = DeployOptions::new();
    options.stop = stop_on_ctrl_c();
    let result = destroy_stack(setup.engine.clone(), &stack_name(&name), options).await?;
    print!("{}", crate::render::report(&result, "destroy"));
    if result.status != StackStatus::Succeeded && result.status != StackStatus::NoChanges {
        return Ok(ExitCode::from(1));
    }
    let config = crate::aws::load(global).await;
    if let Ok(bucket) = bucket_of(global, &setup) {
        let s3 = stackflow_providers::aws::s3_client(&config);
        let partition = stackflow_core::partition::partition(&setup.region);
        engine_access::apply(&s3, partition, &bucket, &name, None).await?;
        let _ = s3
            .delete_object()
            .bucket(bucket)
            .key(record_key(&name))
            .send()
            .await;
    }
    if args.delete_table {
        delete_table(&aws_sdk_dynamodb::Client::new(&config), &table).await?;
        println!("deleted the event table {table}");
    } else {
        println!(
            "kept the event table {table} (every stack's records); `stackflow engine destroy --delete-table` deletes it"
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn delete_table(dynamodb: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<()> {
    dynamodb
        .update_table()
        .table_name(table)
        .deletion_protection_enabled(false)
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "UpdateTable {table} (deletion protection off): {}",
                crate::aws::brief_error(&e)
            )
        })?;
    dynamodb
        .delete_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("DeleteTable {table}: {}", crate::aws::brief_error(&e)))?;
    Ok(())
}

/// A stack whose lock is held, and whether an execution of the engine still runs for it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Lock {
    stack: String,
    holder: Holder,
    /// No execution of the stack is running: `stackflow unlock` breaks it.
    stuck: bool,
}

/// What `engine status` shows.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    installed: Option<Installed>,
    executions: Vec<Run>,
    locks: Vec<Lock>,
}

async fn read_installed(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    engine: &str,
) -> anyhow::Result<Option<Installed>> {
    let got = s3
        .get_object()
        .bucket(bucket)
        .key(record_key(engine))
        .send()
        .await;
    match got {
        Ok(o) => {
            let bytes = o.body.collect().await?.into_bytes();
            Ok(Some(serde_json::from_slice(&bytes)?))
        }
        Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
        Err(e) => anyhow::bail!(
            "reading s3://{bucket}/{}: {}",
            record_key(engine),
            crate::aws::brief_error(&e)
        ),
    }
}

async fn bucket_exists(s3: &aws_sdk_s3::Client, bucket: &str) -> bool {
    s3.head_bucket().bucket(bucket).send().await.is_ok()
}

/// Every held lock in the engine's table; stuck when no execution of its stack runs.
async fn locks(store: &DynamoStore, machines: &Machines<'_>) -> anyhow::Result<Vec<Lock>> {
    let mut out = Vec::new();
    for stream in store.streams().await? {
        let Some(holder) = store.lock_holder(&stream).await? else {
            continue;
        };
        let runs = machines.recent(Some(&stream.stack), 10).await?;
        let running = runs.iter().any(|r| r.status == "RUNNING");
        out.push(Lock {
            stack: stream.stack.clone(),
            holder,
            stuck: !running,
        });
    }
    Ok(out)
}

pub async fn status(global: &GlobalArgs, args: EngineStatusArgs) -> anyhow::Result<ExitCode> {
    let name = args.engine.name.clone();
    let config = crate::aws::load(global).await;
    let region = crate::aws::region(&config)?;
    let account = crate::aws::account_id(&config)
        .await
        .map_err(|why| anyhow::anyhow!("the AWS account is unknown ({why})"))?;
    let bucket = global
        .store_bucket
        .clone()
        .unwrap_or_else(|| stackflow_bucket_name(&account, &region));
    let s3 = stackflow_providers::aws::s3_client(&config);
    let installed = read_installed(&s3, &bucket, &name).await?;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let machines = Machines {
        sfn: &sfn,
        region: &region,
        account: &account,
        engine: &name,
    };
    let (executions, locks) = match &installed {
        Some(i) => {
            let store = DynamoStore::new(
                aws_sdk_dynamodb::Client::new(&config),
                s3.clone(),
                i.table.clone(),
                Some(bucket.clone()),
            );
            (
                machines.recent(None, 5).await?,
                locks(&store, &machines).await?,
            )
        }
        None => (vec![], vec![]),
    };
    let status = Status {
        installed,
        executions,
        locks,
    };
    if args.json {
        crate::json::print(&status)?;
    } else {
        print!("{}", status_text(&name, &region, &status));
    }
    Ok(if status.installed.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn status_text(name: &str, region: &str, status: &Status) -> String {
    let Some(i) = &status.installed else {
        return format!(
            "engine {name} is not installed in {region} (`stackflow engine deploy --name {name} \
             --allow-type TYPE` installs it)\n"
        );
    };
    let mut out = format!(
        "engine {name} in {region} (stack {}, stackflow {})\n  bootstrap  {} ({}, s3://{}/{})\n  template   {}\n  table      {}\n",
        i.stack,
        i.stackflow_version,
        i.bootstrap,
        i.architecture,
        i.bucket,
        i.bootstrap_key,
        i.template,
        i.table
    );
    if !i.allowed_types.is_empty() {
        out.push_str(&format!("  may deploy {}\n", i.allowed_types.join(", ")));
    }
    if !i.allowed_actions.is_empty() {
        out.push_str(&format!("  and do     {}\n", i.allowed_actions.join(", ")));
    }
    if !i.deployers.is_empty() {
        out.push_str(&format!("  deployers  {}\n", i.deployers.join(", ")));
    }
    if status.executions.is_empty() {
        out.push_str("no executions yet\n");
    } else {
        out.push_str("last executions:\n");
        out.push_str(&super::executions::table(&status.executions));
    }
    for lock in &status.locks {
        out.push_str(&format!(
            "lock on {}: {} {} since {} by {}{}\n",
            lock.stack,
            lock.holder.operation,
            lock.holder.deploy_id,
            lock.holder.since,
            lock.holder.who,
            if lock.stuck {
                format!(
                    " (stuck: no execution of it runs; `stackflow unlock --stack {} --store dynamodb:{}` breaks it)",
                    lock.stack, i.table
                )
            } else {
                String::new()
            }
        ));
    }
    out
}

/// The engine bucket sends its events to EventBridge (the template's Start rule matches
/// objects under `deploy/`; infra/README.md, "Triggers"): the bucket is made before the
/// template, so its notification configuration is set here, keeping any other.
async fn bucket_events_on(s3: &aws_sdk_s3::Client, bucket: &str) -> anyhow::Result<()> {
    use aws_sdk_s3::error::DisplayErrorContext;
    use aws_sdk_s3::types::{EventBridgeConfiguration, NotificationConfiguration};
    let now = s3
        .get_bucket_notification_configuration()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "GetBucketNotificationConfiguration s3://{bucket}: {}",
                DisplayErrorContext(e)
            )
        })?;
    if now.event_bridge_configuration().is_some() {
        return Ok(());
    }
    let config = NotificationConfiguration::builder()
        .set_topic_configurations(Some(now.topic_configurations().to_vec()))
        .set_queue_configurations(Some(now.queue_configurations().to_vec()))
        .set_lambda_function_configurations(Some(now.lambda_function_configurations().to_vec()))
        .event_bridge_configuration(EventBridgeConfiguration::builder().build())
        .build();
    s3.put_bucket_notification_configuration()
        .bucket(bucket)
        .notification_configuration(config)
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "PutBucketNotificationConfiguration s3://{bucket}: {}",
                DisplayErrorContext(e)
            )
        })?;
    eprintln!("s3://{bucket}: its events go to EventBridge (the deploy/ trigger)");
    Ok(())
}

#[cfg(test)]
mod tests;
