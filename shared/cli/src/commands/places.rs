//! Where each stack of a deploy goes: the region its cloud assembly pins it to (manifest
//! `environment`), else the command's, and the account: another account's stacks through
//! the role the manifest names (`assumeRoleArn`), the others in the caller's; with a setup
//! (engine, providers, lookups) and the assets of each place. A stack pinned to another
//! account with no role is refused.

use std::collections::{BTreeMap, BTreeSet};

use stackflow_core::template::StackTemplate;

use crate::args::GlobalArgs;
use crate::assets::Assets;
use crate::setup::Setup;

/// Where a stack goes: a region, and another account with the role to take there
/// (`None`: the caller's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    region: String,
    account: Option<(String, String)>,
}

/// The places of a deploy, each with its setup and its stacks' assets.
pub struct Places {
    /// The command's own place.
    home: Place,
    /// The caller's account, when known.
    caller: Option<String>,
    setups: BTreeMap<Place, Setup>,
    assets: BTreeMap<Place, Assets>,
    /// The place of each stack, by name.
    places: BTreeMap<String, Place>,
}

impl Places {
    /// Sets up every region the stacks go to and prepares (checks, and points the
    /// templates at) each region's assets. `setup` is the command's own region's.
    pub async fn prepare(
        global: &GlobalArgs,
        setup: Setup,
        stacks: &mut Vec<StackTemplate>,
        use_cdk_bootstrap_assets: bool,
    ) -> anyhow::Result<Places> {
        setup.check_pinned(stacks, true)?;
        let mut places = Places {
            home: Place {
                region: setup.region.clone(),
                account: None,
            },
            caller: setup.account_id.clone(),
            setups: BTreeMap::new(),
            assets: BTreeMap::new(),
            places: BTreeMap::new(),
        };
        let wanted: BTreeSet<Place> = stacks.iter().map(|s| places.of(s)).collect();
        // Each place's stacks apart, in their order, then all of them back in theirs.
        let mut numbered: Vec<(usize, StackTemplate)> =
            std::mem::take(stacks).into_iter().enumerate().collect();
        let mut placed = Vec::with_capacity(numbered.len());
        for place in wanted {
            let role = place
                .account
                .as_ref()
                .map(|(a, r)| (a.as_str(), r.as_str()));
            let there = setup.in_place(global, &place.region, role).await?;
            if place != places.home {
                eprintln!(
                    "note: stacks the cloud assembly pins to {} are deployed there (this \
                     command's is {})",
                    place.shown(),
                    places.home.shown()
                );
            }
            let (mine, others): (Vec<_>, Vec<_>) = numbered
                .into_iter()
                .partition(|(_, s)| places.of(s) == place);
            numbered = others;
            let (indexes, mut group): (Vec<usize>, Vec<StackTemplate>) = mine.into_iter().unzip();
            let assets = Assets::prepare(
                &there.config,
                &place.region,
                there.account_id.as_deref(),
                &group,
                use_cdk_bootstrap_assets,
            )
            .await?;
            assets.check()?;
            assets.rewrite(&mut group);
            for stack in &group {
                places.places.insert(stack.name.clone(), place.clone());
            }
            placed.extend(indexes.into_iter().zip(group));
            places.setups.insert(place.clone(), there);
            places.assets.insert(place, assets);
        }
        placed.sort_by_key(|(i, _)| *i);
        *stacks = placed.into_iter().map(|(_, s)| s).collect();
        Ok(places)
    }

    /// Where `stack` goes: the region it is pinned to (else the command's), and the
    /// account with its role when the cloud assembly pins it to another than the caller's.
    fn of(&self, stack: &StackTemplate) -> Place {
        let env = &stack.environment;
        let account = match (&env.account, &env.role) {
            (Some(account), Some(role)) if self.caller.as_ref() != Some(account) => {
                Some((account.clone(), role.clone()))
            }
            _ => None,
        };
        Place {
            region: region_of(stack, &self.home.region),
            account,
        }
    }

    /// The setup of the place `stack` goes to.
    pub fn setup(&self, stack: &StackTemplate) -> &Setup {
        &self.setups[&self.of(stack)]
    }

    /// The assets of the place `stack` goes to.
    pub fn assets(&self, stack: &StackTemplate) -> &Assets {
        &self.assets[&self.of(stack)]
    }

    /// The setup of the command's own place.
    pub fn home(&self) -> &Setup {
        &self.setups[&self.home]
    }

    /// Whether some stack goes to another place than the command's.
    pub fn elsewhere(&self) -> bool {
        self.setups.len() > 1 || !self.setups.contains_key(&self.home)
    }

    /// The setup of the place stack `name` went to (the command's own for a stack it did
    /// not place).
    pub fn setup_named(&self, name: &str) -> &Setup {
        self.places
            .get(name)
            .and_then(|place| self.setups.get(place))
            .unwrap_or_else(|| self.home())
    }
}

impl Place {
    /// The place as a user names it: `eu-west-1`, or `account 222222222222 in eu-west-1`.
    fn shown(&self) -> String {
        match &self.account {
            Some((account, _)) => format!("account {account} in {}", self.region),
            None => self.region.clone(),
        }
    }
}

/// The region `stack` goes to: the one it is pinned to, else `home`.
pub fn region_of(stack: &StackTemplate, home: &str) -> String {
    stack
        .environment
        .region
        .clone()
        .unwrap_or_else(|| home.to_string())
}
