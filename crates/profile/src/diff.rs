//! Two profiles compared: per-function shares before and after (normalized by each
//! profile's total, so a longer or busier capture does not look like a regression), and the
//! differential folded lines inferno draws a red/blue flamegraph from.

use super::percent;
use super::top::{inclusive_counts, self_counts};
use crate::folded::Folded;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::io;

/// What a function's weight is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// Samples with the function as the leaf.
    #[serde(rename = "self")]
    SelfTime,
    /// Samples with the function anywhere on the stack.
    Inclusive,
}

/// One function in both profiles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffRow {
    pub name: String,
    pub before: u64,
    pub after: u64,
    /// Share of all samples of the profile, in percent.
    pub before_percent: f64,
    pub after_percent: f64,
    /// `after_percent - before_percent`, in percentage points.
    pub delta_points: f64,
}

impl DiffRow {
    /// Its shares before and after, and the change, as every table shows them:
    /// `12.34`, `10.00`, `-2.34`.
    pub fn shown(&self) -> [String; 3] {
        [
            format!("{:.2}", self.before_percent),
            format!("{:.2}", self.after_percent),
            format!("{:+.2}", self.delta_points),
        ]
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub measure: Measure,
    pub before_total: u64,
    pub after_total: u64,
    /// Every function of either profile, largest gain first, largest loss last.
    pub rows: Vec<DiffRow>,
}

impl Diff {
    /// The `n` functions whose share grew most, largest first.
    pub fn gains(&self, n: usize) -> Vec<&DiffRow> {
        self.rows
            .iter()
            .filter(|r| r.delta_points > 0.0)
            .take(n)
            .collect()
    }

    /// The `n` functions whose share shrank most, largest loss first.
    pub fn losses(&self, n: usize) -> Vec<&DiffRow> {
        self.rows
            .iter()
            .rev()
            .filter(|r| r.delta_points < 0.0)
            .take(n)
            .collect()
    }
}

/// Compares two profiles function by function.
pub fn compare(before: &Folded, after: &Folded, measure: Measure) -> Diff {
    let counts = |f: &Folded| -> HashMap<String, u64> {
        let c = match measure {
            Measure::SelfTime => self_counts(f),
            Measure::Inclusive => inclusive_counts(f),
        };
        c.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    };
    let (b, a) = (counts(before), counts(after));
    let (before_total, after_total) = (before.total(), after.total());
    let names: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
    let mut rows: Vec<DiffRow> = names
        .into_iter()
        .map(|name| {
            let before = b.get(name).copied().unwrap_or(0);
            let after = a.get(name).copied().unwrap_or(0);
            let before_percent = percent(before, before_total);
            let after_percent = percent(after, after_total);
            DiffRow {
                name: name.clone(),
                before,
                after,
                before_percent,
                after_percent,
                delta_points: after_percent - before_percent,
            }
        })
        .collect();
    rows.sort_by(|x, y| {
        y.delta_points
            .total_cmp(&x.delta_points)
            .then_with(|| x.name.cmp(&y.name))
    });
    Diff {
        measure,
        before_total,
        after_total,
        rows,
    }
}

/// The differential folded lines (`stack before after`, sorted) that inferno's flamegraph
/// draws in red (grew) and blue (shrank): `before` is scaled to the after profile's total
/// (inferno's `differential` with `normalize`, which rounds down), `after` is as recorded.
pub fn differential_lines(before: &Folded, after: &Folded) -> io::Result<Vec<String>> {
    let text = |f: &Folded| f.lines().collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options {
            normalize: true,
            strip_hex: false,
        },
        text(before).as_bytes(),
        text(after).as_bytes(),
        &mut out,
    )?;
    let mut lines: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    Ok(lines)
}

/// `differential_lines` where only stacks whose leaf is in `significant` keep a change:
/// every other stack is drawn with its after count on both sides, so the graph is
/// coloured by significant changes alone.
pub fn significant_lines(
    before: &Folded,
    after: &Folded,
    significant: &std::collections::HashSet<String>,
) -> io::Result<Vec<String>> {
    Ok(differential_lines(before, after)?
        .into_iter()
        .map(|line| {
            let mut parts = line.rsplitn(3, ' ');
            let (Some(a), Some(_), Some(stack)) = (parts.next(), parts.next(), parts.next()) else {
                return line;
            };
            let leaf = super::function_frames(stack).next_back().unwrap_or("");
            if significant.contains(leaf) {
                line
            } else {
                format!("{stack} {a} {a}")
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_normalized_by_each_total() {
        // After has twice the samples; hash keeps its share, lookup doubles its share.
        let before = Folded::from_folded_text("t;main;hash 6\nt;main;lookup 2\nt;main;io 2\n");
        let after = Folded::from_folded_text("t;main;hash 12\nt;main;lookup 8\n");
        let d = compare(&before, &after, Measure::SelfTime);
        assert_eq!((d.before_total, d.after_total), (10, 20));
        let gains = d.gains(5);
        assert_eq!(gains.len(), 1);
        assert_eq!(gains[0].name, "lookup");
        assert!((gains[0].delta_points - 20.0).abs() < 1e-9);
        let losses = d.losses(5);
        assert_eq!(losses.len(), 1);
        assert_eq!((losses[0].name.as_str(), losses[0].after), ("io", 0));
        assert!((losses[0].delta_points + 20.0).abs() < 1e-9);
        // hash: 60 % -> 60 %, neither gain nor loss.
        assert!(d
            .rows
            .iter()
            .any(|r| r.name == "hash" && r.delta_points == 0.0));
        let inclusive = compare(&before, &after, Measure::Inclusive);
        assert!(inclusive
            .rows
            .iter()
            .any(|r| r.name == "main" && r.before == 10 && r.after == 20));
    }

    #[test]
    fn only_significant_leaves_keep_their_change() {
        let before = Folded::from_folded_text("t;a 3\nt;b 1\n");
        let after = Folded::from_folded_text("t;a 2\nt;c 8\n");
        let significant = ["c".to_string()].into_iter().collect();
        assert_eq!(
            significant_lines(&before, &after, &significant).unwrap(),
            vec!["t;a 2 2", "t;b 0 0", "t;c 0 8"]
        );
    }

    #[test]
    fn differential_lines_scale_before_to_the_after_total() {
        let before = Folded::from_folded_text("t;a 3\nt;b 1\n");
        let after = Folded::from_folded_text("t;a 2\nt;c 8\n");
        assert_eq!(
            differential_lines(&before, &after).unwrap(),
            vec!["t;a 7 2", "t;b 2 0", "t;c 0 8"]
        );
    }
}
