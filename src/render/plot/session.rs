//! A session's closing table (`devprof profile`) as a picture: one row per container, its
//! CPU as a bar against the busiest, the figures `profile` prints, and the verdict as a
//! coloured label (its reason in the tooltip).

use super::{seconds_label, Svg, FAINT, GRID};
use crate::store::session::{SessionRecord, SessionRow};
use crate::text::truncate;
use crate::units::{human_bytes, thousands};

const WIDTH: f64 = 1000.0;
const ROW: f64 = 30.0;
const BAR: &str = "#2e86de";

/// The colour of a verdict's label, by its words.
fn verdict_colour(label: &str) -> &'static str {
    let label = label.to_ascii_lowercase();
    if label.contains("cpu") {
        "#c0392b"
    } else if label.contains("memory") {
        "#e67e22"
    } else if label.contains("i/o") || label.contains("wait") {
        "#2e86de"
    } else if label.contains("both") {
        "#8e44ad"
    } else {
        "#7f8c8d"
    }
}

fn growth_text(bytes: i64) -> String {
    let sign = if bytes < 0 { "-" } else { "+" };
    format!("{sign}{}", human_bytes(bytes.unsigned_abs()))
}

/// The picture of `record`'s table.
pub fn session_table(record: &SessionRecord) -> String {
    let rows = &record.rows;
    let top = 86.0;
    let height = top + ROW * rows.len().max(1) as f64 + 40.0;
    let title = format!(
        "session {}: {}",
        record.started_at.get(..19).unwrap_or(&record.started_at),
        record.targets
    );
    let subtitle = format!(
        "kinds {} · window {}{} · CPU: share of one core over the window",
        record.kinds.join(", "),
        seconds_label(record.duration_requested_s),
        if record.interrupted {
            " (stopped early)"
        } else {
            ""
        }
    );
    let mut svg = Svg::new(WIDTH, height, &title);
    svg.heading(&title, &subtitle);
    // Columns: container, CPU bar, samples, heap growth, off-CPU, verdict.
    let columns = [
        (16.0, "CONTAINER", ""),
        (250.0, "CPU", ""),
        (520.0, "SAMPLES", r#"text-anchor="end""#),
        (640.0, "HEAP GROWTH", r#"text-anchor="end""#),
        (740.0, "OFF-CPU", r#"text-anchor="end""#),
        (770.0, "VERDICT", ""),
    ];
    for (x, name, anchor) in columns {
        svg.text(
            x,
            top - 10.0,
            &format!(r#"font-weight="bold" fill="{FAINT}" {anchor}"#),
            name,
        );
    }
    let busiest = rows
        .iter()
        .filter_map(|r| r.cpu_cores)
        .fold(0.0, f64::max)
        .max(1.0);
    for (i, row) in rows.iter().enumerate() {
        let y = top + ROW * i as f64;
        draw_row(&mut svg, row, y, busiest);
    }
    if rows.is_empty() {
        svg.text(16.0, top + 20.0, &format!(r#"fill="{FAINT}""#), "no rows");
    }
    svg.finish()
}

fn draw_row(svg: &mut Svg, row: &SessionRow, y: f64, busiest: f64) {
    let middle = y + ROW / 2.0 + 4.0;
    svg.line((16.0, y + ROW), (WIDTH - 16.0, y + ROW), GRID);
    svg.text(16.0, middle, "", &truncate(&row.container, 32));
    if let Some(cores) = row.cpu_cores {
        let width = 180.0 * cores / busiest;
        svg.rect(
            250.0,
            y + 8.0,
            width,
            ROW - 16.0,
            &format!(r#"fill="{BAR}""#),
            &format!("{:.1}% of one core", cores * 100.0),
        );
        svg.text(
            250.0 + width + 6.0,
            middle,
            "",
            &format!("{:.0}%", cores * 100.0),
        );
    } else {
        svg.text(250.0, middle, &format!(r#"fill="{FAINT}""#), "-");
    }
    let cell = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let end = r#"text-anchor="end""#;
    svg.text(520.0, middle, end, &cell(row.samples.map(thousands)));
    svg.text(
        640.0,
        middle,
        end,
        &cell(row.heap_growth_bytes.map(growth_text)),
    );
    svg.text(
        740.0,
        middle,
        end,
        &cell(row.offcpu_s.map(|s| format!("{s:.2} thread-s"))),
    );
    match &row.verdict {
        Some(v) => {
            let label = v.bound.label();
            let colour = verdict_colour(label);
            let width = 14.0 + 7.5 * label.chars().count() as f64;
            svg.rect(
                770.0,
                y + 6.0,
                width,
                ROW - 12.0,
                &format!(r#"fill="{colour}" rx="4""#),
                &v.because,
            );
            svg.text(776.0, middle, r##"fill="#fff""##, label);
        }
        None => svg.text(770.0, middle, &format!(r#"fill="{FAINT}""#), "-"),
    }
    if !row.errors.is_empty() {
        let text = truncate(&row.errors.join("; "), 60);
        svg.text(
            WIDTH - 16.0,
            middle,
            r##"text-anchor="end" fill="#c0392b" font-size="11""##,
            &format!("⚠ {text}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::verdict::{judge, Measured};
    use crate::render::plot::escape;

    #[test]
    fn every_row_is_drawn_with_its_figures_and_verdict() {
        let verdict = judge(&Measured {
            cpu_cores: Some(0.9),
            window_s: 10.0,
            heap_growth_bytes: Some(0),
            offcpu_s: None,
            waits: None,
        });
        let row = |name: &str, cores: Option<f64>| SessionRow {
            container: name.into(),
            cpu_cores: cores,
            pid: Some(1),
            samples: Some(12_345),
            heap_growth_bytes: Some(-2048),
            offcpu_s: Some(1.5),
            verdict: verdict.clone(),
            errors: if cores.is_none() {
                vec!["cpu: <denied>".into()]
            } else {
                Vec::new()
            },
        };
        let record = SessionRecord {
            devprof_version: "0".into(),
            kind: "session".into(),
            created: "2026-11-23T10:00:00.000+00:00".into(),
            targets: "project demo".into(),
            kinds: vec!["cpu".into(), "heap".into()],
            duration_requested_s: 10.0,
            started_at: "2026-11-23T10:00:01.000+00:00".into(),
            interrupted: false,
            rows: vec![row("demo-seq", Some(0.9)), row("demo-<rpc>", None)],
            captures: Vec::new(),
            thresholds: String::new(),
            alignment: None,
            endpoints: Vec::new(),
        };
        let svg = session_table(&record);
        crate::render::plot::assert_well_formed(&svg);
        assert!(svg.contains(">demo-seq</text>") && svg.contains(">demo-&lt;rpc&gt;</text>"));
        assert_eq!(svg.matches(">12,345</text>").count(), 2);
        assert!(svg.contains(">-2.0 KiB</text>") && svg.contains(">1.50 thread-s</text>"));
        let label = verdict.as_ref().unwrap().bound.label();
        assert_eq!(
            svg.matches(&format!(">{}</text>", escape(label))).count(),
            2
        );
        assert!(svg.contains("cpu: &lt;denied&gt;") && !svg.contains("<denied>"));
    }
}
