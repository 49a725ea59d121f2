//! Block mode (`DEMO_BLOCKS=1`): instead of steady duty cycles, the node imports "blocks"
//! one after another on a thread named `block_import`. Each block runs the listed
//! workloads for a varying time (half to one and a half times `DEMO_BLOCK_MS`), then the
//! node logs a line shaped like reth's:
//!
//! ```text
//!  INFO Block added to canonical chain number=42 hash=0x9f…(64 hex) peers=0 txs=118 elapsed=183.274912ms at=1718000000123456789
//! ```
//!
//! with `elapsed` the block's own work, so a profiler that reads it knows when the block
//! began, and `at` the node's wall clock when it wrote the line (ns since the epoch), so the
//! delay until the engine stamps the line can be measured. One block in `DEMO_HEAVY_EVERY` is deliberately heavy: it also runs
//! `DEMO_HEAVY_WORKLOAD` for `DEMO_HEAVY_FACTOR` times `DEMO_BLOCK_MS`, and its line says
//! `heavy=<workload>`; the heavy workload runs nowhere else, so its samples belong to the
//! heavy blocks. Blocks are `DEMO_BLOCK_GAP_MS` apart (idle).
//!
//! The block workloads are bounded versions of the steady ones, with the same names.

use crate::config::{parse_positive, parse_workloads, Workload};
use crate::workloads::{hash_pass, lookup_batch, Rng, HASH_SEED};
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Block mode's settings, from the environment.
pub struct BlockSettings {
    pub work: Vec<Workload>,
    pub block_ms: u64,
    pub gap_ms: u64,
    pub heavy_every: u64,
    pub heavy: Workload,
    pub heavy_factor: u64,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// None unless `DEMO_BLOCKS=1`.
pub fn settings_from_env() -> Result<Option<BlockSettings>, String> {
    if var("DEMO_BLOCKS").as_deref() != Some("1") {
        return Ok(None);
    }
    let block_workload = |w: Workload| match w {
        Workload::HashChain | Workload::StateLookup => Ok(w),
        other => Err(format!(
            "block mode runs hash_chain and state_lookup; {other} is not a block workload"
        )),
    };
    let work = parse_workloads(var("DEMO_WORKLOADS").as_deref().unwrap_or("state_lookup"))
        .map_err(|e| format!("DEMO_WORKLOADS: {e}"))?
        .into_iter()
        .map(|s| block_workload(s.workload))
        .collect::<Result<Vec<_>, _>>()?;
    let heavy_name = var("DEMO_HEAVY_WORKLOAD").unwrap_or_else(|| "hash_chain".into());
    let heavy = Workload::from_name(heavy_name.trim())
        .ok_or_else(|| format!("DEMO_HEAVY_WORKLOAD: unknown workload '{heavy_name}'"))
        .and_then(block_workload)?;
    Ok(Some(BlockSettings {
        work,
        block_ms: parse_positive("DEMO_BLOCK_MS", var("DEMO_BLOCK_MS").as_deref(), 150)?,
        gap_ms: parse_positive(
            "DEMO_BLOCK_GAP_MS",
            var("DEMO_BLOCK_GAP_MS").as_deref(),
            100,
        )?,
        heavy_every: parse_positive("DEMO_HEAVY_EVERY", var("DEMO_HEAVY_EVERY").as_deref(), 8)?,
        heavy,
        heavy_factor: parse_positive("DEMO_HEAVY_FACTOR", var("DEMO_HEAVY_FACTOR").as_deref(), 4)?,
    }))
}

/// Entries of the block-mode state map (smaller than the steady mode's: blocks start fast).
const STATE_ENTRIES: usize = 1 << 18;

/// Whether block `number` is a heavy one.
pub fn is_heavy(number: u64, every: u64) -> bool {
    every > 0 && number % every == every - 1
}

/// Imports blocks forever on the calling thread.
pub fn run(s: &BlockSettings) -> ! {
    let mut rng = Rng::new(0xb10c_0001);
    let mut words = vec![0u64; 8192];
    for w in words.iter_mut() {
        *w = rng.next_u64();
    }
    let mut keys = Vec::with_capacity(STATE_ENTRIES);
    let mut map = BTreeMap::new();
    for i in 0..STATE_ENTRIES {
        let k = rng.next_u64();
        map.insert(k, i as u64);
        keys.push(k);
    }
    let mut state = State {
        words,
        keys,
        map,
        rng,
    };
    let mut number: u64 = 1;
    loop {
        let started = Instant::now();
        // Half to one and a half times the mean, split among the workloads.
        let budget = Duration::from_millis(s.block_ms) * (50 + state.rng.below(101) as u32) / 100;
        let share = budget / s.work.len().max(1) as u32;
        let mut txs = 0;
        for w in &s.work {
            txs += state.run(*w, share);
        }
        let heavy = is_heavy(number, s.heavy_every);
        if heavy {
            txs += state.run(s.heavy, Duration::from_millis(s.block_ms * s.heavy_factor));
        }
        let elapsed = started.elapsed();
        let hash = format!(
            "0x{:016x}{:016x}{:016x}{:016x}",
            state.rng.next_u64(),
            state.rng.next_u64(),
            state.rng.next_u64(),
            state.rng.next_u64()
        );
        let heavy_field = if heavy {
            format!(" heavy={}", s.heavy)
        } else {
            String::new()
        };
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        println!(
            " INFO Block added to canonical chain number={number} hash={hash} peers=0 txs={txs}{heavy_field} elapsed={elapsed:?} at={at}"
        );
        number += 1;
        std::thread::sleep(Duration::from_millis(s.gap_ms));
    }
}

struct State {
    words: Vec<u64>,
    keys: Vec<u64>,
    map: BTreeMap<u64, u64>,
    rng: Rng,
}

impl State {
    /// Runs `w` for `span`; returns the units of work done (the block's "transactions").
    fn run(&mut self, w: Workload, span: Duration) -> u64 {
        let deadline = Instant::now() + span;
        match w {
            Workload::HashChain => hash_chain(&mut self.words, deadline),
            _ => state_lookup(&self.map, &self.keys, &mut self.rng, deadline),
        }
    }
}

/// CPU in the function itself: the mixing written out, as the steady `hash_chain`.
#[inline(never)]
fn hash_chain(words: &mut [u64], deadline: Instant) -> u64 {
    let mut h: u64 = HASH_SEED;
    let mut rounds = 0;
    while Instant::now() < deadline {
        h = hash_pass(words, h);
        rounds += 1;
    }
    rounds
}

/// BTreeMap point lookups, as the steady `state_lookup`.
#[inline(never)]
fn state_lookup(map: &BTreeMap<u64, u64>, keys: &[u64], rng: &mut Rng, deadline: Instant) -> u64 {
    let mut acc = 0u64;
    let mut rounds = 0;
    while Instant::now() < deadline {
        acc = lookup_batch(map, keys, rng, acc);
        rounds += 1;
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_block_in_n_is_heavy() {
        let heavy: Vec<u64> = (1..=24).filter(|n| is_heavy(*n, 8)).collect();
        assert_eq!(heavy, vec![7, 15, 23]);
        assert!(!is_heavy(5, 0));
    }
}
