//! The heatmap page of a capture, FlameScope's layout: columns of time, each cut into 50
//! rows, each cell coloured by its sample count; a range dragged over the cells (or named in
//! the URL fragment, `#t=12.0-14.5`, seconds after the first sample) is drawn as a
//! flamegraph below, with search, zoom and a per-thread filter. One self-contained HTML
//! file: no network, no external script.
//!
//! A column is a second (FlameScope's 20 ms rows) once the capture is 200 s long; a shorter
//! capture gets the largest of 10, 20, 50, 100, 200 and 500 ms that still makes 200 columns
//! (`column_step_ns`), so an 8 s capture is about 400 columns of 20 ms, not 8 of a second.
//!
//! The samples are embedded compactly, not as JSON per sample: merged per (cell, thread,
//! stack), as LEB128 varints (cell delta, thread, call-tree node, weight), gzipped and
//! base64-encoded; the page inflates them with the browser's own DecompressionStream.
//! Stacks are a call tree (`parent`, `frame` per node, parents before children), so a
//! range's flamegraph is one pass over its cells and one over the tree.
//!
//! Markers (the capture's `.markers`, placed through the timeline's clock) are a row of
//! ticks above the cells and a list beside them (ArrowLeft/ArrowRight or k/j step through
//! them); picking one selects its interval exactly, not to the nearest cell: every entry
//! also carries its segment, the number of interval bounds at or before its samples, so an
//! interval is a range of segments.

use crate::profile::markers::{intervals, Markers};
use crate::profile::timeline::{put_varint, read_records, Record};
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};

/// Rows per column (a one-second column has FlameScope's 20 ms slices).
pub const ROWS: u64 = 50;
/// The spans a column may have, in ms, shortest first: each is a multiple of `ROWS` µs, so
/// every cell is a whole number of µs.
pub const COLUMN_STEPS_MS: [u64; 7] = [10, 20, 50, 100, 200, 500, 1000];
/// Columns a capture of 2 s or more gets at least (a second per column from 200 s up).
pub const MIN_COLUMNS: u64 = 200;

/// A column's span for samples spread over `span_ns`: the largest step that still makes
/// `MIN_COLUMNS` columns, or the shortest. From 200 s up it is a second, FlameScope's;
/// below, the columns are between 200 and 500 (the steps are at most 2.5 times apart).
pub fn column_step_ns(span_ns: u64) -> u64 {
    COLUMN_STEPS_MS
        .iter()
        .rev()
        .map(|ms| ms * 1_000_000)
        .find(|step| span_ns >= MIN_COLUMNS * step)
        .unwrap_or(COLUMN_STEPS_MS[0] * 1_000_000)
}

/// The columns samples spread over `span_ns` fill (the last sample's column included).
pub fn columns(span_ns: u64) -> u64 {
    span_ns / column_step_ns(span_ns) + 1
}

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");

/// What a page is made of, before it is written.
#[derive(Debug, Default)]
pub struct HeatmapData {
    /// One cell's span in ns (a column's, `column_step_ns`, over `ROWS`), and the columns.
    pub cell_ns: u64,
    pub columns: u64,
    pub frames: Vec<String>,
    /// Per call-tree node: its parent (node 0, the root, is its own) and frame (-1 for root).
    pub parent: Vec<u32>,
    pub frame: Vec<i64>,
    /// (tid, thread name) per thread id.
    pub threads: Vec<(u32, String)>,
    /// Weight per (cell, segment, thread, node), in order.
    pub cells: BTreeMap<(u64, u32, u32, u32), u64>,
    pub samples: u64,
    /// The markers the page shows, and why there are none when a markers file exists.
    pub markers: Vec<PageMarker>,
    pub marker_note: Option<String>,
}

/// A marker as the page draws it: times in ms after the first sample.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PageMarker {
    pub t: f64,
    pub start: f64,
    pub label: String,
    /// The block (or slot) number the line names.
    pub number: Option<u64>,
    pub line: String,
    /// Its interval's samples are those of segments `seg.0 ..= seg.1`.
    pub seg: (u32, u32),
}

/// Interval bounds on the timeline's clock, sorted, and the page's markers before placing.
struct Bounds {
    sorted: Vec<i64>,
    /// (marker, start, end) on the timeline's clock.
    spans: Vec<(usize, i64, i64)>,
}

impl Bounds {
    fn new(markers: &Markers, to_unix_ns: i64) -> Bounds {
        let spans: Vec<(usize, i64, i64)> =
            intervals(&markers.markers, None, markers.header.since_ns)
                .iter()
                .map(|i| {
                    (
                        i.marker,
                        i.start_ns.saturating_sub(to_unix_ns),
                        i.end_ns.saturating_sub(to_unix_ns),
                    )
                })
                .collect();
        let mut sorted: Vec<i64> = spans.iter().flat_map(|(_, a, b)| [*a, *b]).collect();
        sorted.sort_unstable();
        sorted.dedup();
        Bounds { sorted, spans }
    }

    /// The segment of a sample at `t`: how many bounds are at or before it.
    fn segment(&self, t: i64) -> u32 {
        self.sorted.partition_point(|b| *b <= t) as u32
    }

    fn position(&self, b: i64) -> u32 {
        self.sorted.partition_point(|x| *x < b) as u32
    }
}

impl HeatmapData {
    /// Reads a timeline (zstd bytes), merging samples per cell, segment, thread and stack;
    /// `markers` are placed through the timeline's clock record. The compressed bytes are
    /// read twice: first for the samples' span, which sets the cells' size, then merged.
    pub fn from_timeline<R: Read>(
        mut reader: R,
        markers: Option<&Markers>,
    ) -> io::Result<HeatmapData> {
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes)?;
        let (mut start, mut span) = (None::<u64>, 0u64);
        read_records(&bytes[..], |record| {
            if let Record::Sample(s) = record {
                let t0 = *start.get_or_insert(s.time_ns);
                span = span.max(s.time_ns.saturating_sub(t0));
            }
        })?;
        let cell_ns = column_step_ns(span) / ROWS;
        let mut data = HeatmapData {
            cell_ns,
            columns: columns(span),
            parent: vec![0],
            frame: vec![-1],
            ..Default::default()
        };
        let mut to_unix: Option<i64> = None;
        let mut bounds: Option<Bounds> = None;
        let mut clock_late = false;
        let mut frame_ids: HashMap<String, i64> = HashMap::new();
        let mut children: HashMap<(u32, i64), u32> = HashMap::new();
        let mut leaf_of: Vec<u32> = Vec::new();
        let mut first: Option<u64> = None;
        read_records(&bytes[..], |record| match record {
            Record::Stack(stack) => {
                let mut node = 0u32;
                for name in stack.split(';') {
                    let frame = match frame_ids.get(name) {
                        Some(f) => *f,
                        None => {
                            data.frames.push(name.to_string());
                            let f = data.frames.len() as i64 - 1;
                            frame_ids.insert(name.to_string(), f);
                            f
                        }
                    };
                    node = *children.entry((node, frame)).or_insert_with(|| {
                        data.parent.push(node);
                        data.frame.push(frame);
                        data.parent.len() as u32 - 1
                    });
                }
                leaf_of.push(node);
            }
            Record::Thread(t) => data.threads.push((t.tid, t.comm)),
            Record::Clock(c) => {
                clock_late = first.is_some();
                to_unix = Some(c.to_unix_ns);
            }
            Record::Sample(s) => {
                let t0 = *first.get_or_insert(s.time_ns);
                if bounds.is_none() {
                    if let (Some(m), Some(offset)) = (markers, to_unix) {
                        bounds = Some(Bounds::new(m, offset));
                    }
                }
                let cell = s.time_ns.saturating_sub(t0) / cell_ns;
                let segment = bounds.as_ref().map_or(0, |b| b.segment(s.time_ns as i64));
                *data
                    .cells
                    .entry((cell, segment, s.thread, leaf_of[s.stack as usize]))
                    .or_default() += s.weight;
                data.samples += s.weight;
            }
        })?;
        if let Some(m) = markers {
            match (&bounds, first) {
                (Some(b), Some(t0)) if !clock_late => {
                    let ms = |t: i64| (t - t0 as i64) as f64 / 1e6;
                    data.markers = b
                        .spans
                        .iter()
                        .map(|(i, start, end)| PageMarker {
                            t: ms(*end),
                            start: ms(*start),
                            label: m.markers[*i].label(),
                            number: m.markers[*i].number.or(m.markers[*i].slot),
                            line: m.markers[*i].line.clone(),
                            seg: (b.position(*start) + 1, b.position(*end)),
                        })
                        .collect();
                }
                _ if m.markers.is_empty() => {}
                _ => {
                    data.marker_note = Some(
                        "the timeline does not say which clock its samples are on (a capture made before devprof recorded it): markers cannot be placed".into(),
                    )
                }
            }
        }
        Ok(data)
    }

    /// The cells as the page reads them: varints, gzipped.
    fn packed(&self) -> io::Result<Vec<u8>> {
        let mut raw = Vec::with_capacity(self.cells.len() * 6);
        let mut last_cell = 0;
        for ((cell, segment, thread, node), weight) in &self.cells {
            put_varint(&mut raw, cell - last_cell);
            put_varint(&mut raw, u64::from(*segment));
            put_varint(&mut raw, u64::from(*thread));
            put_varint(&mut raw, u64::from(*node));
            put_varint(&mut raw, *weight);
            last_cell = *cell;
        }
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&raw)?;
        gz.finish()
    }
}

/// The whole page.
pub fn heatmap_html(data: &HeatmapData, title: &str, unit: &str) -> io::Result<String> {
    let meta = json!({
        "title": title,
        "unit": unit,
        "rows": ROWS,
        "columns": data.columns,
        "cellMs": data.cell_ns as f64 / 1e6,
        "samples": data.samples,
        "threads": data.threads.iter().map(|(tid, name)| json!({"tid": tid, "name": name})).collect::<Vec<_>>(),
        "frames": data.frames,
        "parent": data.parent,
        "frame": data.frame,
        "packed": base64(&data.packed()?),
        "markers": data.markers,
        "markerNote": data.marker_note,
    });
    // No `<` at all inside the script element (`</script>` would end it): JSON spells it
    // `\u003c`, and only strings hold one.
    let meta = meta.to_string().replace('<', "\\u003c");
    Ok(PAGE
        .replace("{{UNIT}}", &html_escape(unit))
        .replace("{{TITLE}}", &html_escape(title))
        .replace("{{DATA}}", &meta)
        .replace("{{SCRIPT}}", SCRIPT))
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::perfscript::{SampleMeta, SampleSink};
    use crate::profile::timeline::TimelineWriter;

    #[test]
    fn base64_pads_like_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn the_column_step_scales_to_the_capture_and_stays_a_second_for_long_ones() {
        const MS: u64 = 1_000_000;
        const S: u64 = 1_000_000_000;
        // A 5 s capture: 20 ms columns, 251 of them (FlameScope's second would give 5).
        assert_eq!(column_step_ns(5 * S), 20 * MS);
        assert_eq!(columns(5 * S), 251);
        assert_eq!(column_step_ns(8 * S), 20 * MS);
        assert_eq!(columns(8 * S), 401);
        // Under 2 s: the shortest step.
        assert_eq!(column_step_ns(0), 10 * MS);
        assert_eq!(columns(0), 1);
        assert_eq!(columns(S), 101);
        // From 200 s up, a second per column, as before.
        assert_eq!(column_step_ns(200 * S - 1), 500 * MS);
        assert_eq!(column_step_ns(200 * S), S);
        assert_eq!(columns(3600 * S), 3601);
        // Between: always 200 to 500 columns, the step never shrinking as the span grows,
        // and every cell a whole number of µs.
        let mut last = 0;
        for span in (2 * S..200 * S).step_by(7 * MS as usize) {
            let step = column_step_ns(span);
            assert!(step >= last, "{span}");
            last = step;
            assert!(
                (200..=500).contains(&columns(span)),
                "{span}: {}",
                columns(span)
            );
            assert_eq!(step % (ROWS * 1000), 0);
        }
    }

    #[test]
    fn samples_merge_per_cell_thread_and_stack_over_a_call_tree() {
        let mut w = TimelineWriter::new(Vec::new()).unwrap();
        w.new_stack(0, "a;main;f");
        w.new_stack(1, "a;main;g");
        let at = |us: u64| SampleMeta {
            time_ns: Some(5_000_000_000 + us * 1_000),
            pid: Some(1),
            tid: 2,
            comm: "a",
            weight: 1,
        };
        for (us, stack) in [
            (0, 0),
            (100, 0),
            (5_000, 0),
            (19_000, 1),
            (20_000, 0),
            (1_000_000, 1),
        ] {
            w.sample(&at(us), stack);
        }
        let data = HeatmapData::from_timeline(&w.finish().unwrap()[..], None).unwrap();
        // 1 s of samples: 10 ms columns of 0.2 ms cells.
        assert_eq!((data.cell_ns, data.columns), (200_000, 101));
        assert_eq!(data.frames, vec!["a", "main", "f", "g"]);
        assert_eq!(data.parent, vec![0, 0, 1, 2, 2]);
        let cells: Vec<_> = data.cells.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(
            cells,
            vec![
                ((0, 0, 0, 3), 2),
                ((25, 0, 0, 3), 1),
                ((95, 0, 0, 4), 1),
                ((100, 0, 0, 3), 1),
                ((5000, 0, 0, 4), 1)
            ]
        );
        let page = heatmap_html(&data, "t </script>", "samples").unwrap();
        assert!(!page.contains("t </script>") && page.contains("DecompressionStream"));
        assert!(page.contains(r#""columns":101"#) && page.contains(r#""cellMs":0.2"#));
    }

    #[test]
    fn a_long_capture_keeps_twenty_ms_cells() {
        let mut w = TimelineWriter::new(Vec::new()).unwrap();
        w.new_stack(0, "a;main");
        for s in [0u64, 1, 250] {
            w.sample(
                &SampleMeta {
                    time_ns: Some(s * 1_000_000_000 + 30_000_000),
                    pid: Some(1),
                    tid: 2,
                    comm: "a",
                    weight: 1,
                },
                0,
            );
        }
        let data = HeatmapData::from_timeline(&w.finish().unwrap()[..], None).unwrap();
        assert_eq!((data.cell_ns, data.columns), (20_000_000, 251));
        let cells: Vec<u64> = data.cells.keys().map(|k| k.0).collect();
        assert_eq!(cells, vec![0, 50, 12_500]);
    }

    #[test]
    fn a_markers_interval_is_a_range_of_segments() {
        use crate::profile::markers::{Header, Marker};
        use crate::profile::timeline::Clock;
        let mut w = TimelineWriter::new(Vec::new()).unwrap();
        let offset = 1_000_000_000_000_000_000i64;
        w.set_clock(&Clock {
            name: "CLOCK_MONOTONIC".into(),
            to_unix_ns: offset,
            error_ns: 1000,
        });
        w.new_stack(0, "a;main;f");
        for ms in [0u64, 10, 20, 30, 40, 50] {
            w.sample(
                &SampleMeta {
                    time_ns: Some(ms * 1_000_000),
                    pid: Some(1),
                    tid: 2,
                    comm: "a",
                    weight: 1,
                },
                0,
            );
        }
        let marker = |ms: i64, elapsed_ms: u64| Marker {
            time_ns: offset + ms * 1_000_000,
            name: "block".into(),
            set: "reth".into(),
            number: Some(ms as u64),
            elapsed_ns: Some(elapsed_ms * 1_000_000),
            hash: None,
            slot: None,
            line: format!("<b>block {ms}</b>"),
        };
        let markers = Markers::new(Header::default(), vec![marker(25, 20), marker(45, 10)]);
        let data = HeatmapData::from_timeline(&w.finish().unwrap()[..], Some(&markers)).unwrap();
        assert_eq!(data.markers.len(), 2);
        // Block 25 is [5, 25) ms: samples at 10 and 20 ms.
        let in_range = |(a, b): (u32, u32)| -> u64 {
            data.cells
                .iter()
                .filter(|((_, s, _, _), _)| *s >= a && *s <= b)
                .map(|(_, w)| *w)
                .sum()
        };
        assert_eq!((data.markers[0].start, data.markers[0].t), (5.0, 25.0));
        assert_eq!(data.markers[0].number, Some(25));
        assert_eq!(in_range(data.markers[0].seg), 2);
        // Block 45 is [35, 45) ms: the sample at 40 ms.
        assert_eq!(in_range(data.markers[1].seg), 1);
        let page = heatmap_html(&data, "t", "samples").unwrap();
        assert!(
            !page.contains("<b>block"),
            "log text is escaped in the page"
        );
    }
}
