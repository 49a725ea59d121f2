//! Interactive flamegraph SVGs through inferno.

use crate::fold::Folded;
use inferno::flamegraph::{self, color, Options};
use std::io::{self, Write};

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
