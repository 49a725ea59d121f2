//! Captures in the formats other tools read: pprof (`go tool pprof`, Parca, Pyroscope),
//! speedscope, the Firefox Profiler, and collapsed stacks. Pure writers over a capture's
//! folded stacks, its timeline and what its manifest says about units and times; the
//! command (`commands/export.rs`) finds the files and writes the result.

mod firefox;
mod pprof;
mod speedscope;

use crate::profile::folded::Folded;
use crate::profile::markers::Markers;
use crate::profile::timeline::Timeline;
use std::collections::HashMap;

pub use firefox::{firefox_json, firefox_profile};
pub use pprof::{pprof_gz, pprof_proto};
pub use speedscope::{speedscope_json, speedscope_session};

/// What one unit of a profile's weight is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// pprof's sample type (`samples`, `events`, `off_cpu`, `inuse_space`).
    pub kind: &'static str,
    /// `count`, `microseconds` or `bytes`.
    pub unit: &'static str,
}

impl Unit {
    pub const SAMPLES: Unit = Unit {
        kind: "samples",
        unit: "count",
    };
    pub const EVENTS: Unit = Unit {
        kind: "events",
        unit: "count",
    };
    pub const OFF_CPU: Unit = Unit {
        kind: "off_cpu",
        unit: "microseconds",
    };
    pub const BYTES: Unit = Unit {
        kind: "inuse_space",
        unit: "bytes",
    };
}

/// A capture as the writers see it.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    pub folded: &'a Folded,
    /// Per-sample times and threads, when the capture has them.
    pub timeline: Option<&'a Timeline>,
    pub unit: Unit,
    /// A title: container and capture.
    pub name: String,
    /// When the capture started, ns since the Unix epoch.
    pub start_unix_ns: i64,
    pub duration_ns: i64,
    /// Sampling period in ns (1 s / frequency), for sampled CPU captures.
    pub period_ns: Option<i64>,
    /// The profiled program, for the pprof mapping.
    pub program: String,
}

/// One capture as a process of the profile.
pub struct ProcessInput<'a> {
    pub source: &'a Source<'a>,
    pub markers: Option<&'a Markers>,
    /// The process's name in the profile (container, capture).
    pub name: String,
    pub pid: u32,
    /// Said on the process as a marker (why it has no sample times, for one).
    pub note: Option<String>,
}

impl ProcessInput<'_> {
    /// When its first sample was taken, ns since the Unix epoch: through the timeline's
    /// clock when it has one, else the capture's start.
    pub fn first_unix_ns(&self) -> i64 {
        match self.source.timeline {
            Some(t) => match (t.to_unix_ns(), t.span_ns()) {
                (Some(offset), Some((first, _))) => (first as i64).saturating_add(offset),
                _ => self.source.start_unix_ns,
            },
            None => self.source.start_unix_ns,
        }
    }

    /// The earliest instant it shows (a marker's interval may begin before the samples).
    pub fn earliest_unix_ns(&self) -> i64 {
        let first = self.first_unix_ns();
        self.markers
            .and_then(|m| {
                m.markers
                    .iter()
                    .map(|m| m.time_ns.saturating_sub(m.elapsed_ns.unwrap_or(0) as i64))
                    .min()
            })
            .map_or(first, |m| m.min(first))
    }
}

/// One thread's samples, in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadSamples {
    pub name: String,
    pub tid: Option<u32>,
    pub pid: Option<u32>,
    /// (ns after the first sample of the capture when known, stack index, weight).
    pub samples: Vec<(Option<u64>, u32, u64)>,
}

/// Samples per thread over a shared table of frames and stacks (root first, without the
/// thread name root).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampled {
    pub frames: Vec<String>,
    pub stacks: Vec<Vec<u32>>,
    pub threads: Vec<ThreadSamples>,
}

impl Sampled {
    /// From the timeline when there is one (times and threads kept), else from the folded
    /// stacks: one thread per root name, each stack one sample.
    pub fn of(source: &Source<'_>) -> Sampled {
        let mut out = Sampled::default();
        let mut frame_ids: HashMap<String, u32> = HashMap::new();
        let mut intern = |stack: &str, out: &mut Sampled| -> u32 {
            let ids: Vec<u32> = crate::profile::function_frames(stack)
                .map(|f| match frame_ids.get(f) {
                    Some(id) => *id,
                    None => {
                        let id = out.frames.len() as u32;
                        out.frames.push(f.to_string());
                        frame_ids.insert(f.to_string(), id);
                        id
                    }
                })
                .collect();
            out.stacks.push(ids);
            (out.stacks.len() - 1) as u32
        };
        match source.timeline {
            Some(timeline) => {
                let stack_ids: Vec<u32> = timeline
                    .stacks
                    .iter()
                    .map(|s| intern(s, &mut out))
                    .collect();
                out.threads = timeline
                    .threads
                    .iter()
                    .map(|t| ThreadSamples {
                        name: t.comm.clone(),
                        tid: Some(t.tid),
                        pid: t.pid,
                        samples: Vec::new(),
                    })
                    .collect();
                let first = timeline.span_ns().map_or(0, |(first, _)| first);
                for s in &timeline.samples {
                    out.threads[s.thread as usize].samples.push((
                        Some(s.time_ns - first),
                        stack_ids[s.stack as usize],
                        s.weight,
                    ));
                }
                out.threads.retain(|t| !t.samples.is_empty());
            }
            None => {
                let mut by_root: HashMap<String, usize> = HashMap::new();
                for (stack, count) in &source.folded.stacks {
                    let root = stack.split(';').next().unwrap_or("").to_string();
                    let id = intern(stack, &mut out);
                    let at = *by_root.entry(root.clone()).or_insert_with(|| {
                        out.threads.push(ThreadSamples {
                            name: root,
                            ..Default::default()
                        });
                        out.threads.len() - 1
                    });
                    out.threads[at].samples.push((None, id, *count));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_stacks_become_one_thread_per_root() {
        let folded = Folded::from_pairs(
            [
                ("a;main;f".to_string(), 3),
                ("b;main;g".to_string(), 2),
                ("a".to_string(), 1),
            ]
            .into_iter(),
        );
        let source = Source {
            folded: &folded,
            timeline: None,
            unit: Unit::SAMPLES,
            name: "t".into(),
            start_unix_ns: 0,
            duration_ns: 0,
            period_ns: None,
            program: String::new(),
        };
        let sampled = Sampled::of(&source);
        assert_eq!(sampled.frames, vec!["main", "f", "g"]);
        let names: Vec<&str> = sampled.threads.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["a", "b"]);
        assert_eq!(sampled.threads[0].samples.len(), 2);
        assert_eq!(
            sampled.stacks[sampled.threads[1].samples[0].1 as usize],
            vec![0, 2]
        );
    }
}
