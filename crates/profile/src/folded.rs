//! Folded stacks (`frame;frame;frame count`) and the figures the summary needs (sample
//! count, heaviest functions, how much is unsymbolized). `perf script` text is folded by
//! `profile::perfscript`, above this module. Pure functions over readers and text.

use devprof_symbols::demangle::demangle_frame;
use std::collections::HashMap;
use std::io::{self, BufRead, Read, Write};

/// Longest folded line read (a stack of thousands of frames is a few hundred KiB).
pub const MAX_LINE: usize = 64 << 20;

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
    /// streamed out of a container): memory grows with distinct stacks only, and a line
    /// longer than `MAX_LINE` is an error, not a buffer that grows with the stream.
    pub fn from_folded_reader<R: BufRead>(mut reader: R) -> io::Result<Self> {
        let mut merged: HashMap<String, u64> = HashMap::new();
        let mut cache: HashMap<String, String> = HashMap::new();
        let mut line = String::new();
        loop {
            line.clear();
            if (&mut reader)
                .take(MAX_LINE as u64 + 1)
                .read_line(&mut line)?
                == 0
            {
                break;
            }
            if line.len() > MAX_LINE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a folded stack longer than {} MiB", MAX_LINE >> 20),
                ));
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
            // Counts are the file's numbers: summed, they saturate.
            let total = merged.entry(demangled.join(";")).or_default();
            *total = total.saturating_add(count);
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
        self.stacks
            .iter()
            .fold(0, |sum, (_, c)| sum.saturating_add(*c))
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
                let total = by_function.entry(leaf).or_default();
                *total = total.saturating_add(*count);
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
                all = all.saturating_add(*count);
                if is_unsymbolized(frame) {
                    unknown = unknown.saturating_add(*count);
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

    #[test]
    fn folded_counts_summing_past_u64_saturate_not_overflow() {
        let folded = Folded::from_folded_text("app;f 18446744073709551615\napp;f 1\napp;g 2\n");
        assert_eq!(
            folded.stacks,
            vec![("app;f".to_string(), u64::MAX), ("app;g".to_string(), 2)]
        );
        assert_eq!(folded.total(), u64::MAX);
        assert_eq!(folded.top_self(1), vec![("f".to_string(), u64::MAX)]);
        assert_eq!(folded.unsymbolized_share(), 0.0);
    }

    #[test]
    fn a_folded_line_past_its_bound_is_an_error_not_a_growing_buffer() {
        let endless = io::repeat(b'f').take(MAX_LINE as u64 + 10);
        let err = Folded::from_folded_reader(io::BufReader::new(endless)).unwrap_err();
        assert!(err.to_string().contains("longer than 64 MiB"), "{err}");
    }
}
