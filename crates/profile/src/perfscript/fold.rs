//! Folding `perf script` output on every core. The reading thread cuts the stream into
//! chunks that end on a blank line (a sample boundary) and hands them to a pool of folding
//! threads; each thread counts stacks in its own map; the maps are merged at the end. With a
//! `SampleSink`, each chunk's samples also go, in input order, to a collector thread.
//!
//! Only samples of the first event type in the stream are folded (mixing, say, cycles and
//! instructions would be misleading), as inferno and FlameGraph do.

use super::name::frame_names;
use super::parse::{event_line, stack_line, StackLine};
use super::{FrameResolver, SampleMeta, SampleSink, Weight};
use crate::folded::Folded;
use ahash::AHashMap as HashMap;
use std::collections::BTreeMap;
use std::io::{self, BufRead};
use std::rc::Rc;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Mutex, OnceLock};

/// Bytes per chunk handed to a folding thread (it then runs to the next sample boundary).
const CHUNK_BYTES: usize = 1 << 20;

/// Longest sample read (from its first line to the blank line after it): perf prints at
/// most 127 frames of a user stack, a few hundred bytes each; a stream with no sample
/// boundary for this long is not perf script output and is refused, not buffered whole.
pub const MAX_SAMPLE_BYTES: usize = 64 << 20;

/// How to fold.
#[derive(Default)]
pub struct FoldOptions<'a> {
    /// Folding threads; 0 means one per core.
    pub threads: usize,
    pub resolver: Option<&'a dyn FrameResolver>,
    pub sink: Option<&'a mut dyn SampleSink>,
    pub weight: Weight,
}

/// What folding produced.
#[derive(Debug, Default)]
pub struct FoldOutcome {
    pub folded: Folded,
    /// Samples folded (of the first event type, with a stack).
    pub samples: u64,
    /// The event type folded, when there was a sample.
    pub event: Option<String>,
    /// Samples of other event types, left out.
    pub other_events: u64,
    /// Of the samples folded, those with a period printed, and the sum of their periods
    /// (whichever weight was used: the summary offers the other).
    pub with_period: u64,
    pub period_total: u64,
}

/// One sample of a chunk, its thread name and stack as indexes into the chunk's tables.
#[derive(Debug, Clone, Copy)]
struct ChunkSample {
    time_ns: Option<u64>,
    pid: Option<u32>,
    tid: u32,
    comm: u32,
    weight: u64,
    stack: u32,
}

/// One chunk's samples for the sink: stacks and thread names interned per chunk.
#[derive(Default)]
struct ChunkSamples {
    stacks: Vec<String>,
    comms: Vec<String>,
    samples: Vec<ChunkSample>,
}

/// Folds `reader` (perf script text). Reading, folding and collecting run on separate
/// threads; memory holds the distinct stacks and a few chunks in flight.
pub fn fold<R: BufRead>(mut reader: R, options: FoldOptions<'_>) -> io::Result<FoldOutcome> {
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let event: OnceLock<String> = OnceLock::new();
    let resolver = options.resolver;
    let weight = options.weight;
    let want_samples = options.sink.is_some();
    let (chunk_tx, chunk_rx) = sync_channel::<(u64, Vec<u8>)>(threads * 2);
    let chunk_rx = Mutex::new(chunk_rx);
    let (samples_tx, samples_rx) = sync_channel::<(u64, ChunkSamples)>(threads * 2);

    std::thread::scope(|scope| -> io::Result<FoldOutcome> {
        let mut workers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let samples_tx = want_samples.then(|| samples_tx.clone());
            let (chunk_rx, event) = (&chunk_rx, &event);
            workers
                .push(scope.spawn(move || worker(chunk_rx, event, resolver, weight, samples_tx)));
        }
        drop(samples_tx);
        let collector = options
            .sink
            .map(|sink| scope.spawn(move || collect(samples_rx, sink)));

        let read = read_chunks(&mut reader, &chunk_tx, &event);
        drop(chunk_tx);

        let mut merged: HashMap<String, u64> = HashMap::new();
        let mut outcome = FoldOutcome::default();
        for handle in workers {
            let counts = handle
                .join()
                .map_err(|_| io::Error::other("a folding thread panicked"))?;
            outcome.samples += counts.samples;
            outcome.other_events += counts.other_events;
            outcome.with_period += counts.with_period;
            outcome.period_total = outcome.period_total.saturating_add(counts.period_total);
            if merged.is_empty() {
                merged = counts.stacks;
            } else {
                for (stack, n) in counts.stacks {
                    let total = merged.entry(stack).or_default();
                    // Periods are the stream's numbers: summed, they saturate.
                    *total = total.saturating_add(n);
                }
            }
        }
        if let Some(handle) = collector {
            handle
                .join()
                .map_err(|_| io::Error::other("the sample collector panicked"))?;
        }
        read?;
        outcome.folded = Folded::from_pairs(merged.into_iter());
        outcome.event = event.get().cloned();
        Ok(outcome)
    })
}

/// Reads `reader` in blocks and sends chunks that end on a sample boundary. Learns the
/// first event type from the first chunk before any thread folds it.
fn read_chunks<R: BufRead>(
    reader: &mut R,
    tx: &SyncSender<(u64, Vec<u8>)>,
    event: &OnceLock<String>,
) -> io::Result<()> {
    let mut seq = 0u64;
    let mut pending: Vec<u8> = Vec::with_capacity(CHUNK_BYTES * 2);
    // How far `pending` was searched for a boundary and had none: a long sample is
    // searched once, not again from its start with each block read.
    let mut searched = 0usize;
    loop {
        let available = reader.fill_buf()?;
        let eof = available.is_empty();
        if !eof {
            pending.extend_from_slice(available);
            let n = available.len();
            reader.consume(n);
        }
        if pending.len() < CHUNK_BYTES && !eof {
            continue;
        }
        let cut = if eof {
            pending.len()
        } else {
            // A boundary is two bytes (`\n` and what follows): start a byte or two back.
            let from = searched.saturating_sub(2);
            match find_boundary(&pending[from..]) {
                Some(at) => from + at,
                None if pending.len() > MAX_SAMPLE_BYTES => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "a perf script sample longer than {} MiB (no blank line ends it): not perf script output",
                            MAX_SAMPLE_BYTES >> 20
                        ),
                    ));
                }
                None => {
                    // One long sample: keep reading to its end.
                    searched = pending.len();
                    continue;
                }
            }
        };
        searched = 0;
        if cut > 0 {
            let rest = pending.split_off(cut);
            let chunk = std::mem::replace(&mut pending, rest);
            if event.get().is_none() {
                if let Some(name) = first_event(&chunk) {
                    let _ = event.set(name);
                }
            }
            if tx.send((seq, chunk)).is_err() {
                return Ok(()); // the folding threads are gone; they report why
            }
            seq += 1;
        }
        if eof {
            return Ok(());
        }
    }
}

/// The end of the last complete sample in `data`: just after its last blank line, or (for
/// output without blank lines, like single-frame samples) before the last line that starts
/// a sample (stack lines start with a blank, event lines do not).
fn find_boundary(data: &[u8]) -> Option<usize> {
    let mut at = data.len().checked_sub(1)?;
    let mut fallback = None;
    while at > 0 {
        at -= 1;
        if data[at] != b'\n' {
            continue;
        }
        match data.get(at + 1) {
            Some(b'\n') => return Some(at + 2),
            Some(c) if !c.is_ascii_whitespace() && fallback.is_none() => fallback = Some(at + 1),
            _ => {}
        }
        // A blank line is usually near the end; don't scan a whole chunk for one when a
        // sample start was found.
        if fallback.is_some_and(|f| f - at > 64 * 1024) {
            break;
        }
    }
    fallback
}

/// The event type of the first sample in `chunk`.
fn first_event(chunk: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(chunk);
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(char::is_whitespace))
        .find_map(|l| event_line(l).map(|e| e.event.to_string()))
}

/// What one folding thread counted.
#[derive(Default)]
struct Counts {
    stacks: HashMap<String, u64>,
    samples: u64,
    other_events: u64,
    with_period: u64,
    period_total: u64,
}

fn worker(
    chunks: &Mutex<Receiver<(u64, Vec<u8>)>>,
    event: &OnceLock<String>,
    resolver: Option<&dyn FrameResolver>,
    weight: Weight,
    samples_tx: Option<SyncSender<(u64, ChunkSamples)>>,
) -> Counts {
    let mut folder = ChunkFolder {
        resolver,
        weight,
        names: HashMap::new(),
        counts: Counts::default(),
        key: String::new(),
        stack: String::new(),
    };
    loop {
        let next = chunks.lock().map(|rx| rx.recv());
        let Ok(Ok((seq, chunk))) = next else {
            return folder.counts;
        };
        // Valid UTF-8 is the rule; a stray byte costs a lossy copy of its chunk only.
        let text = match std::str::from_utf8(&chunk) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(&chunk),
        };
        let wanted = event.get().map(String::as_str);
        let mut samples = samples_tx.as_ref().map(|_| ChunkSamples::default());
        folder.fold_chunk(&text, wanted, samples.as_mut());
        if let (Some(tx), Some(samples)) = (&samples_tx, samples) {
            if tx.send((seq, samples)).is_err() {
                return folder.counts;
            }
        }
    }
}

/// Folds chunks on one thread, with its own cache of frame names.
struct ChunkFolder<'r> {
    resolver: Option<&'r dyn FrameResolver>,
    weight: Weight,
    /// A stack line's names joined by `;`, by `java module \0 symbol` (or the address,
    /// for frames the resolver names).
    names: HashMap<String, Rc<str>>,
    counts: Counts,
    /// Reused buffers: a frame's cache key, a sample's folded stack.
    key: String,
    stack: String,
}

/// The sample being read.
#[derive(Default)]
struct Current {
    open: bool,
    skip: bool,
    root: String,
    java: bool,
    time_ns: Option<u64>,
    pid: Option<u32>,
    tid: u32,
    comm: String,
    period: Option<u64>,
    /// Each stack line's names (joined by `;`), leaf line first.
    lines: Vec<Rc<str>>,
}

impl ChunkFolder<'_> {
    fn fold_chunk(&mut self, text: &str, wanted: Option<&str>, mut out: Option<&mut ChunkSamples>) {
        let mut current = Current::default();
        let mut local: HashMap<String, u32> = HashMap::new();
        let mut comms: HashMap<String, u32> = HashMap::new();
        for line in text.split('\n') {
            if line.starts_with('#') {
                continue;
            }
            let line = line.trim_end();
            if line.is_empty() {
                self.end_sample(&mut current, out.as_deref_mut(), &mut local, &mut comms);
                continue;
            }
            if current.open {
                if !current.skip {
                    if let Some(frame) = stack_line(line) {
                        let names = self.names_of(&frame, current.java);
                        current.lines.push(names);
                    }
                }
                continue;
            }
            let Some(e) = event_line(line) else {
                continue;
            };
            current.open = true;
            current.skip = wanted.is_some_and(|w| w != e.event);
            if current.skip {
                self.counts.other_events += 1;
            }
            current.root = e.comm.replace(' ', "_");
            current.java = current.root.starts_with("java");
            current.time_ns = e.time_ns;
            current.pid = e.pid;
            current.tid = e.tid;
            current.period = e.period;
            if out.is_some() {
                current.comm.clear();
                current.comm.push_str(e.comm);
            }
            if let Some(frame) = e.inline_frame.and_then(stack_line) {
                if !current.skip {
                    let names = self.names_of(&frame, current.java);
                    current.lines.push(names);
                }
                self.end_sample(&mut current, out.as_deref_mut(), &mut local, &mut comms);
            }
        }
        self.end_sample(&mut current, out, &mut local, &mut comms);
    }

    /// Counts the sample being read, if it has a stack, and starts afresh.
    fn end_sample(
        &mut self,
        current: &mut Current,
        out: Option<&mut ChunkSamples>,
        local: &mut HashMap<String, u32>,
        comms: &mut HashMap<String, u32>,
    ) {
        let counted = current.open && !current.skip && current.lines.iter().any(|l| !l.is_empty());
        if counted {
            let stack = &mut self.stack;
            stack.clear();
            stack.push_str(&current.root);
            for names in current.lines.iter().rev().filter(|n| !n.is_empty()) {
                stack.push(';');
                stack.push_str(names);
            }
            self.counts.samples += 1;
            if let Some(period) = current.period {
                self.counts.with_period += 1;
                self.counts.period_total = self.counts.period_total.saturating_add(period);
            }
            let weight = match self.weight {
                Weight::Samples => 1,
                Weight::Period => current.period.unwrap_or(1),
            };
            if let Some(out) = out {
                let stack_index = match local.get(stack.as_str()) {
                    Some(i) => *i,
                    None => {
                        out.stacks.push(stack.clone());
                        let i = (out.stacks.len() - 1) as u32;
                        local.insert(stack.clone(), i);
                        i
                    }
                };
                let comm_index = match comms.get(&current.comm) {
                    Some(i) => *i,
                    None => {
                        out.comms.push(current.comm.clone());
                        let i = (out.comms.len() - 1) as u32;
                        comms.insert(current.comm.clone(), i);
                        i
                    }
                };
                out.samples.push(ChunkSample {
                    time_ns: current.time_ns,
                    pid: current.pid,
                    tid: current.tid,
                    comm: comm_index,
                    weight,
                    stack: stack_index,
                });
            }
            match self.counts.stacks.get_mut(stack.as_str()) {
                Some(n) => *n = n.saturating_add(weight),
                None => {
                    self.counts.stacks.insert(stack.clone(), weight);
                }
            }
        }
        current.open = false;
        current.skip = false;
        current.lines.clear();
    }

    /// The names of one stack line, joined by `;` (cached).
    fn names_of(&mut self, frame: &StackLine<'_>, java: bool) -> Rc<str> {
        let unnamed = frame.symbol == "[unknown]" && frame.module != "[unknown]";
        let key = &mut self.key;
        key.clear();
        key.push(if java { 'j' } else { '-' });
        key.push_str(frame.module);
        key.push('\0');
        match (unnamed, self.resolver) {
            (true, Some(_)) => key.push_str(frame.pc),
            _ => key.push_str(frame.symbol),
        }
        if let Some(names) = self.names.get(key.as_str()) {
            return Rc::clone(names);
        }
        let key = key.clone();
        let resolved = match (unnamed, self.resolver, frame.address()) {
            (true, Some(resolver), Some(address)) => resolver.resolve(frame.module, address),
            _ => None,
        };
        let names = match resolved {
            Some(names) if !names.is_empty() => names,
            _ => {
                let mut names = Vec::with_capacity(1);
                frame_names(frame, java, &mut names);
                names
            }
        };
        let joined: Rc<str> = names.join(";").into();
        self.names.insert(key, Rc::clone(&joined));
        joined
    }
}

/// Hands each chunk's samples to the sink in input order, with stack ids unique over the
/// whole stream.
fn collect(rx: Receiver<(u64, ChunkSamples)>, sink: &mut dyn SampleSink) {
    let mut next = 0u64;
    let mut waiting: BTreeMap<u64, ChunkSamples> = BTreeMap::new();
    let mut ids: HashMap<String, u32> = HashMap::new();
    for (seq, chunk) in rx {
        waiting.insert(seq, chunk);
        while let Some(chunk) = waiting.remove(&next) {
            let global: Vec<u32> = chunk
                .stacks
                .iter()
                .map(|stack| match ids.get(stack) {
                    Some(id) => *id,
                    None => {
                        let id = ids.len() as u32;
                        ids.insert(stack.clone(), id);
                        sink.new_stack(id, stack);
                        id
                    }
                })
                .collect();
            for s in &chunk.samples {
                let meta = SampleMeta {
                    time_ns: s.time_ns,
                    pid: s.pid,
                    tid: s.tid,
                    comm: &chunk.comms[s.comm as usize],
                    weight: s.weight,
                };
                sink.sample(&meta, global[s.stack as usize]);
            }
            next += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    const SCRIPT: &str = "app 1/1 1.000000: cpu-clock: \n\
        \t  10 leaf (/bin/app)\n\t  20 main (/bin/app)\n\n\
        app 1/2 1.100000: cpu-clock: \n\
        \t  30 [unknown] (/bin/stripped)\n\t  20 main (/bin/app)\n\n\
        app 1/1 1.200000: page-faults: \n\
        \t  10 leaf (/bin/app)\n\n\
        app 1/1 1.300000: cpu-clock: \n\
        \t  10 leaf (/bin/app)\n\t  20 main (/bin/app)\n";

    struct Recorder(Vec<(Option<u64>, u32, String)>, Vec<String>);

    impl SampleSink for Recorder {
        fn new_stack(&mut self, id: u32, stack: &str) {
            assert_eq!(id as usize, self.1.len());
            self.1.push(stack.to_string());
        }
        fn sample(&mut self, s: &SampleMeta<'_>, stack: u32) {
            self.0
                .push((s.time_ns, s.tid, self.1[stack as usize].clone()));
        }
    }

    struct StrippedResolver;

    impl FrameResolver for StrippedResolver {
        fn resolve(&self, module: &str, address: u64) -> Option<Vec<String>> {
            (module == "/bin/stripped" && address == 0x30).then(|| vec!["recovered".into()])
        }
    }

    #[test]
    fn folds_the_first_event_only_with_times_threads_and_resolved_frames() {
        for threads in [1, 3] {
            let mut sink = Recorder(Vec::new(), Vec::new());
            let outcome = fold(
                BufReader::new(SCRIPT.as_bytes()),
                FoldOptions {
                    threads,
                    resolver: Some(&StrippedResolver),
                    sink: Some(&mut sink),
                    weight: Weight::Samples,
                },
            )
            .unwrap();
            assert_eq!(outcome.event.as_deref(), Some("cpu-clock"));
            assert_eq!((outcome.samples, outcome.other_events), (3, 1));
            assert_eq!(
                outcome.folded.stacks,
                vec![
                    ("app;main;leaf".to_string(), 2),
                    ("app;main;recovered".to_string(), 1)
                ]
            );
            let times: Vec<_> = sink.0.iter().map(|s| (s.0, s.1)).collect();
            assert_eq!(
                times,
                vec![
                    (Some(1_000_000_000), 1),
                    (Some(1_100_000_000), 2),
                    (Some(1_300_000_000), 1)
                ]
            );
        }
    }

    #[test]
    fn chunks_end_on_sample_boundaries() {
        assert_eq!(find_boundary(b"a\n\tf\n\nb\n\tg\n\nc"), Some(12));
        assert_eq!(
            find_boundary(b"a 1 1.0: e: 1 f (m)\nb 1 1.1: e: 2 g (m)\n"),
            Some(20)
        );
        assert_eq!(find_boundary(b"a\n\tf\n\tg"), None);
        assert_eq!(find_boundary(b""), None);
    }

    #[test]
    fn a_stream_is_folded_alike_in_any_number_of_threads_and_chunks() {
        // Large enough for several chunks, with one sample far longer than a chunk.
        let sample =
            "t 1/1 1.000000: cpu-clock: \n\t  10 leaf (/bin/app)\n\t  20 main (/bin/app)\n\n";
        let mut text = sample.repeat(40_000);
        text.push_str("t 1/1 2.000000: cpu-clock: \n");
        text.push_str(&"\t  30 deep (/bin/app)\n".repeat(60_000));
        text.push('\n');
        text.push_str(&sample.repeat(10));
        let one = fold(
            BufReader::new(text.as_bytes()),
            FoldOptions {
                threads: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let four = fold(
            BufReader::new(text.as_bytes()),
            FoldOptions {
                threads: 4,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(one.samples, 40_011);
        assert!(one.folded == four.folded, "one thread and four differ");
        let count_of = |stack: &str| {
            one.folded
                .stacks
                .iter()
                .find(|(s, _)| s == stack)
                .map(|s| s.1)
        };
        assert_eq!(count_of("t;main;leaf"), Some(40_010));
        let deep = one
            .folded
            .stacks
            .iter()
            .find(|(s, _)| s.starts_with("t;deep"))
            .unwrap();
        assert_eq!((deep.0.matches(";deep").count(), deep.1), (60_000, 1));
    }

    /// A reader of `total` bytes of one sample's stack lines, with no blank line and no
    /// line that starts a sample; counts what was read of it.
    struct EndlessSample {
        line: &'static [u8],
        at: usize,
        total: usize,
        read: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl io::Read for EndlessSample {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(self.total - self.read.get());
            for (i, b) in out[..n].iter_mut().enumerate() {
                *b = self.line[(self.at + i) % self.line.len()];
            }
            self.at += n;
            self.read.set(self.read.get() + n);
            Ok(n)
        }
    }

    #[test]
    fn a_script_sample_of_256_mib_without_a_blank_line_stops_at_the_budget() {
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        let reader = EndlessSample {
            line: b"\t  7f00 deep_frame (/bin/app)\n",
            at: 0,
            total: 256 << 20,
            read: read.clone(),
        };
        let err = fold(
            BufReader::with_capacity(1 << 20, reader),
            FoldOptions::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("longer than 64 MiB"), "{err}");
        // Stopped at the budget: not read (and held) to the stream's end.
        assert!(
            read.get() <= MAX_SAMPLE_BYTES + (2 << 20),
            "{} read",
            read.get()
        );
    }

    #[test]
    fn a_long_sample_searched_a_block_at_a_time_ends_where_its_blank_line_is() {
        // A sample of 3 MiB read 4 KiB at a time: its end is found in the block that holds
        // it (and across a block's edge), the samples after it are whole.
        let sample = "t 1/1 1.000000: cpu-clock: \n\t  10 leaf (/bin/app)\n\n";
        for split in [0, 1, 2] {
            let mut text = String::from("t 1/1 0.500000: cpu-clock: \n");
            text.push_str(&"\t  30 deep (/bin/app)\n".repeat(3 << 20 >> 5));
            // The blank line at a block's edge, a byte after it and two.
            let last = "\t  30 deep (/bin/app)\n".len();
            let pad = (4096 - (text.len() + last + split) % 4096) % 4096;
            text.push_str(&format!("\t  30 deep{} (/bin/app)\n", "p".repeat(pad)));
            assert_eq!((text.len() + split) % 4096, 0);
            text.push('\n');
            text.push_str(&sample.repeat(3));
            let outcome = fold(
                BufReader::with_capacity(4096, text.as_bytes()),
                FoldOptions {
                    threads: 2,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(outcome.samples, 4, "split {split}");
            assert!(outcome
                .folded
                .stacks
                .iter()
                .any(|(s, n)| s == "t;leaf" && *n == 3));
        }
    }

    /// perf script's default fields print each sample's period: 1,001,001 ns per cpu-clock
    /// sample at 999 Hz. Summed, they read as "10693693683 samples".
    #[test]
    fn fold_of_perf_script_with_periods_counts_samples_unless_asked_for_periods() {
        let text = "app 1/1 [000] 1.000000: 1001001 cpu-clock:pppH: \n\t  10 leaf (/bin/app)\n\n\
                    app 1/1 [000] 1.001000: 1001001 cpu-clock:pppH: \n\t  10 leaf (/bin/app)\n\n\
                    app 1/1 [000] 1.002000: 999000 cpu-clock:pppH: \n\t  20 main (/bin/app)\n\n";
        let by = |weight| {
            fold(
                BufReader::new(text.as_bytes()),
                FoldOptions {
                    weight,
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let samples = by(Weight::Samples);
        assert_eq!(samples.folded.total(), 3);
        assert_eq!((samples.with_period, samples.period_total), (3, 3_001_002));
        let periods = by(Weight::Period);
        assert_eq!(periods.folded.total(), 3_001_002);
        assert_eq!(periods.samples, 3);
        assert_eq!(
            periods.folded.stacks[0],
            ("app;leaf".to_string(), 2_002_002)
        );
    }
}
