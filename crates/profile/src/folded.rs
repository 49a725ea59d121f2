//! Folded stacks (`frame;frame;frame count`) and the figures the summary needs (sample
//! count, heaviest functions, how much is unsymbolized). `perf script` text is folded by
//! `profile::perfscript`, above this module. Pure functions over readers and text.

use devprof_symbols::demangle::demangle_frame;
use std::collections::HashMap;
use std::io::{self, BufRead, Write};

/// Folded stacks, demangled and merged, sorted by stack text for stable output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Folded {
    pub stacks: Vec<(String, u64)>,
}

impl Folded {
    /// Parses folded text (`frame;frame;frame count` lines), demangling every frame and
    /// merging stacks that become identical.
    pub fn from_folded_text(text: &str) -> Self {
        Self::from_folded_reader(text.as_bytes()).unwrap_or_default()
    }

    /// `from_folded_text` over a reader, line by line (async-profiler's collapsed output
    /// streamed out of a container): memory grows with distinct stacks only.
    pub fn from_folded_reader<R: BufRead>(mut reader: R) -> io::Result<Self> {
        let mut merged: HashMap<String, u64> = HashMap::new();
        let mut cache: HashMap<String, String> = HashMap::new();
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                break;
            }
            let Some((stack, count)) = line.trim_end().rsplit_once(' ') else {
                continue;
            };
            let Ok(count) = count.parse::<u64>() else {
                continue;
            };
            let demangled: Vec<String> = stack
                .split(';')
                .map(|frame| {
                    cache
                        .entry(frame.to_string())
                        .or_insert_with(|| demangle_frame(frame))
                        .clone()
                })
                .collect();
            *merged.entry(demangled.join(";")).or_default() += count;
        }
        let mut stacks: Vec<(String, u64)> = merged.into_iter().collect();
        stacks.sort();
        Ok(Folded { stacks })
    }

    /// Builds from `(stack, count)` pairs, sorted; zero counts are dropped.
    pub fn from_pairs(pairs: impl Iterator<Item = (String, u64)>) -> Self {
        let mut stacks: Vec<(String, u64)> = pairs.filter(|(_, c)| *c > 0).collect();
        stacks.sort();
        Folded { stacks }
    }

    pub fn total(&self) -> u64 {
        self.stacks.iter().map(|(_, c)| c).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    pub fn write_to<W: Write>(&self, mut out: W) -> io::Result<()> {
        for (stack, count) in &self.stacks {
            writeln!(out, "{stack} {count}")?;
        }
        out.flush()
    }

    pub fn lines(&self) -> impl Iterator<Item = String> + '_ {
        self.stacks.iter().map(|(s, c)| format!("{s} {c}"))
    }

    /// Functions by self samples (the leaf frame), heaviest first. The root frame is the
    /// process/thread name perf reports, not a function, so a stack that is only a root
    /// counts for nobody.
    pub fn top_self(&self, n: usize) -> Vec<(String, u64)> {
        let mut by_function: HashMap<&str, u64> = HashMap::new();
        for (stack, count) in &self.stacks {
            let mut frames = stack.split(';');
            frames.next();
            if let Some(leaf) = frames.next_back().or_else(|| stack.split(';').nth(1)) {
                *by_function.entry(leaf).or_default() += count;
            }
        }
        let mut ranked: Vec<(String, u64)> = by_function
            .into_iter()
            .map(|(f, c)| (f.to_string(), c))
            .collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(n);
        ranked
    }

    /// The share (0..=1) of frames, weighted by samples and not counting the root, that
    /// perf could not name.
    pub fn unsymbolized_share(&self) -> f64 {
        let (mut unknown, mut all) = (0u64, 0u64);
        for (stack, count) in &self.stacks {
            for frame in stack.split(';').skip(1) {
                all += count;
                if is_unsymbolized(frame) {
                    unknown += count;
                }
            }
        }
        if all == 0 {
            0.0
        } else {
            unknown as f64 / all as f64
        }
    }
}

/// `[unknown]`, or inferno's `[module]` stand-in for a frame without a symbol, or a raw
/// hex address.
pub fn is_unsymbolized(frame: &str) -> bool {
    let f = frame.trim();
    (f.starts_with('[') && f.ends_with(']'))
        || f.strip_prefix("0x")
            .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_stacks_that_demangle_alike_and_ranks_self_time() {
        let folded = Folded::from_folded_text(
            "app;main;_ZN9demo_node10hash_chain17h0123456789abcdefE 5\n\
             app;main;demo_node::hash_chain::h0123456789abcdef 3\n\
             app;main;demo_node::state_lookup 2\n\
             app;[unknown];[unknown] 2\n\
             app 1\n",
        );
        assert_eq!(folded.total(), 13);
        assert_eq!(folded.stacks.len(), 4);
        let top = folded.top_self(2);
        assert_eq!(top[0], ("demo_node::hash_chain".to_string(), 8));
        assert_eq!(top[1].1, 2);
        // 4 of the 24 non-root frames (weighted) are unknown.
        assert!((folded.unsymbolized_share() - 4.0 / 24.0).abs() < 1e-9);
    }
}
