//! Drawing profiles: interactive flamegraph SVGs through inferno, the folded-stack files
//! next to them, the time heatmap page of a capture (`heatmap`), and plots (`plot`).

pub mod heatmap;
pub mod plot;

use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use inferno::flamegraph::{self, color, Options};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// How one flamegraph is drawn.
#[derive(Debug, Clone)]
pub struct SvgSpec {
    pub title: String,
    pub subtitle: Option<String>,
    /// What one unit of weight is: "samples", "events", "us off-CPU", "bytes".
    pub count_name: String,
    pub palette: color::Palette,
}

impl SvgSpec {
    pub fn cpu(title: String, subtitle: Option<String>) -> Self {
        SvgSpec {
            title,
            subtitle,
            count_name: "samples".into(),
            palette: color::Palette::Multi(color::MultiPalette::Rust),
        }
    }
}

/// inferno's script sets the frames' width to the drawing's width less 20 px as it loads:
/// in a frame not laid out yet (the viewer's sandboxed frames run in a process of their
/// own, which learns its size a moment later) that is -20, and the labels' positions then
/// divide by it: errors in the console until the resize that follows. The update waits
/// for that resize instead (the script listens for it).
const FLUID_WIDTH_LINE: &str =
    "frames.attributes.width.value = svg.width.baseVal.value - xpad * 2;";
const FLUID_WIDTH_KEPT: &str = "if (svg.width.baseVal.value <= xpad * 2) return; \
     frames.attributes.width.value = svg.width.baseVal.value - xpad * 2;";

/// A writer that replaces every `from` in what passes through it with `to`, holding back
/// only as much as a match cut between two writes needs.
struct Replacing<W: Write> {
    out: W,
    from: &'static [u8],
    to: &'static [u8],
    held: Vec<u8>,
}

impl<W: Write> Replacing<W> {
    fn new(out: W, from: &'static str, to: &'static str) -> Self {
        Replacing {
            out,
            from: from.as_bytes(),
            to: to.as_bytes(),
            held: Vec::new(),
        }
    }

    /// Writes what is held (the end of the stream: no match can complete any more).
    fn finish(mut self) -> io::Result<()> {
        self.out.write_all(&self.held)?;
        self.out.flush()
    }
}

impl<W: Write> Write for Replacing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.held.extend_from_slice(buf);
        let mut start = 0;
        while let Some(at) = self.held[start..]
            .windows(self.from.len())
            .position(|w| w == self.from)
        {
            self.out.write_all(&self.held[start..start + at])?;
            self.out.write_all(self.to)?;
            start += at + self.from.len();
        }
        // Keep the tail that may begin a match the next write completes.
        let keep = (self.from.len() - 1).min(self.held.len() - start);
        let end = self.held.len() - keep;
        self.out.write_all(&self.held[start..end])?;
        self.held.drain(..end);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// inferno's drawing of `lines` with `options`, its script's fluid width kept at 0 or more.
fn draw<'a, W: Write>(
    options: &mut Options,
    lines: impl IntoIterator<Item = &'a str>,
    out: W,
) -> io::Result<()> {
    let mut patched = Replacing::new(out, FLUID_WIDTH_LINE, FLUID_WIDTH_KEPT);
    flamegraph::from_lines(options, lines, &mut patched)
        .map_err(|e| io::Error::other(e.to_string()))?;
    patched.finish()
}

pub fn write_svg<W: Write>(folded: &Folded, spec: &SvgSpec, out: W) -> io::Result<()> {
    let mut options = Options::default();
    options.title = spec.title.clone();
    options.subtitle = spec.subtitle.clone();
    options.count_name = spec.count_name.clone();
    options.colors = spec.palette;
    options.hash = true; // stable colours per function across renders
    let lines: Vec<String> = folded.lines().collect();
    draw(&mut options, lines.iter().map(String::as_str), out)
}

/// How `devprof render` and `diff` lay a flamegraph out.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub palette: color::Palette,
    /// Pixels; `None` is fluid (fills the browser window).
    pub width: Option<usize>,
    /// Frames narrower than this percentage of the width are omitted.
    pub min_width: f64,
    /// Icicle graph: roots at the top.
    pub inverted: bool,
    /// Every stack reversed, leaves as roots.
    pub reverse: bool,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            palette: color::Palette::Multi(color::MultiPalette::Rust),
            width: None,
            min_width: 0.1,
            inverted: false,
            reverse: false,
        }
    }
}

/// A flamegraph of `lines`: folded lines (`stack count`), or differential lines (`stack
/// before after`, which inferno draws red where a frame grew and blue where it shrank).
/// `count_name` is what one count is ("samples", "bytes").
pub fn write_svg_lines<W: Write>(
    lines: &[String],
    title: &str,
    subtitle: Option<String>,
    count_name: &str,
    layout: &Layout,
    out: W,
) -> io::Result<()> {
    let mut options = Options::default();
    options.title = title.to_string();
    options.subtitle = subtitle;
    options.count_name = count_name.into();
    options.colors = layout.palette;
    options.hash = true;
    options.image_width = layout.width;
    options.min_width = layout.min_width;
    options.reverse_stack_order = layout.reverse;
    if layout.inverted {
        options.direction = flamegraph::Direction::Inverted;
    }
    // from_lines sorts the lines itself (no_sort is off).
    draw(&mut options, lines.iter().map(String::as_str), out)
}

/// The line under a differential flamegraph's title (`devprof diff` and the viewer).
pub fn differential_subtitle(after_total: u64, unit: &str) -> String {
    format!(
        "before scaled to after's {} {unit}; red grew, blue shrank",
        crate::units::thousands(after_total)
    )
}

/// Writes folded stacks to `path`.
pub fn write_folded_file(folded: &Folded, path: &Path) -> Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    folded
        .write_to(BufWriter::new(file))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// Writes the flamegraph of `folded` to `path`.
pub fn write_svg_file(folded: &Folded, spec: &SvgSpec, path: &Path) -> Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    write_svg(folded, spec, BufWriter::new(file))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// Where an SVG goes (`-o -` is standard output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SvgOutput {
    Stdout,
    File(PathBuf),
}

/// Whether a write failed because the reader went away: EPIPE itself, or wrapped by the
/// SVG writer (inferno reports it through its XML writer's own error).
fn reader_gone(e: &io::Error) -> bool {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> =
        e.get_ref().map(|s| s as &(dyn std::error::Error + 'static));
    while let Some(s) = source {
        let epipe = s
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe);
        if epipe || s.to_string().contains("os error 32") {
            return true;
        }
        source = s.source();
    }
    false
}

/// Writes a flamegraph of folded or differential `lines` to `output`.
pub fn write_svg_lines_to(
    output: &SvgOutput,
    lines: &[String],
    title: &str,
    subtitle: Option<String>,
    count_name: &str,
    layout: &Layout,
) -> Result<()> {
    match output {
        SvgOutput::Stdout => {
            let mut out = BufWriter::new(io::stdout().lock());
            write_svg_lines(lines, title, subtitle, count_name, layout, &mut out)
                .and_then(|()| out.flush())
                // A reader that went away (`| head`) ends the output; it is not an error.
                .or_else(|e| if reader_gone(&e) { Ok(()) } else { Err(e) })
                .map_err(|e| Error::io("write the SVG to standard output", e))
        }
        SvgOutput::File(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
            let mut out = BufWriter::new(file);
            write_svg_lines(lines, title, subtitle, count_name, layout, &mut out)
                .and_then(|()| out.flush())
                .map_err(|e| Error::io(format!("write {}", path.display()), e))
        }
    }
}

/// Writes the heatmap page of the timeline at `timeline` to `path` (whole or not at all);
/// returns the samples it holds.
pub fn write_heatmap_file(timeline: &Path, title: &str, unit: &str, path: &Path) -> Result<u64> {
    let file = std::fs::File::open(timeline)
        .map_err(|e| Error::io(format!("open {}", timeline.display()), e))?;
    // The capture's markers, beside its timeline, when it has them.
    let markers_path = timeline.with_extension("markers");
    let markers = crate::profile::markers::Markers::read_path(&markers_path)
        .map_err(|e| Error::io(format!("read the markers {}", markers_path.display()), e))?;
    let data = heatmap::HeatmapData::from_timeline(io::BufReader::new(file), markers.as_ref())
        .map_err(|e| Error::io(format!("read the timeline {}", timeline.display()), e))?;
    let page = heatmap::heatmap_html(&data, title, unit)
        .map_err(|e| Error::io("compress the heatmap's data", e))?;
    let partial = PathBuf::from(format!("{}.partial", path.display()));
    let written = std::fs::write(&partial, page).and_then(|()| std::fs::rename(&partial, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(Error::io(format!("write {}", path.display()), e));
    }
    Ok(data.samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(chunks: &[&str]) -> String {
        let mut out = Vec::new();
        let mut w = Replacing::new(&mut out, "abcd", "XY");
        for chunk in chunks {
            w.write_all(chunk.as_bytes()).unwrap();
        }
        w.finish().unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_replacement_is_made_whole_however_the_writes_cut_the_match() {
        assert_eq!(through(&["xxabcdyy"]), "xxXYyy");
        assert_eq!(through(&["xxab", "cdyy"]), "xxXYyy");
        assert_eq!(through(&["x", "a", "b", "c", "d", "abcd"]), "xXYXY");
        assert_eq!(through(&["abc"]), "abc");
        assert_eq!(through(&[""]), "");
    }

    /// Regression: a flamegraph loaded in a frame not laid out yet set its frames' width to
    /// -20 (kept at 0, its labels went to "Infinity%"): console errors in the viewer's
    /// Chromium test, now and then.
    #[test]
    fn a_flamegraphs_fluid_width_waits_for_a_frame_with_a_width() {
        let folded = Folded::from_folded_text("main;work 5\nmain;idle 2\n");
        let mut svg = Vec::new();
        write_svg(&folded, &SvgSpec::cpu("t".into(), None), &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert_eq!(
            svg.matches(FLUID_WIDTH_KEPT).count(),
            1,
            "inferno's script changed"
        );
        // The only frames' width set is the guarded one.
        assert_eq!(svg.matches(FLUID_WIDTH_LINE).count(), 1);
    }
}
