//! Where each stack of a deploy goes: the region its cloud assembly pins it to (manifest
//! `environment`), else the command's, and the account: another account's stacks through
//! the role the manifest names (`assumeRoleArn`), the others in the caller's; with a setup
//! (engine, providers, lookups) and the assets of each place. A stack pinned to another
//! account with no role is refused.

use std::collections::{BTreeMap, BTreeSet};

use stackflow_core::template::StackTemplate;

use crate::args::GlobalArgs;
use crate::assets::Assets;
use crate::setup::{Place, Setup};

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
    /// Sets up every place the stacks go to and prepares each place's assets (points the
    /// templates at them; [`Places::check_assets`] checks what a publish needs). `setup`
    /// is the command's own place's.
    pub async fn prepare(
        global: &GlobalArgs,
        setup: Setup,
        stacks: &mut Vec<StackTemplate>,
        use_cdk_bootstrap_assets: bool,
    ) -> anyhow::Result<Places> {
        setup.check_pinned(stacks, true)?;
        let mut places = Places {
            home: Place::home(&setup.region),
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
            let there = setup.in_place(global, &place).await?;
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
                place.region(),
                there.account_id.as_deref(),
                &group,
                use_cdk_bootstrap_assets,
            )
            .await?;
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
        Place::of(stack, self.home.region(), self.caller.as_deref())
    }

    /// Checks what publishing each place's assets needs (a container CLI for images).
    pub fn check_assets(&self) -> anyhow::Result<()> {
        self.assets.values().try_for_each(Assets::check)
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
