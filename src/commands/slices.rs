//! `top|render|diff CAPTURE --slice MARK`: the capture's timeline cut at its markers named
//! MARK, one interval per marker (`profile::markers::slice`). `top` prints the intervals
//! (samples, CPU, too short to read) and, with `--slowest N`, the heaviest functions of
//! the N slowest; `render` writes a flamegraph per interval (or per slowest one); `diff`
//! draws the N slowest against the median interval.

use crate::error::{Error, Result};
use crate::profile::diff::{compare, differential_lines, Measure};
use crate::profile::folded::Folded;
use crate::profile::markers::slice::{median, merged, slice, slowest, Slice, MIN_PERIODS};
use crate::profile::markers::{intervals, Markers};
use crate::profile::timeline::Timeline;
use crate::profile::top;
use crate::render::{write_svg_lines_to, Layout, SvgOutput};
use crate::store::catalog::Capture;
use crate::store::loader::{self, ProfileRef};
use crate::ui::table::{self, pct};
use crate::units::thousands;
use std::path::{Path, PathBuf};

/// A capture cut at its markers.
pub struct Sliced {
    pub capture: Capture,
    pub mark: String,
    pub markers: Markers,
    pub slices: Vec<Slice>,
    pub period_ns: Option<u64>,
    /// The first sample, on the markers' clock: interval times are shown after it.
    pub origin_ns: i64,
}

impl Sliced {
    /// What one count of the timeline is: an event for an off-CPU capture, else a sample.
    pub fn unit(&self) -> &'static str {
        match self.capture.manifest.kind.as_str() {
            "offcpu" => crate::store::units::EVENTS,
            _ => crate::store::units::SAMPLES,
        }
    }
}

/// Loads `profile`'s timeline and markers and cuts it at the markers named `mark`; a name
/// in the store stands for its capture of `kind` (`loader::resolve`).
pub fn load(
    profile: &ProfileRef,
    output_dir: &Path,
    mark: &str,
    kind: Option<&str>,
) -> Result<Sliced> {
    let resolved = loader::resolve(profile, output_dir, kind)?;
    if let Some(how) = &resolved.picked {
        crate::say!("--slice: {how}");
    }
    let capture = resolved.capture.ok_or_else(|| {
        Error::Usage(
            "--slice needs a capture devprof wrote (its manifest, timeline and markers), not a bare .folded file".into(),
        )
    })?;
    let missing = |what: &str, hint: &str| Error::EmptyProfile {
        path: capture.manifest_path.display().to_string(),
        reason: Some(format!("the capture has no {what}")),
        hint: hint.to_string(),
    };
    let markers_path = capture.file_with_extension("markers").ok_or_else(|| {
        missing(
            ".markers",
            "record it again with markers on (--mark auto, the default, or --mark NAME=REGEX)",
        )
    })?;
    let markers = Markers::read_path(&markers_path)
        .map_err(|e| Error::io(format!("read {}", markers_path.display()), e))?
        .ok_or_else(|| {
            missing(
                ".markers file on disk",
                "the file was removed; record again",
            )
        })?;
    let timeline_path = capture
        .file_with_extension("timeline")
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            missing(
                ".timeline",
                "slices need per-sample times: a perf cpu or offcpu capture",
            )
        })?;
    let file = std::fs::File::open(&timeline_path)
        .map_err(|e| Error::io(format!("open {}", timeline_path.display()), e))?;
    let timeline = Timeline::read(std::io::BufReader::new(file))
        .map_err(|e| Error::io(format!("read the timeline {}", timeline_path.display()), e))?;
    let to_unix = timeline.to_unix_ns().ok_or_else(|| {
        missing(
            "clock record in its timeline (recorded before devprof recorded perf's clock)",
            "record it again with this devprof",
        )
    })?;
    if !markers.markers.iter().any(|m| m.name == mark) {
        let names = markers.names();
        return Err(Error::Usage(format!(
            "the capture has no marker named '{mark}'; it has {}",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    }
    let period_ns = (capture.manifest.kind == "cpu" && capture.manifest.frequency_hz > 0)
        .then(|| 1_000_000_000 / u64::from(capture.manifest.frequency_hz));
    // Only intervals inside the recorded stretch: perf starts after the log stream is
    // followed, and an interval before its first sample would be empty, not fast.
    let (first, last) = timeline
        .span_ns()
        .map(|(a, b)| (a as i64 + to_unix, b as i64 + to_unix))
        .unwrap_or((i64::MAX, i64::MIN));
    let slack = period_ns.unwrap_or(0) as i64;
    let spans: Vec<_> = intervals(&markers.markers, Some(mark), markers.header.since_ns)
        .into_iter()
        .filter(|i| i.start_ns >= first - slack && i.end_ns <= last + slack)
        .collect();
    let slices = slice(&timeline, to_unix, &spans, period_ns);
    let origin_ns = if first == i64::MAX {
        markers.header.since_ns
    } else {
        first
    };
    Ok(Sliced {
        capture,
        mark: mark.to_string(),
        markers,
        slices,
        period_ns,
        origin_ns,
    })
}

impl Sliced {
    /// Stacks rooted at their thread, for rankings and comparisons: an off-CPU capture's
    /// have the event above it (`loader::thread_rooted`).
    fn rooted(&self, folded: &Folded) -> Folded {
        loader::thread_rooted(folded.clone(), Some(&self.capture), self.unit())
    }

    fn label(&self, i: usize) -> String {
        self.markers.markers[self.slices[i].interval.marker].label()
    }

    /// Indexes `--slowest N` means (every slice when None), in time order unless slowest.
    pub fn chosen(&self, slowest_n: Option<usize>) -> Vec<usize> {
        match slowest_n {
            Some(n) => slowest(&self.slices, n),
            None => (0..self.slices.len()).collect(),
        }
    }

    /// The table of intervals.
    pub fn table(&self, which: &[usize]) -> String {
        let total: u64 = self.slices.iter().map(|s| s.samples).sum();
        let rows: Vec<Vec<String>> = which
            .iter()
            .map(|i| {
                let s = &self.slices[*i];
                vec![
                    self.label(*i),
                    format!("{:.3}", (s.interval.start_ns - self.origin_ns) as f64 / 1e9),
                    format!("{:.2}", s.interval.duration_ns() as f64 / 1e6),
                    thousands(s.samples),
                    pct(crate::profile::percent(s.samples, total)),
                    s.cores(self.period_ns)
                        .map_or_else(|| "-".into(), |c| format!("{c:.2}")),
                    if s.too_short {
                        format!("too short (< {MIN_PERIODS} sampling periods)")
                    } else if !s.interval.from_elapsed {
                        "since the previous marker".into()
                    } else {
                        String::new()
                    },
                ]
            })
            .collect();
        table::render(
            &[
                "MARKER",
                "START s",
                "LENGTH ms",
                "SAMPLES",
                "% SLICED",
                "CPU",
                "NOTE",
            ],
            "LRRRRRL",
            &rows,
            2,
        )
    }

    pub fn json_rows(&self, which: &[usize]) -> Vec<serde_json::Value> {
        which
            .iter()
            .map(|i| {
                let s = &self.slices[*i];
                let m = &self.markers.markers[s.interval.marker];
                serde_json::json!({
                    "marker": m.label(),
                    "number": m.number,
                    "slot": m.slot,
                    "time_ns": m.time_ns,
                    "start_ns": s.interval.start_ns,
                    "end_ns": s.interval.end_ns,
                    "length_ms": s.interval.duration_ns() as f64 / 1e6,
                    "from_elapsed": s.interval.from_elapsed,
                    "samples": s.samples,
                    "cpu_cores": s.cores(self.period_ns),
                    "too_short": s.too_short,
                    "line": m.line,
                })
            })
            .collect()
    }

    fn heading(&self) -> String {
        format!(
            "{} {}: {} intervals of marker '{}' inside the recorded stretch",
            self.capture.container,
            self.capture.name(),
            self.slices.len(),
            self.mark
        )
    }
}

/// `top CAPTURE --slice MARK [--slowest N]`.
pub fn top(sliced: &Sliced, slowest_n: Option<usize>, limit: usize, json: bool) -> Result<()> {
    let which = sliced.chosen(slowest_n);
    let tops: Vec<Vec<top::Row>> = match slowest_n {
        Some(_) => which
            .iter()
            .map(|i| top::by_self(&sliced.rooted(&sliced.slices[*i].folded), limit))
            .collect(),
        None => Vec::new(),
    };
    if json {
        crate::ui::output::print_json(&serde_json::json!({
            "capture": sliced.capture.name(),
            "mark": sliced.mark,
            "intervals": sliced.json_rows(&which),
            "top": tops,
        }));
        return Ok(());
    }
    let mut out = format!("{}\n", sliced.heading());
    out.push_str(&sliced.table(&which));
    for (i, rows) in which.iter().zip(&tops) {
        out.push_str(&format!("\n{}: top by self samples\n", sliced.label(*i)));
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| vec![thousands(r.samples), pct(r.percent), r.name.clone()])
            .collect();
        out.push_str(&table::render(
            &["SAMPLES", "%", "FUNCTION"],
            "RRL",
            &cells,
            2,
        ));
    }
    crate::out!("{out}");
    Ok(())
}

/// `render CAPTURE --slice MARK [--slowest N] [-o DIR]`: one flamegraph per interval.
pub fn render(
    sliced: &Sliced,
    slowest_n: Option<usize>,
    dir: Option<PathBuf>,
    layout: &Layout,
) -> Result<()> {
    let dir =
        dir.unwrap_or_else(|| PathBuf::from(format!("{}-{}", sliced.capture.name(), sliced.mark)));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let which = sliced.chosen(slowest_n);
    let mut written = 0;
    for i in &which {
        let s = &sliced.slices[*i];
        if s.folded.is_empty() {
            continue;
        }
        let m = &sliced.markers.markers[s.interval.marker];
        let id = m.number.or(m.slot).map_or(i.to_string(), |n| n.to_string());
        let path = dir.join(format!("{}-{id}.svg", sliced.mark));
        let title = format!(
            "{} — {} — {:.2} ms, {} samples",
            sliced.capture.container,
            m.label(),
            s.interval.duration_ns() as f64 / 1e6,
            thousands(s.samples)
        );
        write_svg_lines_to(
            &SvgOutput::File(path),
            &s.folded.lines().collect::<Vec<_>>(),
            &title,
            Some(m.line.chars().take(200).collect()),
            sliced.unit(),
            layout,
        )?;
        written += 1;
    }
    crate::out!("{}\n{}", sliced.heading(), sliced.table(&which));
    crate::outln!("flamegraphs: {written} in {}", dir.display());
    Ok(())
}

/// `diff CAPTURE --slice MARK --slowest N`: the slowest intervals against the median one.
pub fn diff(
    sliced: &Sliced,
    slowest_n: usize,
    measure: Measure,
    limit: usize,
    output: &SvgOutput,
    layout: &Layout,
    json: bool,
) -> Result<()> {
    let slow = slowest(&sliced.slices, slowest_n);
    let mid = median(&sliced.slices).ok_or_else(|| Error::EmptyProfile {
        path: sliced.capture.manifest_path.display().to_string(),
        reason: Some(format!("no interval of marker '{}'", sliced.mark)),
        hint: "record longer".into(),
    })?;
    let before: &Folded = &sliced.rooted(&sliced.slices[mid].folded);
    let after = sliced.rooted(&merged(&sliced.slices, &slow));
    for (what, f) in [
        ("the median interval", before),
        ("the slowest intervals", &after),
    ] {
        if f.is_empty() {
            return Err(Error::EmptyProfile {
                path: sliced.capture.manifest_path.display().to_string(),
                reason: Some(format!("{what} of '{}' hold no samples", sliced.mark)),
                hint: "intervals too short for the sampling rate: record at a higher --frequency"
                    .into(),
            });
        }
    }
    let d = compare(before, &after, measure);
    let lines =
        differential_lines(before, &after).map_err(|e| Error::io("compute the differential", e))?;
    let title = format!(
        "{} — the {} slowest '{}' against the median ({})",
        sliced.capture.container,
        slow.len(),
        sliced.mark,
        sliced.label(mid)
    );
    write_svg_lines_to(
        output,
        &lines,
        &title,
        Some(format!(
            "median scaled to the slowest intervals' {}; red grew, blue shrank",
            sliced.unit()
        )),
        sliced.unit(),
        layout,
    )?;
    if json {
        let text = serde_json::to_string_pretty(&serde_json::json!({
            "capture": sliced.capture.name(),
            "mark": sliced.mark,
            "median": sliced.json_rows(&[mid]),
            "slowest": sliced.json_rows(&slow),
            "measure": measure,
            "before_total": d.before_total,
            "after_total": d.after_total,
            "flamegraph": match output { SvgOutput::File(p) => Some(p.clone()), SvgOutput::Stdout => None },
            "gains": d.gains(limit),
            "losses": d.losses(limit),
        }))
        .unwrap_or_default();
        match output {
            SvgOutput::Stdout => crate::say!("{text}"),
            SvgOutput::File(_) => crate::outln!("{text}"),
        }
        return Ok(());
    }
    let mut out = format!("{}\nmedian:\n", sliced.heading());
    out.push_str(&sliced.table(&[mid]));
    out.push_str("slowest:\n");
    out.push_str(&sliced.table(&slow));
    out.push_str("\nlargest gains (share of samples, slowest vs median, percentage points)\n");
    let cells: Vec<Vec<String>> = d
        .gains(limit)
        .iter()
        .map(|r| {
            vec![
                format!("{:+.1}", r.delta_points),
                pct(r.before_percent),
                pct(r.after_percent),
                r.name.clone(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["POINTS", "MEDIAN %", "SLOWEST %", "FUNCTION"],
        "RRRL",
        &cells,
        2,
    ));
    if let SvgOutput::File(p) = output {
        out.push_str(&format!("\ndifferential flamegraph: {}\n", p.display()));
    }
    match output {
        SvgOutput::Stdout => crate::ui::term::eprint(&out),
        SvgOutput::File(_) => crate::out!("{out}"),
    }
    Ok(())
}
