//! Rankings over one profile: functions by self and by inclusive samples, the callers of
//! a family of frames, and the share of each module.

use super::{function_frames, percent};
use crate::folded::Folded;
use regex::Regex;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// One ranked name with its samples and their share (of what, the caller says).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub name: String,
    pub samples: u64,
    pub percent: f64,
}

/// The bucket of samples in frames matching the pattern with no caller matching the module.
pub const NO_CALLER: &str = "<no matching caller>";
/// The bucket of samples with no frame of any module.
pub const OTHER: &str = "<other>";

/// Samples per function as the leaf (self time).
pub fn self_counts(folded: &Folded) -> HashMap<&str, u64> {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for (stack, count) in &folded.stacks {
        if let Some(leaf) = function_frames(stack).next_back() {
            *counts.entry(leaf).or_default() += count;
        }
    }
    counts
}

/// Samples per function anywhere on the stack (inclusive time); a function that recurses
/// counts once per stack.
pub fn inclusive_counts(folded: &Folded) -> HashMap<&str, u64> {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for (stack, count) in &folded.stacks {
        seen.clear();
        for frame in function_frames(stack) {
            if seen.insert(frame) {
                *counts.entry(frame).or_default() += count;
            }
        }
    }
    counts
}

/// The `n` heaviest functions by self samples, with their share of all samples.
pub fn by_self(folded: &Folded, n: usize) -> Vec<Row> {
    ranked(self_counts(folded), folded.total(), n)
}

/// The `n` heaviest functions by inclusive samples, with their share of all samples.
pub fn by_inclusive(folded: &Folded, n: usize) -> Vec<Row> {
    ranked(inclusive_counts(folded), folded.total(), n)
}

fn ranked(counts: HashMap<&str, u64>, total: u64, n: usize) -> Vec<Row> {
    let mut rows: Vec<Row> = counts
        .into_iter()
        .map(|(name, samples)| Row {
            name: name.to_string(),
            samples,
            percent: percent(samples, total),
        })
        .collect();
    sort_rows(&mut rows);
    rows.truncate(n);
    rows
}

/// Heaviest first, then by name, so equal counts come out in a stable order.
fn sort_rows(rows: &mut [Row]) {
    rows.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
}

/// Who calls a family of frames.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Callers {
    /// Samples of stacks with a frame matching the pattern.
    pub matched: u64,
    /// `matched` as a share of all samples.
    pub matched_percent: f64,
    /// Callers by samples; `percent` is the share of `matched`. Samples without a caller
    /// matching the module are in [`NO_CALLER`].
    pub rows: Vec<Row>,
}

/// For every stack with a frame matching `pattern`, the nearest frame above the innermost
/// such frame that matches `module` (any frame when `module` is `None`), summed by name.
/// The `n` heaviest callers are kept (the no-caller bucket always).
pub fn callers(folded: &Folded, pattern: &Regex, module: Option<&Regex>, n: usize) -> Callers {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    let mut matched = 0;
    for (stack, count) in &folded.stacks {
        let frames: Vec<&str> = function_frames(stack).collect();
        let Some(hit) = frames.iter().rposition(|f| pattern.is_match(f)) else {
            continue;
        };
        matched += count;
        let caller = frames[..hit]
            .iter()
            .rev()
            .find(|f| module.is_none_or(|m| m.is_match(f)))
            .copied()
            .unwrap_or(NO_CALLER);
        *counts.entry(caller).or_default() += count;
    }
    let no_caller = counts.remove(NO_CALLER);
    let mut rows = ranked(counts, matched, n);
    if let Some(samples) = no_caller {
        rows.push(Row {
            name: NO_CALLER.to_string(),
            samples,
            percent: percent(samples, matched),
        });
    }
    Callers {
        matched,
        matched_percent: percent(matched, folded.total()),
        rows,
    }
}

/// The share of each module: every sample goes to the innermost frame that `module`
/// matches, named by the regex's first capture group (the whole match when it has none);
/// samples of stacks without such a frame go to [`OTHER`], listed last. Percentages are
/// of all samples, so the rows add up to 100 %.
pub fn modules(folded: &Folded, module: &Regex) -> Vec<Row> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut other = 0;
    for (stack, count) in &folded.stacks {
        let name = function_frames(stack).rev().find_map(|frame| {
            module.captures(frame).map(|c| {
                c.get(1)
                    .or_else(|| c.get(0))
                    .map(|m| m.as_str().to_string())
                    .unwrap_or_default()
            })
        });
        match name {
            Some(name) => *counts.entry(name).or_default() += count,
            None => other += count,
        }
    }
    let total = folded.total();
    let mut rows: Vec<Row> = counts
        .into_iter()
        .map(|(name, samples)| Row {
            percent: percent(samples, total),
            name,
            samples,
        })
        .collect();
    sort_rows(&mut rows);
    if other > 0 {
        rows.push(Row {
            name: OTHER.to_string(),
            samples: other,
            percent: percent(other, total),
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Folded {
        Folded::from_folded_text(
            "t;main;reth_db::get;malloc 4\n\
             t;main;reth_trie::hash;std::alloc;malloc 3\n\
             t;main;reth_trie::hash;reth_trie::hash;keccak 2\n\
             t;main;malloc 1\n\
             t 1\n",
        )
    }

    #[test]
    fn self_and_inclusive_rankings_skip_the_root_and_count_recursion_once() {
        let f = sample();
        let top = by_self(&f, 2);
        assert_eq!(top[0].name, "malloc");
        assert_eq!(top[0].samples, 8);
        assert!((top[0].percent - 800.0 / 11.0).abs() < 1e-9);
        assert_eq!((top[1].name.as_str(), top[1].samples), ("keccak", 2));
        let inc = by_inclusive(&f, 10);
        assert_eq!((inc[0].name.as_str(), inc[0].samples), ("main", 10));
        assert_eq!((inc[1].name.as_str(), inc[1].samples), ("malloc", 8));
        assert_eq!(
            (inc[2].name.as_str(), inc[2].samples),
            ("reth_trie::hash", 5)
        );
        assert!(inc.iter().all(|r| r.name != "t"));
    }

    #[test]
    fn callers_take_the_nearest_frame_matching_the_module() {
        let f = sample();
        let module = Regex::new(r"^reth_").unwrap();
        let c = callers(&f, &Regex::new("^malloc$").unwrap(), Some(&module), 10);
        assert_eq!(c.matched, 8);
        let named = |rows: &[Row]| -> Vec<(String, u64)> {
            rows.iter().map(|r| (r.name.clone(), r.samples)).collect()
        };
        let expected = [("reth_db::get", 4), ("reth_trie::hash", 3), (NO_CALLER, 1)];
        assert_eq!(named(&c.rows), expected.map(|(n, s)| (n.to_string(), s)));
        // Without a module, the immediate caller.
        let any = callers(&f, &Regex::new("^malloc$").unwrap(), None, 10);
        let expected = [("reth_db::get", 4), ("std::alloc", 3), ("main", 1)];
        assert_eq!(named(&any.rows), expected.map(|(n, s)| (n.to_string(), s)));
    }

    #[test]
    fn modules_go_to_the_innermost_matching_frame_and_the_rest_is_other() {
        let rows = modules(&sample(), &Regex::new(r"(reth_\w+)::").unwrap());
        let got: Vec<(&str, u64)> = rows.iter().map(|r| (r.name.as_str(), r.samples)).collect();
        assert_eq!(got, vec![("reth_trie", 5), ("reth_db", 4), (OTHER, 2)]);
        let sum: f64 = rows.iter().map(|r| r.percent).sum();
        assert!((sum - 100.0).abs() < 1e-9);
    }
}
