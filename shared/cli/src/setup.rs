//! What every command that runs the engine sets up first: the AWS configuration, the
//! event store, the providers and lookups, the engine itself, and the Ctrl-C handler.

use std::path::PathBuf;
use std::sync::Arc;

use stackflow_core::assets::stackflow_bucket_name;
use stackflow_core::intrinsics::{BoundParameters, Pseudo};
use stackflow_core::secrets::DigestKey;
use stackflow_core::template::StackTemplate;
use stackflow_engine::Engine;
use stackflow_engine::digest::local_key;
use stackflow_engine::sfn::digest::bucket_key;
use stackflow_engine::stack::StackInput;
use stackflow_events::StreamId;
use stackflow_providers::assets::bucket::ensure_bucket;
use stackflow_providers::custom::{CustomResourceProvider, FirstUse};
use stackflow_providers::lookups::AwsLookups;
use stackflow_providers::router::Providers;
use tokio::sync::watch;

use crate::args::GlobalArgs;
use crate::aws;
use crate::liveness::{holder_name, stale_check};
use crate::progress::Printer;
use crate::store::{Store, StoreSpec, local_file};

/// A Ctrl-C handler: the first press asks the run to stop (running calls finish and are
/// recorded); a second one exits at once.
pub fn stop_on_ctrl_c() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!(
                "\nstopping: no new resource starts; waiting for the running calls to finish (Ctrl-C again to quit at once)"
            );
            let _ = tx.send(true);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
        // Keep the sender alive until the process ends.
        std::future::pending::<()>().await;
    });
    rx
}

#[derive(Clone)]
pub struct Setup {
    pub engine: Arc<Engine<Store>>,
    pub region: String,
    pub account_id: Option<String>,
    /// The AWS configuration of this region.
    pub config: aws_types::SdkConfig,
}

impl Setup {
    /// Refuses stacks that a cloud assembly pins to another region or account than the
    /// one this command runs in: each would otherwise be made in the wrong place. Every
    /// such stack is named at once, before any call that changes AWS.
    pub fn check_environments(&self, stacks: &[StackTemplate]) -> anyhow::Result<()> {
        self.check_pinned(stacks, false)
    }

    /// [`Self::check_environments`], for a command that deploys each stack where it is
    /// pinned (`anywhere`: its region, and another account through the role its manifest
    /// names): only another account without a role is refused.
    pub fn check_pinned(&self, stacks: &[StackTemplate], anywhere: bool) -> anyhow::Result<()> {
        let elsewhere: Vec<String> = stacks
            .iter()
            .filter_map(|s| {
                let region = match (&s.environment.region, anywhere) {
                    (Some(pinned), true) => pinned.as_str(),
                    _ => self.region.as_str(),
                };
                let account = match (&s.environment.account, &s.environment.role, anywhere) {
                    (Some(pinned), Some(_), true) => Some(pinned.as_str()),
                    _ => self.account_id.as_deref(),
                };
                let why = s.environment.mismatch(region, account)?;
                Some(format!("  {}: {} ({why})", s.name, s.environment))
            })
            .collect();
        if elsewhere.is_empty() {
            return Ok(());
        }
        let here = match &self.account_id {
            Some(account) => format!("{}, account {account}", self.region),
            None => self.region.clone(),
        };
        anyhow::bail!(
            "the cloud assembly pins these stacks to another environment (manifest.json \
             `environment`), and this command runs in {here}:\n{}\n{}: run it with \
             credentials of the stack's account (or --role-arn ARN, a role there), or leave \
             it out with --stack",
            elsewhere.join("\n"),
            if anywhere {
                "their manifest names no role to deploy them with there (`assumeRoleArn`)"
            } else {
                "`deploy` switches regions and accounts (through the manifest's role); \
                 this command does not"
            }
        )
    }

    /// Refuses to act on `stack` when its records say it was deployed in another account
    /// than this command's (its recorded stack id names the account): every call would go
    /// to the wrong account, where a delete answered "not there" would forget a resource
    /// that still exists. Nothing is refused when either account is not known.
    pub async fn check_recorded_account(&self, stack: &str) -> anyhow::Result<()> {
        if self.account_id.is_none() {
            return Ok(());
        }
        let stream = self.engine.stream(stack);
        let state = stackflow_events::load_state(self.engine.store.as_ref(), &stream).await?;
        self.check_account_of(stack, &state)
    }

    /// [`Self::check_recorded_account`] of records already read (`state`).
    pub fn check_account_of(
        &self,
        stack: &str,
        state: &stackflow_events::projection::StackState,
    ) -> anyhow::Result<()> {
        let Some(mine) = self.account_id.as_deref() else {
            return Ok(());
        };
        let Some(id) = state.stack_id.as_deref() else {
            return Ok(());
        };
        match id.split(':').nth(4).filter(|theirs| !theirs.is_empty()) {
            Some(theirs) if theirs != mine => anyhow::bail!(
                "stack {stack} was deployed in account {theirs} (its records say {id}), and \
                 this command runs in account {mine}: nothing was done; run it with \
                 --role-arn ARN (a role in account {theirs}) or that account's credentials"
            ),
            _ => Ok(()),
        }
    }

    /// This setup where `stack` goes ([`Place::of`]); a stack pinned to another account
    /// with no role is refused.
    pub async fn for_stack(
        &self,
        global: &GlobalArgs,
        stack: &StackTemplate,
    ) -> anyhow::Result<Setup> {
        self.check_pinned(std::slice::from_ref(stack), true)?;
        let place = Place::of(stack, &self.region, self.account_id.as_deref());
        self.in_place(global, &place).await
    }

    /// This setup in another place: the same store, digest key and progress, the
    /// providers and lookups of its region, and of another account when it names one
    /// (the calls there are made as its role, which must be in that account).
    pub async fn in_place(&self, global: &GlobalArgs, place: &Place) -> anyhow::Result<Setup> {
        let (region, role) = (place.region.as_str(), place.account.as_ref());
        if region == self.region && role.is_none() {
            return Ok(self.clone());
        }
        let mut there = global.clone();
        there.regions = vec![region.to_string()];
        let mut config = aws::load(&there).await;
        let mut account_id = self.account_id.clone();
        if let Some((account, arn)) = role {
            config = aws::assume(&config, arn).await;
            let took = aws::account_id(&config)
                .await
                .map_err(|why| anyhow::anyhow!("cannot take the role {arn}: {why}"))?;
            anyhow::ensure!(
                took == *account,
                "the role {arn} is in account {took}, not {account}, where the cloud \
                 assembly pins the stack"
            );
            account_id = Some(took);
        }
        let engine = &self.engine;
        let providers = providers(&there, &config, region, account_id.as_deref());
        Ok(Setup {
            engine: Arc::new(Engine {
                store: engine.store.clone(),
                providers: Arc::new(providers),
                lookups: Arc::new(AwsLookups::new(&config)),
                region: region.to_string(),
                who: engine.who.clone(),
                cloudformation_fallback: engine.cloudformation_fallback,
                progress: engine.progress.clone(),
                stale: engine.stale.clone(),
                digest_key: engine.digest_key.clone(),
                lease: engine.lease,
            }),
            region: region.to_string(),
            account_id,
            config,
        })
    }

    /// What the engine deploys for `stack`, in this region and account.
    pub fn input(&self, stack: StackTemplate, parameters: BoundParameters) -> StackInput {
        StackInput {
            pseudo: Pseudo {
                region: self.region.clone(),
                account_id: self.account_id.clone(),
                stack_name: stack.name.clone(),
                stack_id: None,
            },
            name: stack.name,
            source: stack.file.display().to_string(),
            template: stack.template,
            parameters,
            nested: stack.nested,
        }
    }
}

/// The engine of a command that acts on AWS: when no AWS endpoint answers at all, it
/// stops here, in seconds, naming the endpoint, instead of failing every call after
/// retries.
pub async fn setup(global: &GlobalArgs, cfn_fallback: bool, verbose: u8) -> anyhow::Result<Setup> {
    setup_with(
        global,
        cfn_fallback,
        verbose,
        None,
        Some("values that use AWS::AccountId cannot be resolved"),
        true,
    )
    .await
}

/// The engine, on `store` when given (else the configured one). `needs_aws`: an endpoint
/// that nobody answers at is an error (else the command goes on offline, the account
/// unknown, saying so when `account_note` is given).
pub async fn setup_with(
    global: &GlobalArgs,
    cfn_fallback: bool,
    verbose: u8,
    store: Option<Store>,
    account_note: Option<&str>,
    needs_aws: bool,
) -> anyhow::Result<Setup> {
    let config = aws::load(global).await;
    let region = aws::region(&config)?;
    // Asked before the store opens: a command stopped here leaves nothing behind.
    let asked = match &global.account {
        Some(answer) => answer.clone(),
        None => aws::account_id(&config).await,
    };
    let account_id = match asked {
        Ok(id) => Some(id),
        Err(why) if needs_aws && why.unreachable() => anyhow::bail!(
            "cannot reach {} ({why}), so nothing was done: check --endpoint-url \
             (AWS_ENDPOINT_URL), --region and the network",
            aws::endpoint(&config)
        ),
        Err(why) => {
            if let Some(what) = account_note {
                eprintln!("note: the AWS account is unknown ({why}); {what}");
            }
            None
        }
    };
    let store = match store {
        Some(s) => s,
        None => {
            let fresh = matches!(&global.store, StoreSpec::Local(dir) if !local_file(dir).exists());
            let store = Store::open(&global.store, &config, global.store_bucket.clone())?;
            if fresh && global.store_defaulted {
                eprintln!(
                    "note: this folder's records are kept in the local store {} (this account \
                     has no stackflow store in {region}: `stackflow bootstrap` makes one that \
                     every folder and machine finds)",
                    global.store
                );
            }
            store
        }
    };
    let lookups = Arc::new(AwsLookups::new(&config));
    let printer = Arc::new(Printer::new(verbose));
    printer.start_heartbeat();
    let providers = Arc::new(providers(global, &config, &region, account_id.as_deref()));
    let engine = Arc::new(Engine {
        store: Arc::new(store),
        providers,
        lookups,
        region: region.clone(),
        who: holder_name(),
        cloudformation_fallback: cfn_fallback,
        progress: printer,
        stale: stale_check(),
        digest_key: digest_key(global, &config).await?,
        lease: Some(std::time::Duration::from_secs(120)),
    });
    Ok(Setup {
        engine,
        region,
        account_id,
        config,
    })
}

/// Every provider. Custom resource handlers answer in `--store-bucket` when given, else in
/// stackflow's own bucket of this account and region (`stackflow-<account>-<region>`, the
/// one `stackflow bootstrap` makes), which the first custom resource request makes when
/// it does not exist yet (encrypted, public access blocked, answers expiring after a
/// day), saying so in one line.
fn providers(
    global: &GlobalArgs,
    config: &aws_types::SdkConfig,
    region: &str,
    account: Option<&str>,
) -> Providers {
    let mut providers = Providers::from_config(config, global.store_bucket.clone());
    if global.store_bucket.is_some() {
        return providers;
    }
    let Some(account) = account else {
        return providers;
    };
    let bucket = stackflow_bucket_name(account, region);
    let s3 = stackflow_providers::aws::s3_client(config);
    let (name, place) = (bucket.clone(), region.to_string());
    let hook: FirstUse = Arc::new(move || {
        let (s3, name, place) = (s3.clone(), name.clone(), place.clone());
        Box::pin(async move {
            let report = ensure_bucket(&s3, &name, &place, None).await?;
            if report.created {
                eprintln!(
                    "created s3://{name}, stackflow's bucket in this account and region \
                     (encrypted, public access blocked, answers expiring after a day): custom \
                     resource handlers answer there (stackflow bootstrap makes it ahead of time)"
                );
            } else if !report.changed.is_empty() {
                eprintln!("s3://{name}: set {}", report.changed.join("; "));
            }
            Ok(())
        })
    });
    providers.custom = Some(Arc::new(
        CustomResourceProvider::from_config(config, bucket).with_first_use(hook),
    ));
    providers
}

/// The store's digest key (see `stackflow_engine::digest`): beside a local store, in the
/// store bucket of a DynamoDB store. A DynamoDB store without a bucket has none, and a
/// rotated secret is then not seen as a change. A local store that does not exist yet
/// (a diff before the first deploy) gets a key for this run only: nothing is created.
async fn digest_key(
    global: &GlobalArgs,
    config: &aws_types::SdkConfig,
) -> anyhow::Result<Option<DigestKey>> {
    match (&global.store, &global.store_bucket) {
        (StoreSpec::Local(dir), _) if !local_file(dir).exists() => {
            Ok(Some(stackflow_engine::digest::new_key()))
        }
        (StoreSpec::Local(dir), _) => {
            Ok(Some(local_key(dir).map_err(|e| {
                anyhow::anyhow!("the digest key of {}: {e}", dir.display())
            })?))
        }
        (StoreSpec::DynamoDb(_), Some(bucket)) => {
            let s3 = stackflow_providers::aws::s3_client(config);
            Ok(Some(
                bucket_key(&s3, bucket).await.map_err(anyhow::Error::msg)?,
            ))
        }
        (StoreSpec::DynamoDb(_), None) => Ok(None),
    }
}

/// What most commands need: the AWS configuration, the region and the event store.
pub struct Context {
    pub region: String,
    pub store: Store,
}

impl Context {
    pub async fn open(global: &GlobalArgs) -> anyhow::Result<Context> {
        let config = aws::load(global).await;
        let region = aws::region(&config)?;
        // Commands that read never create a store: a local one that does not exist holds
        // nothing yet.
        if let StoreSpec::Local(dir) = &global.store
            && !local_file(dir).exists()
        {
            anyhow::bail!(
                "there is no local store at {}: nothing has been deployed from here (pass --store to read another one)",
                local_file(dir).display()
            );
        }
        let store = Store::open(&global.store, &config, global.store_bucket.clone())?;
        Ok(Context { region, store })
    }

    /// The stream of a stack in the configured region.
    pub fn stream(&self, stack: &str) -> StreamId {
        StreamId::new(&self.region, stack)
    }
}

/// Picks the store of a command given no `--store`: the account's store in this region
/// when `stackflow bootstrap` made one, so that every folder and machine finds the same
/// records; else the local store of this folder. A folder whose local store exists keeps
/// it (its records are not in the account's store), saying so when the account has a
/// store too. An account store that cannot be told from none (DescribeTable refused) is
/// an error: taking it for none would make a deploy create again what it records.
pub async fn resolve_store(global: &mut GlobalArgs) -> anyhow::Result<()> {
    if let Some(spec) = &global.store_given {
        global.store = spec.clone();
        return Ok(());
    }
    let local = PathBuf::from(".stackflow");
    let config = crate::aws::load(global).await;
    let account = crate::aws::account_id(&config).await;
    global.account = Some(account.clone());
    global.store = match account_store(&config, account.ok()).await? {
        Some(table) if local_file(&local).exists() => {
            eprintln!(
                "note: using this folder's local store {}; this account's store \
                 dynamodb:{table} exists too (their records are not shared): pass --store \
                 to choose",
                local.display()
            );
            StoreSpec::Local(local)
        }
        Some(table) => {
            if global.store_bucket.is_none() {
                global.store_bucket = Some(table.clone());
            }
            StoreSpec::DynamoDb(table)
        }
        None => {
            global.store_defaulted = true;
            StoreSpec::Local(local)
        }
    };
    Ok(())
}

/// The account's store in the configured region, if it has one. Offline, or without
/// credentials, no account store can be read: `None`.
async fn account_store(
    config: &aws_types::SdkConfig,
    account: Option<String>,
) -> anyhow::Result<Option<String>> {
    let (Ok(region), Some(account)) = (crate::aws::region(config), account) else {
        return Ok(None);
    };
    let table = crate::store::account_store_name(&account, &region);
    let ddb = aws_sdk_dynamodb::Client::new(config);
    match ddb.describe_table().table_name(&table).send().await {
        Ok(_) => Ok(Some(table)),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            Ok(None)
        }
        Err(e) => anyhow::bail!(
            "cannot tell whether this account has a stackflow store (DescribeTable {table}: \
             {}): pass --store",
            crate::aws::brief_error(&e)
        ),
    }
}

/// Where a stack goes: a region, and another account with the role to take there
/// (`None`: the caller's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    region: String,
    account: Option<(String, String)>,
}

impl Place {
    /// The command's own place: `region`, the caller's account.
    pub fn home(region: &str) -> Place {
        Place {
            region: region.to_string(),
            account: None,
        }
    }

    /// Where `stack` goes: the region it is pinned to (else `home`), and the account with
    /// its role when the cloud assembly pins it to another than the `caller`'s.
    pub fn of(stack: &StackTemplate, home: &str, caller: Option<&str>) -> Place {
        let env = &stack.environment;
        let account = match (&env.account, &env.role) {
            (Some(account), Some(role)) if caller != Some(account.as_str()) => {
                Some((account.clone(), role.clone()))
            }
            _ => None,
        };
        Place {
            region: env.region.clone().unwrap_or_else(|| home.to_string()),
            account,
        }
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The place as a user names it: `eu-west-1`, or `account 222222222222 in eu-west-1`.
    pub fn shown(&self) -> String {
        match &self.account {
            Some((account, _)) => format!("account {account} in {}", self.region),
            None => self.region.clone(),
        }
    }
}
