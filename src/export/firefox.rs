//! The Firefox Profiler's processed format, written by hand (documented in the profiler's
//! docs-developer/processed-profiling-format; this writer follows preprocessed version 47,
//! which the profiler upgrades on load): one thread per recorded thread, with its own
//! string, function, frame and stack tables, and every sample with its time (ms after the
//! capture's first sample) and weight.

use super::{Sampled, Source};
use serde_json::{json, Value};
use std::collections::HashMap;

const PREPROCESSED_VERSION: u32 = 47;
/// The gecko profile version of the processed format of that era.
const GECKO_VERSION: u32 = 24;

pub fn firefox_json(source: &Source<'_>) -> Value {
    let sampled = Sampled::of(source);
    let (weight_type, scale) = match source.unit.unit {
        "bytes" => ("bytes", 1.0),
        "microseconds" => ("tracing-ms", 1e-3),
        _ => ("samples", 1.0),
    };
    let threads: Vec<Value> = sampled
        .threads
        .iter()
        .enumerate()
        .map(|(i, thread)| {
            let mut tables = ThreadTables::default();
            let mut stack_of: HashMap<u32, usize> = HashMap::new();
            let mut stacks = Vec::with_capacity(thread.samples.len());
            for (_, stack, _) in &thread.samples {
                let id = *stack_of
                    .entry(*stack)
                    .or_insert_with(|| tables.stack(&sampled, *stack));
                stacks.push(id);
            }
            let times: Vec<f64> = thread
                .samples
                .iter()
                .map(|s| s.0.map_or(0.0, |ns| ns as f64 / 1e6))
                .collect();
            let weights: Vec<f64> = thread.samples.iter().map(|s| s.2 as f64 * scale).collect();
            tables.into_json(json!({
                "name": thread.name,
                "tid": thread.tid.map_or(i as u64, u64::from),
                "pid": thread.pid.map(|p| p.to_string()).unwrap_or_else(|| "0".into()),
                "processName": source.program,
                "isMainThread": thread.pid.is_some() && thread.pid == thread.tid,
                "samples": {
                    "length": stacks.len(),
                    "stack": stacks,
                    "time": times,
                    "weight": weights,
                    "weightType": weight_type,
                },
            }))
        })
        .collect();
    json!({
        "meta": {
            "version": GECKO_VERSION,
            "preprocessedProfileVersion": PREPROCESSED_VERSION,
            "interval": source.period_ns.map_or(1.0, |ns| ns as f64 / 1e6),
            "startTime": source.start_unix_ns as f64 / 1e6,
            "processType": 0,
            "product": source.name,
            "importedFrom": format!("devprof {}", env!("CARGO_PKG_VERSION")),
            "stackwalk": 1,
            "debug": false,
            "symbolicated": true,
            "abi": "", "misc": "", "oscpu": "", "platform": "", "toolkit": "",
            "categories": [{"name": "Other", "color": "grey", "subcategories": ["Other"]}],
            "markerSchema": [],
        },
        "libs": [],
        "pages": [],
        "counters": [],
        "threads": threads,
    })
}

/// One thread's tables: every frame is one function and one frame entry; stacks are a
/// prefix tree.
#[derive(Default)]
struct ThreadTables {
    strings: Vec<String>,
    /// Function (= frame) index by shared frame id.
    funcs: HashMap<u32, usize>,
    func_names: Vec<usize>,
    /// Stack index by (prefix, frame).
    stacks: HashMap<(Option<usize>, usize), usize>,
    stack_prefix: Vec<Option<usize>>,
    stack_frame: Vec<usize>,
}

impl ThreadTables {
    fn func(&mut self, sampled: &Sampled, frame: u32) -> usize {
        if let Some(f) = self.funcs.get(&frame) {
            return *f;
        }
        self.strings.push(sampled.frames[frame as usize].clone());
        self.func_names.push(self.strings.len() - 1);
        let f = self.func_names.len() - 1;
        self.funcs.insert(frame, f);
        f
    }

    /// The stack index of shared stack `stack` (root first); None for an empty stack is
    /// the thread's root-only samples, given a stack of its own name.
    fn stack(&mut self, sampled: &Sampled, stack: u32) -> usize {
        let mut prefix = None;
        for frame in &sampled.stacks[stack as usize] {
            let f = self.func(sampled, *frame);
            let next = self.stack_prefix.len();
            let id = *self.stacks.entry((prefix, f)).or_insert(next);
            if id == next {
                self.stack_prefix.push(prefix);
                self.stack_frame.push(f);
            }
            prefix = Some(id);
        }
        match prefix {
            Some(id) => id,
            None => {
                // A sample with no function frames: one `[thread]` frame stands for it.
                let frame = u32::MAX;
                let f = match self.funcs.get(&frame) {
                    Some(f) => *f,
                    None => {
                        self.strings.push("[thread]".into());
                        self.func_names.push(self.strings.len() - 1);
                        self.funcs.insert(frame, self.func_names.len() - 1);
                        self.func_names.len() - 1
                    }
                };
                let next = self.stack_prefix.len();
                let id = *self.stacks.entry((None, f)).or_insert(next);
                if id == next {
                    self.stack_prefix.push(None);
                    self.stack_frame.push(f);
                }
                id
            }
        }
    }

    fn into_json(self, mut thread: Value) -> Value {
        let funcs = self.func_names.len();
        let stacks = self.stack_prefix.len();
        let zeros = |n: usize| vec![0u32; n];
        let nulls = |n: usize| vec![Value::Null; n];
        let fields = json!({
            "processType": "default",
            "processStartupTime": 0,
            "processShutdownTime": null,
            "registerTime": 0,
            "unregisterTime": null,
            "pausedRanges": [],
            "markers": {"length": 0, "category": [], "data": [], "endTime": [], "name": [], "phase": [], "startTime": []},
            "stackTable": {
                "length": stacks,
                "prefix": self.stack_prefix,
                "frame": self.stack_frame,
                "category": zeros(stacks),
                "subcategory": zeros(stacks),
            },
            "frameTable": {
                "length": funcs,
                "address": vec![-1i64; funcs],
                "inlineDepth": zeros(funcs),
                "category": zeros(funcs),
                "subcategory": zeros(funcs),
                "func": (0..funcs).collect::<Vec<_>>(),
                "nativeSymbol": nulls(funcs),
                "innerWindowID": nulls(funcs),
                "implementation": nulls(funcs),
                "line": nulls(funcs),
                "column": nulls(funcs),
            },
            "funcTable": {
                "length": funcs,
                "name": self.func_names,
                "isJS": vec![false; funcs],
                "relevantForJS": vec![false; funcs],
                "resource": vec![-1i64; funcs],
                "fileName": nulls(funcs),
                "lineNumber": nulls(funcs),
                "columnNumber": nulls(funcs),
            },
            "resourceTable": {"length": 0, "lib": [], "name": [], "host": [], "type": []},
            "nativeSymbols": {"length": 0, "libIndex": [], "address": [], "name": [], "functionSize": []},
            "stringArray": self.strings,
        });
        if let (Some(obj), Some(extra)) = (thread.as_object_mut(), fields.as_object()) {
            for (k, v) in extra {
                obj.insert(k.clone(), v.clone());
            }
        }
        thread
    }
}
