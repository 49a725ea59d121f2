//! The timeline of a capture: every sample with its time, thread and stack, kept beside the
//! folded file (`<stem>.timeline`) so that a stretch of the capture can be looked at on its
//! own (the heatmap, exports with timestamps). Written while the stream is folded, one
//! sample at a time; memory holds the distinct stacks and threads only.
//!
//! ## Format (version 2; version 1 is version 2 without clock records)
//!
//! The file is one zstd frame. Its content starts with the line `devprof-timeline 2\n`, then
//! records, each a tag byte and unsigned LEB128 varints (`v`) and UTF-8 strings (`s` = a
//! varint length, then the bytes):
//!
//! | tag | record | fields |
//! |---|---|---|
//! | `S` | stack: the next stack id (0, 1, ...) | `s` folded stack, `;`-separated, root (thread name) first |
//! | `T` | thread: the next thread id (0, 1, ...) | `v` tid, `v` pid + 1 (0: unknown), `s` thread name as perf printed it |
//! | `P` | sample | `v` zigzag time delta in ns from the previous sample (the first: from 0), `v` thread id, `v` stack id, `v` weight |
//! | `C` | clock (at most one, anywhere) | `s` the recorder's clock (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`), `v` zigzag ns to add to a sample time to get ns since the Unix epoch, `v` how far off that may be, in ns |
//!
//! A stack or thread record comes before the first sample that uses it. A thread that
//! changes its name gets a new thread id. Samples come in the order perf printed them
//! (time order); a sample without a time keeps the previous sample's time.

use super::perfscript::{SampleMeta, SampleSink};
use ahash::AHashMap as HashMap;
use std::io::{self, BufRead, Read, Write};

/// The first line of a timeline's content.
pub const MAGIC: &[u8] = b"devprof-timeline 2\n";
/// The first line of a timeline written before clock records existed.
const MAGIC_V1: &[u8] = b"devprof-timeline 1\n";
const TAG_STACK: u8 = b'S';
const TAG_THREAD: u8 = b'T';
const TAG_SAMPLE: u8 = b'P';
const TAG_CLOCK: u8 = b'C';
/// No string in a timeline is longer (a folded stack of a deep recursion stays far below).
const MAX_STRING: u64 = 64 << 20;

/// One thread as the timeline knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub tid: u32,
    pub pid: Option<u32>,
    pub comm: String,
}

/// One sample: time in ns of the recorder's clock, and ids into the stacks and threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub time_ns: u64,
    pub thread: u32,
    pub stack: u32,
    pub weight: u64,
}

/// The clock a timeline's sample times are on, and how it maps to the Unix epoch (the clock
/// of the Docker engine's log timestamps, and so of markers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clock {
    /// `CLOCK_REALTIME` (sample times are Unix ns already) or `CLOCK_MONOTONIC`.
    pub name: String,
    /// Added to a sample time, gives ns since the Unix epoch.
    pub to_unix_ns: i64,
    /// How far off the mapping may be, in ns (0 when the samples are on the Unix clock).
    pub error_ns: u64,
}

impl Clock {
    /// Samples recorded on CLOCK_REALTIME: their times are Unix times.
    pub fn realtime() -> Clock {
        Clock {
            name: "CLOCK_REALTIME".into(),
            to_unix_ns: 0,
            error_ns: 0,
        }
    }
}

/// A timeline read whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub stacks: Vec<String>,
    pub threads: Vec<Thread>,
    pub samples: Vec<Sample>,
    /// The recorder's clock, when the timeline says (captures before clocks were recorded
    /// do not).
    pub clock: Option<Clock>,
}

impl Timeline {
    /// Reads a whole timeline file's bytes (zstd-compressed).
    pub fn read<R: Read>(reader: R) -> io::Result<Timeline> {
        let mut timeline = Timeline::default();
        let mut stacks = Vec::new();
        let mut threads = Vec::new();
        read_records(reader, |record| match record {
            Record::Stack(s) => stacks.push(s),
            Record::Thread(t) => threads.push(t),
            Record::Sample(s) => timeline.samples.push(s),
            Record::Clock(c) => timeline.clock = Some(c),
        })?;
        timeline.stacks = stacks;
        timeline.threads = threads;
        Ok(timeline)
    }

    /// ns to add to a sample time to get a Unix time, when the timeline knows its clock.
    pub fn to_unix_ns(&self) -> Option<i64> {
        self.clock.as_ref().map(|c| c.to_unix_ns)
    }

    /// The first and last sample times, in ns.
    pub fn span_ns(&self) -> Option<(u64, u64)> {
        let first = self.samples.iter().map(|s| s.time_ns).min()?;
        let last = self.samples.iter().map(|s| s.time_ns).max()?;
        Some((first, last))
    }

    /// Total weight per folded stack text, as the folded file counts it.
    pub fn stack_totals(&self) -> Vec<(String, u64)> {
        let mut totals = vec![0u64; self.stacks.len()];
        for s in &self.samples {
            // Weights are the file's numbers: summed, they saturate.
            totals[s.stack as usize] = totals[s.stack as usize].saturating_add(s.weight);
        }
        let mut pairs: Vec<(String, u64)> = self
            .stacks
            .iter()
            .cloned()
            .zip(totals)
            .filter(|(_, n)| *n > 0)
            .collect();
        pairs.sort();
        pairs
    }

    /// The samples cut into `k` back-to-back windows of equal length over the span from the
    /// first sample to the last (the last window keeps the last sample). Each window keeps
    /// its bounds, so a rate divides by the window's length, not by its samples' spread.
    pub fn split_even(&self, k: usize) -> Vec<TimelineWindow> {
        let k = k.max(1);
        let Some((first, last)) = self.span_ns() else {
            return Vec::new();
        };
        let span = (last - first).max(1);
        let bound = |i: usize| first + (u128::from(span) * i as u128 / k as u128) as u64;
        let mut windows: Vec<TimelineWindow> = (0..k)
            .map(|i| TimelineWindow {
                start_ns: bound(i),
                end_ns: bound(i + 1),
                samples: Vec::new(),
            })
            .collect();
        for s in &self.samples {
            let at = (u128::from(s.time_ns - first) * k as u128 / u128::from(span)) as usize;
            windows[at.min(k - 1)].samples.push(*s);
        }
        windows
    }

    /// Total weight per folded stack text of some of the samples.
    pub fn totals_of(&self, samples: &[Sample]) -> Vec<(String, u64)> {
        let mut totals = vec![0u64; self.stacks.len()];
        for s in samples {
            // Weights are the file's numbers: summed, they saturate.
            totals[s.stack as usize] = totals[s.stack as usize].saturating_add(s.weight);
        }
        self.stacks
            .iter()
            .cloned()
            .zip(totals)
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Writes some of the samples as a timeline of their own (same clock, threads and
    /// stacks as far as they use them).
    pub fn write_part<W: Write>(&self, samples: &[Sample], out: W) -> io::Result<W> {
        let mut writer = TimelineWriter::new(out)?;
        if let Some(clock) = &self.clock {
            writer.set_clock(clock);
        }
        for s in samples {
            let (Some(thread), Some(stack)) = (
                self.threads.get(s.thread as usize),
                self.stacks.get(s.stack as usize),
            ) else {
                continue;
            };
            let stack = writer.stack_id(stack);
            let meta = SampleMeta {
                time_ns: Some(s.time_ns),
                pid: thread.pid,
                tid: thread.tid,
                comm: &thread.comm,
                weight: s.weight,
            };
            writer.add(&meta, stack);
        }
        writer.finish()
    }
}

/// One of the back-to-back windows a timeline is cut into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineWindow {
    pub start_ns: u64,
    pub end_ns: u64,
    pub samples: Vec<Sample>,
}

/// One record of a timeline, as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Stack(String),
    Thread(Thread),
    Sample(Sample),
    Clock(Clock),
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// Streams a timeline's records to `visit`, checking every id against what came before.
pub fn read_records<R: Read>(reader: R, mut visit: impl FnMut(Record)) -> io::Result<()> {
    let decoder = zstd::stream::read::Decoder::new(reader)?;
    let mut input = io::BufReader::with_capacity(1 << 16, decoder);
    let mut magic = vec![0u8; MAGIC.len()];
    input
        .read_exact(&mut magic)
        .map_err(|_| bad("not a devprof timeline (too short)"))?;
    if magic != MAGIC && magic != MAGIC_V1 {
        return Err(bad("not a devprof timeline (wrong header)"));
    }
    let (mut stacks, mut threads, mut time) = (0u64, 0u64, 0i128);
    loop {
        let tag = match input.fill_buf()?.first() {
            None => return Ok(()),
            Some(t) => *t,
        };
        input.consume(1);
        match tag {
            TAG_STACK => {
                visit(Record::Stack(read_string(&mut input)?));
                stacks += 1;
            }
            TAG_THREAD => {
                let tid = u32::try_from(read_varint(&mut input)?).map_err(|_| bad("tid"))?;
                let pid = match read_varint(&mut input)? {
                    0 => None,
                    p => Some(u32::try_from(p - 1).map_err(|_| bad("pid"))?),
                };
                let comm = read_string(&mut input)?;
                visit(Record::Thread(Thread { tid, pid, comm }));
                threads += 1;
            }
            TAG_SAMPLE => {
                time += unzigzag(read_varint(&mut input)?) as i128;
                let time_ns = u64::try_from(time).map_err(|_| bad("sample time out of range"))?;
                let thread = read_varint(&mut input)?;
                let stack = read_varint(&mut input)?;
                let weight = read_varint(&mut input)?;
                if thread >= threads || stack >= stacks {
                    return Err(bad("a sample refers to a thread or stack not yet defined"));
                }
                visit(Record::Sample(Sample {
                    time_ns,
                    thread: thread as u32,
                    stack: stack as u32,
                    weight,
                }));
            }
            TAG_CLOCK => {
                let name = read_string(&mut input)?;
                let to_unix_ns = unzigzag(read_varint(&mut input)?);
                let error_ns = read_varint(&mut input)?;
                visit(Record::Clock(Clock {
                    name,
                    to_unix_ns,
                    error_ns,
                }));
            }
            other => return Err(bad(format!("unknown record tag {other:#x}"))),
        }
    }
}

fn read_varint<R: BufRead>(input: &mut R) -> io::Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let mut byte = [0u8];
        input
            .read_exact(&mut byte)
            .map_err(|_| bad("timeline ends inside a record"))?;
        value |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(bad("varint longer than 64 bits"))
}

fn read_string<R: BufRead>(input: &mut R) -> io::Result<String> {
    let len = read_varint(input)?;
    if len > MAX_STRING {
        return Err(bad("string longer than any timeline holds"));
    }
    let mut bytes = vec![0u8; len as usize];
    input
        .read_exact(&mut bytes)
        .map_err(|_| bad("timeline ends inside a string"))?;
    String::from_utf8(bytes).map_err(|_| bad("string is not UTF-8"))
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends `value` as LEB128.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A thread's names so far, each with its thread id.
type ThreadNames = Vec<(String, u32)>;

/// Writes a timeline as samples arrive; a `SampleSink` for the `perf script` folder, and
/// usable directly by readers that build their own stacks (`stack_id`). The first write
/// error is kept and returned by `finish`; later samples are dropped.
pub struct TimelineWriter<W: Write> {
    out: Option<zstd::stream::write::Encoder<'static, W>>,
    buffer: Vec<u8>,
    error: Option<io::Error>,
    /// Thread ids by (tid, pid), then by name (a thread may rename itself).
    threads: HashMap<(u32, Option<u32>), ThreadNames>,
    thread_count: u32,
    stacks: HashMap<String, u32>,
    /// Stack ids announced by a `SampleSink` caller, to this file's ids.
    announced: Vec<u32>,
    last_time: u64,
    samples: u64,
}

impl<W: Write> TimelineWriter<W> {
    pub fn new(out: W) -> io::Result<Self> {
        let encoder = zstd::stream::write::Encoder::new(out, 3)?;
        let mut buffer = Vec::with_capacity(1 << 16);
        buffer.extend_from_slice(MAGIC);
        Ok(TimelineWriter {
            out: Some(encoder),
            buffer,
            error: None,
            threads: HashMap::new(),
            thread_count: 0,
            stacks: HashMap::new(),
            announced: Vec::new(),
            last_time: 0,
            samples: 0,
        })
    }

    /// Says which clock the sample times are on (written once, before `finish`).
    pub fn set_clock(&mut self, clock: &Clock) {
        self.buffer.push(TAG_CLOCK);
        put_string(&mut self.buffer, &clock.name);
        put_varint(&mut self.buffer, zigzag(clock.to_unix_ns));
        put_varint(&mut self.buffer, clock.error_ns);
    }

    /// This file's id of `stack`, announcing it on first use.
    pub fn stack_id(&mut self, stack: &str) -> u32 {
        if let Some(id) = self.stacks.get(stack) {
            return *id;
        }
        let id = self.stacks.len() as u32;
        self.stacks.insert(stack.to_string(), id);
        self.buffer.push(TAG_STACK);
        put_string(&mut self.buffer, stack);
        id
    }

    fn thread_id(&mut self, tid: u32, pid: Option<u32>, comm: &str) -> u32 {
        let names = self.threads.entry((tid, pid)).or_default();
        if let Some((_, id)) = names.iter().find(|(name, _)| name == comm) {
            return *id;
        }
        let id = self.thread_count;
        self.thread_count += 1;
        names.push((comm.to_string(), id));
        self.buffer.push(TAG_THREAD);
        put_varint(&mut self.buffer, u64::from(tid));
        put_varint(&mut self.buffer, pid.map_or(0, |p| u64::from(p) + 1));
        put_string(&mut self.buffer, comm);
        id
    }

    /// Records one sample of this file's `stack` id.
    pub fn add(&mut self, meta: &SampleMeta<'_>, stack: u32) {
        let thread = self.thread_id(meta.tid, meta.pid, meta.comm);
        let time = meta.time_ns.unwrap_or(self.last_time);
        let delta = (time as i64).wrapping_sub(self.last_time as i64);
        self.last_time = time;
        self.buffer.push(TAG_SAMPLE);
        put_varint(&mut self.buffer, zigzag(delta));
        put_varint(&mut self.buffer, u64::from(thread));
        put_varint(&mut self.buffer, u64::from(stack));
        put_varint(&mut self.buffer, meta.weight);
        self.samples += 1;
        if self.buffer.len() >= 1 << 16 {
            self.flush_buffer();
        }
    }

    fn flush_buffer(&mut self) {
        if self.error.is_none() {
            if let Some(out) = self.out.as_mut() {
                if let Err(e) = out.write_all(&self.buffer) {
                    self.error = Some(e);
                }
            }
        }
        self.buffer.clear();
    }

    /// Samples written so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Writes what is buffered and closes the zstd frame.
    pub fn finish(mut self) -> io::Result<W> {
        self.flush_buffer();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let encoder = self.out.take().expect("finish runs once");
        let mut out = encoder.finish()?;
        out.flush()?;
        Ok(out)
    }
}

impl<W: Write + Send> SampleSink for TimelineWriter<W> {
    fn new_stack(&mut self, id: u32, stack: &str) {
        let mine = self.stack_id(stack);
        let at = id as usize;
        if self.announced.len() <= at {
            self.announced.resize(at + 1, u32::MAX);
        }
        self.announced[at] = mine;
    }

    fn sample(&mut self, sample: &SampleMeta<'_>, stack: u32) {
        let Some(&mine) = self.announced.get(stack as usize) else {
            return;
        };
        self.add(sample, mine);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(time_ns: Option<u64>, tid: u32, comm: &str) -> SampleMeta<'_> {
        SampleMeta {
            time_ns,
            pid: Some(7),
            tid,
            comm,
            weight: 1,
        }
    }

    #[test]
    fn writes_and_reads_back_stacks_threads_and_times() {
        let mut writer = TimelineWriter::new(Vec::new()).unwrap();
        writer.new_stack(0, "a;main;f");
        writer.sample(&meta(Some(5_000), 10, "a"), 0);
        writer.new_stack(1, "b;main;g");
        writer.sample(&meta(Some(4_000), 11, "b"), 1);
        writer.sample(&meta(None, 10, "a"), 0);
        writer.sample(&meta(Some(9_000), 10, "a2"), 1);
        assert_eq!(writer.samples(), 4);
        let bytes = writer.finish().unwrap();
        let timeline = Timeline::read(&bytes[..]).unwrap();
        assert_eq!(timeline.stacks, vec!["a;main;f", "b;main;g"]);
        assert_eq!(timeline.threads.len(), 3);
        assert_eq!(timeline.threads[2].comm, "a2");
        let times: Vec<u64> = timeline.samples.iter().map(|s| s.time_ns).collect();
        assert_eq!(times, vec![5_000, 4_000, 4_000, 9_000]);
        assert_eq!(timeline.span_ns(), Some((4_000, 9_000)));
        assert_eq!(timeline.clock, None);
        assert_eq!(
            timeline.stack_totals(),
            vec![("a;main;f".to_string(), 2), ("b;main;g".to_string(), 2)]
        );
    }

    #[test]
    fn a_clock_record_says_how_sample_times_map_to_unix_time() {
        let mut writer = TimelineWriter::new(Vec::new()).unwrap();
        writer.new_stack(0, "a;main");
        writer.sample(&meta(Some(5_000), 10, "a"), 0);
        let clock = Clock {
            name: "CLOCK_MONOTONIC".into(),
            to_unix_ns: 1_700_000_000_000_000_000,
            error_ns: 1_500,
        };
        writer.set_clock(&clock);
        let timeline = Timeline::read(&writer.finish().unwrap()[..]).unwrap();
        assert_eq!(timeline.clock, Some(clock));
        assert_eq!(timeline.to_unix_ns(), Some(1_700_000_000_000_000_000));
        assert_eq!(timeline.samples.len(), 1);
        // A version 1 file (no clock) still reads.
        let mut content = MAGIC_V1.to_vec();
        content.extend([
            TAG_STACK, 1, b'a', TAG_THREAD, 1, 0, 1, b'a', TAG_SAMPLE, 2, 0, 0, 1,
        ]);
        let old = Timeline::read(&zstd::encode_all(&content[..], 1).unwrap()[..]).unwrap();
        assert_eq!((old.samples[0].time_ns, old.clock.is_none()), (1, true));
    }

    #[test]
    fn a_timeline_cuts_into_back_to_back_windows_that_write_back() {
        let mut writer = TimelineWriter::new(Vec::new()).unwrap();
        writer.new_stack(0, "a;main;f");
        writer.new_stack(1, "a;main;g");
        for (t, stack) in [(1_000, 0), (1_400, 1), (1_600, 0), (2_400, 1), (3_000, 0)] {
            writer.sample(&meta(Some(t), 10, "a"), stack);
        }
        let timeline = Timeline::read(&writer.finish().unwrap()[..]).unwrap();
        let windows = timeline.split_even(2);
        assert_eq!(windows.len(), 2);
        assert_eq!((windows[0].start_ns, windows[0].end_ns), (1_000, 2_000));
        assert_eq!((windows[1].start_ns, windows[1].end_ns), (2_000, 3_000));
        assert_eq!(windows[0].samples.len(), 3);
        // The last sample sits on the end bound and belongs to the last window.
        assert_eq!(windows[1].samples.len(), 2);
        assert_eq!(
            timeline.totals_of(&windows[1].samples),
            vec![("a;main;f".to_string(), 1), ("a;main;g".to_string(), 1)]
        );
        let part = timeline
            .write_part(&windows[1].samples, Vec::new())
            .unwrap();
        let back = Timeline::read(&part[..]).unwrap();
        assert_eq!(back.samples.len(), 2);
        assert_eq!(back.span_ns(), Some((2_400, 3_000)));
        assert!(Timeline::default().split_even(3).is_empty());
    }

    #[test]
    fn damaged_files_are_errors() {
        assert!(Timeline::read(&b"not zstd"[..]).is_err());
        let mut content = MAGIC.to_vec();
        content.extend([TAG_SAMPLE, 0, 0, 0, 1]);
        let bytes = zstd::encode_all(&content[..], 1).unwrap();
        let err = Timeline::read(&bytes[..]).unwrap_err();
        assert!(err.to_string().contains("not yet defined"), "{err}");
        let mut content = MAGIC.to_vec();
        content.extend([TAG_STACK, 0x80]);
        let bytes = zstd::encode_all(&content[..], 1).unwrap();
        assert!(Timeline::read(&bytes[..]).is_err());
    }

    #[test]
    fn timeline_weights_summing_past_u64_saturate_not_overflow() {
        let sample = |weight| Sample {
            time_ns: 1,
            thread: 0,
            stack: 0,
            weight,
        };
        let timeline = Timeline {
            stacks: vec!["a;f".into()],
            threads: vec![Thread {
                tid: 1,
                pid: None,
                comm: "a".into(),
            }],
            samples: vec![sample(u64::MAX), sample(2)],
            clock: None,
        };
        assert_eq!(timeline.stack_totals(), vec![("a;f".to_string(), u64::MAX)]);
        assert_eq!(
            timeline.totals_of(&timeline.samples),
            vec![("a;f".to_string(), u64::MAX)]
        );
    }
}
