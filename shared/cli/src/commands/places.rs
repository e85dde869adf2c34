//! Where each stack of a deploy goes: the region its cloud assembly pins it to (manifest
//! `environment`), else the command's; with a setup (engine, providers, lookups) and the
//! assets of each region. Stacks pinned to another account are refused.

use std::collections::{BTreeMap, BTreeSet};

use stackflow_core::template::StackTemplate;

use crate::args::GlobalArgs;
use crate::assets::Assets;
use crate::setup::Setup;

/// The regions of a deploy, each with its setup and its stacks' assets.
pub struct Places {
    /// The command's own region.
    home: String,
    setups: BTreeMap<String, Setup>,
    assets: BTreeMap<String, Assets>,
    /// The region of each stack, by name.
    regions: BTreeMap<String, String>,
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
        let home = setup.region.clone();
        let regions: BTreeSet<String> = stacks.iter().map(|s| region_of(s, &home)).collect();
        let mut places = Places {
            home,
            setups: BTreeMap::new(),
            assets: BTreeMap::new(),
            regions: BTreeMap::new(),
        };
        // Each region's stacks apart, in their order, then all of them back in theirs.
        let mut numbered: Vec<(usize, StackTemplate)> =
            std::mem::take(stacks).into_iter().enumerate().collect();
        let mut placed = Vec::with_capacity(numbered.len());
        for region in regions {
            let there = setup.in_region(global, &region).await?;
            if region != places.home {
                eprintln!(
                    "note: stacks the cloud assembly pins to {region} are deployed there \
                     (this command's region is {})",
                    places.home
                );
            }
            let (mine, others): (Vec<_>, Vec<_>) = numbered
                .into_iter()
                .partition(|(_, s)| region_of(s, &places.home) == region);
            numbered = others;
            let (indexes, mut group): (Vec<usize>, Vec<StackTemplate>) = mine.into_iter().unzip();
            let assets = Assets::prepare(
                &there.config,
                &region,
                there.account_id.as_deref(),
                &group,
                use_cdk_bootstrap_assets,
            )
            .await?;
            assets.check()?;
            assets.rewrite(&mut group);
            for stack in &group {
                places.regions.insert(stack.name.clone(), region.clone());
            }
            placed.extend(indexes.into_iter().zip(group));
            places.setups.insert(region.clone(), there);
            places.assets.insert(region, assets);
        }
        placed.sort_by_key(|(i, _)| *i);
        *stacks = placed.into_iter().map(|(_, s)| s).collect();
        Ok(places)
    }

    /// The setup of the region `stack` goes to.
    pub fn setup(&self, stack: &StackTemplate) -> &Setup {
        &self.setups[&region_of(stack, &self.home)]
    }

    /// The assets of the region `stack` goes to.
    pub fn assets(&self, stack: &StackTemplate) -> &Assets {
        &self.assets[&region_of(stack, &self.home)]
    }

    /// The setup of the command's own region.
    pub fn home(&self) -> &Setup {
        &self.setups[&self.home]
    }

    /// Whether some stack goes to another region than the command's.
    pub fn elsewhere(&self) -> bool {
        self.setups.len() > 1 || !self.setups.contains_key(&self.home)
    }

    /// The setup of the region stack `name` went to (the command's own for a stack it
    /// did not place).
    pub fn setup_named(&self, name: &str) -> &Setup {
        self.regions
            .get(name)
            .and_then(|region| self.setups.get(region))
            .unwrap_or_else(|| self.home())
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
