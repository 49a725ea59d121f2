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

pub fn write_svg<W: Write>(folded: &Folded, spec: &SvgSpec, out: W) -> io::Result<()> {
    let mut options = Options::default();
    options.title = spec.title.clone();
    options.subtitle = spec.subtitle.clone();
    options.count_name = spec.count_name.clone();
    options.colors = spec.palette;
    options.hash = true; // stable colours per function across renders
    let lines: Vec<String> = folded.lines().collect();
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(|e| io::Error::other(e.to_string()))
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
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(|e| io::Error::other(e.to_string()))
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
