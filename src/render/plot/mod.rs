//! Plots as self-contained SVG files (no script, no external style or font): the heap in
//! use per dump over time (`heap`), off-CPU time per thread and I/O bandwidth over the
//! window (`offcpu`), and a session's closing table (`session`). Pure: data in, text out.
//! Every string from a container (thread and function names) is escaped; every mark has a
//! `<title>` with its exact figures, shown as a tooltip.

mod heap;
mod offcpu;
mod session;

pub use crate::store::{BANDWIDTH_PLOT, HEAP_PLOT, THREADS_PLOT};
pub use heap::heap_over_time;
pub use offcpu::{bandwidth_over_time, offcpu_plots, threads_over_time};
pub use session::session_table;

pub use crate::text::escape_markup as escape;
use std::fmt::Write as _;

/// Colours shared by the plots.
const INK: &str = "#222";
const FAINT: &str = "#666";
const GRID: &str = "#e3e3e3";

/// Up to about `count` round tick values (1, 2 or 5 times a power of ten) from 0 to at
/// least `max`; the last is the axis's top.
pub fn ticks(max: f64, count: usize) -> Vec<f64> {
    if !(max.is_finite() && max > 0.0) {
        return vec![0.0, 1.0];
    }
    let raw = max / count.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power);
    let steps = (max / step).ceil().max(1.0) as usize;
    (0..=steps).map(|i| i as f64 * step).collect()
}

/// Ticks for a byte axis: round in the binary unit the maximum reads in (KiB, MiB...), so
/// that labels read `8.0 MiB`, not `8.4 MB` worth of bytes.
pub fn byte_ticks(max: f64, count: usize) -> Vec<f64> {
    let mut unit = 1.0;
    while max / unit >= 1024.0 && unit < 1024f64.powi(4) {
        unit *= 1024.0;
    }
    ticks(max / unit, count)
        .into_iter()
        .map(|t| t * unit)
        .collect()
}

/// `1.5 s`, `250 ms`, `2 min 5 s` for an axis label.
pub fn seconds_label(seconds: f64) -> String {
    if seconds >= 120.0 {
        let whole = seconds.round() as u64;
        match whole % 60 {
            0 => format!("{} min", whole / 60),
            s => format!("{} min {s} s", whole / 60),
        }
    } else if seconds >= 1.0 || seconds == 0.0 {
        let text = format!("{seconds:.1}");
        format!("{} s", text.strip_suffix(".0").unwrap_or(&text))
    } else {
        format!("{:.0} ms", seconds * 1000.0)
    }
}

/// An SVG document being drawn.
pub(crate) struct Svg {
    out: String,
}

impl Svg {
    pub(crate) fn new(width: f64, height: f64, title: &str) -> Svg {
        let mut out = String::new();
        let _ = write!(
            out,
            r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">
<title>{}</title>
<rect width="100%" height="100%" fill="#fff"/>
"##,
            escape(title)
        );
        Svg { out }
    }

    /// Text at (x, y); `attributes` may set its own fill, else it is drawn in ink.
    pub(crate) fn text(&mut self, x: f64, y: f64, attributes: &str, text: &str) {
        let fill = if attributes.contains("fill=") {
            String::new()
        } else {
            format!(r#" fill="{INK}""#)
        };
        let _ = writeln!(
            self.out,
            r#"<text x="{x:.1}" y="{y:.1}"{fill} {attributes}>{}</text>"#,
            escape(text)
        );
    }

    pub(crate) fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str) {
        let _ = writeln!(
            self.out,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}"/>"#
        );
    }

    /// A filled rectangle with a tooltip.
    pub(crate) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, style: &str, tip: &str) {
        let _ = write!(
            self.out,
            r#"<rect x="{x:.2}" y="{y:.2}" width="{:.2}" height="{:.2}" {style}>"#,
            w.max(0.0),
            h.max(0.0)
        );
        self.tip(tip);
        self.out.push_str("</rect>\n");
    }

    pub(crate) fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str, tip: &str) {
        let _ = write!(
            self.out,
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="{r}" fill="{fill}" stroke="#fff">"##
        );
        self.tip(tip);
        self.out.push_str("</circle>\n");
    }

    /// An open line through `points`.
    pub(crate) fn path(&mut self, points: &[(f64, f64)], stroke: &str, width: f64) {
        if points.is_empty() {
            return;
        }
        let mut d = String::new();
        for (i, (x, y)) in points.iter().enumerate() {
            let _ = write!(d, "{}{x:.1},{y:.1}", if i == 0 { "M" } else { " L" });
        }
        let _ = writeln!(
            self.out,
            r#"<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{width}" stroke-linejoin="round"/>"#
        );
    }

    fn tip(&mut self, tip: &str) {
        if !tip.is_empty() {
            let _ = write!(self.out, "<title>{}</title>", escape(tip));
        }
    }

    /// The heading: a title and a line under it.
    pub(crate) fn heading(&mut self, title: &str, subtitle: &str) {
        self.text(16.0, 24.0, r#"font-size="16" font-weight="bold""#, title);
        if !subtitle.is_empty() {
            self.text(16.0, 44.0, &format!(r#"fill="{FAINT}""#), subtitle);
        }
    }

    pub(crate) fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// A plot area: data coordinates (0..x_max, 0..y_max) mapped into a pixel box.
pub(crate) struct Frame {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    pub x_max: f64,
    pub y_max: f64,
}

impl Frame {
    pub(crate) fn x(&self, value: f64) -> f64 {
        self.left + self.width * (value / self.x_max.max(f64::MIN_POSITIVE)).clamp(0.0, 1.0)
    }

    pub(crate) fn y(&self, value: f64) -> f64 {
        self.top + self.height
            - self.height * (value / self.y_max.max(f64::MIN_POSITIVE)).clamp(0.0, 1.0)
    }

    /// Tick marks and labels below the area.
    pub(crate) fn x_ticks(&self, svg: &mut Svg, ticks: &[f64], label: impl Fn(f64) -> String) {
        let bottom = self.top + self.height;
        for &v in ticks {
            let x = self.x(v);
            svg.line((x, bottom), (x, bottom + 4.0), FAINT);
            svg.text(
                x,
                bottom + 17.0,
                &format!(r#"text-anchor="middle" fill="{FAINT}""#),
                &label(v),
            );
        }
    }

    /// Grid lines and labels: `y_ticks` on the left (named by `y_label`), `x_ticks` below.
    pub(crate) fn axes(
        &self,
        svg: &mut Svg,
        x_ticks: &[f64],
        x_label: impl Fn(f64) -> String,
        y_ticks: &[f64],
        y_label: impl Fn(f64) -> String,
    ) {
        for &v in y_ticks {
            let y = self.y(v);
            svg.line((self.left, y), (self.left + self.width, y), GRID);
            svg.text(
                self.left - 6.0,
                y + 4.0,
                &format!(r#"text-anchor="end" fill="{FAINT}""#),
                &y_label(v),
            );
        }
        self.x_ticks(svg, x_ticks, x_label);
        let bottom = self.top + self.height;
        svg.line((self.left, bottom), (self.left + self.width, bottom), FAINT);
        svg.line((self.left, self.top), (self.left, bottom), FAINT);
    }
}

/// Fails unless `svg` is well-formed XML (matched tags, no repeated attribute).
#[cfg(test)]
pub(crate) fn assert_well_formed(svg: &str) {
    let mut reader = quick_xml::Reader::from_str(svg);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e)) => {
                for attribute in e.attributes() {
                    attribute.unwrap_or_else(|err| panic!("{err} in {svg}"));
                }
            }
            Ok(_) => {}
            Err(err) => panic!("{err} at {} in {svg}", reader.buffer_position()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_reach_the_maximum() {
        assert_eq!(ticks(95.0, 5), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(3.0, 6), vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
        assert_eq!(ticks(0.0, 5), vec![0.0, 1.0]);
        assert_eq!(ticks(f64::NAN, 5), vec![0.0, 1.0]);
        let mib = 1024.0 * 1024.0;
        assert_eq!(
            byte_ticks(27.0 * mib, 3),
            vec![0.0, 10.0 * mib, 20.0 * mib, 30.0 * mib]
        );
        let big = ticks(123_456_789.0, 4);
        assert!(*big.last().unwrap() >= 123_456_789.0 && big.len() <= 6);
    }

    #[test]
    fn seconds_read_as_people_say_them() {
        assert_eq!(seconds_label(0.0), "0 s");
        assert_eq!(seconds_label(0.25), "250 ms");
        assert_eq!(seconds_label(2.0), "2 s");
        assert_eq!(seconds_label(2.5), "2.5 s");
        assert_eq!(seconds_label(125.0), "2 min 5 s");
        assert_eq!(seconds_label(180.0), "3 min");
    }
}
