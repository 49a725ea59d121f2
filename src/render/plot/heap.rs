//! The heap over time: one point per dump, at its modification time, at its header total.

use super::{byte_ticks, seconds_label, ticks, Frame, Svg, FAINT};
use crate::store::Manifest;
use crate::units::human_bytes;
use chrono::{Local, TimeZone};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 380.0;
const LINE: &str = "#c0392b";

/// The plot of a heap capture's dump totals, or None with fewer than two dumps (one point
/// is no trend; the report already says it).
pub fn heap_over_time(manifest: &Manifest) -> Option<String> {
    let heap = manifest.heap.as_ref()?;
    let dumps = &heap.dump_totals;
    if dumps.len() < 2 {
        return None;
    }
    let first_time = dumps.iter().map(|d| d.mtime).min()?;
    let span = dumps.iter().map(|d| d.mtime).max()? - first_time;
    // Dumps written within the same second have no spread in time: space them evenly.
    let by_time = span > 0;
    let x_of = |i: usize, mtime: i64| {
        if by_time {
            (mtime - first_time) as f64
        } else {
            i as f64
        }
    };
    let (first, last) = (dumps.first()?, dumps.last()?);
    let change = last.bytes as i64 - first.bytes as i64;
    let change_text = format!(
        "{}{}",
        if change >= 0 { "+" } else { "-" },
        human_bytes(change.unsigned_abs())
    );
    let title = format!(
        "{}: heap {} per dump",
        manifest.container.name, heap.measure
    );
    let subtitle = format!(
        "{} dumps over {} · {} → {} ({change_text}) · jemalloc header totals (t*:), unbiased",
        dumps.len(),
        seconds_label(span as f64),
        human_bytes(first.bytes),
        human_bytes(last.bytes),
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, &title);
    svg.heading(&title, &subtitle);
    let max_bytes = dumps.iter().map(|d| d.bytes).max().unwrap_or(0) as f64;
    let y_ticks = byte_ticks(max_bytes * 1.05, 5);
    let x_max = if by_time {
        span as f64
    } else {
        (dumps.len() - 1) as f64
    };
    let frame = Frame {
        left: 90.0,
        top: 64.0,
        width: WIDTH - 120.0,
        height: HEIGHT - 120.0,
        x_max,
        y_max: *y_ticks.last().unwrap_or(&1.0),
    };
    let x_ticks: Vec<f64> = if by_time {
        ticks(x_max, 8)
            .into_iter()
            .filter(|t| *t <= x_max)
            .collect()
    } else {
        (0..dumps.len()).map(|i| i as f64).collect()
    };
    frame.axes(
        &mut svg,
        &x_ticks,
        |v| {
            if by_time {
                seconds_label(v)
            } else {
                format!("dump {}", v as usize + 1)
            }
        },
        &y_ticks,
        |v| human_bytes(v as u64),
    );
    let points: Vec<(f64, f64)> = dumps
        .iter()
        .enumerate()
        .map(|(i, d)| (frame.x(x_of(i, d.mtime)), frame.y(d.bytes as f64)))
        .collect();
    svg.path(&points, LINE, 2.0);
    for (d, (x, y)) in dumps.iter().zip(&points) {
        let when = Local
            .timestamp_opt(d.mtime, 0)
            .single()
            .map(|t| t.format("%H:%M:%S").to_string())
            .unwrap_or_default();
        let tip = format!(
            "{}\n{when}\n{} ({} bytes), {} objects",
            d.name,
            human_bytes(d.bytes),
            d.bytes,
            d.objects
        );
        svg.circle(*x, *y, 4.5, LINE, &tip);
    }
    let start = Local
        .timestamp_opt(first_time, 0)
        .single()
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default();
    svg.text(
        frame.left,
        HEIGHT - 12.0,
        &format!(r#"fill="{FAINT}""#),
        &if by_time {
            format!("seconds after the first dump ({start}, the dump file's time in the container)")
        } else {
            format!("dumps in the order written (all within one second, {start})")
        },
    );
    Some(svg.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::heap::{DumpTotal, HeapRecord};

    fn manifest(totals: &[(i64, u64)]) -> Manifest {
        Manifest {
            container: crate::store::ContainerRecord {
                name: "demo-seq".into(),
                ..Default::default()
            },
            heap: Some(HeapRecord {
                measure: "in-use".into(),
                dump_totals: totals
                    .iter()
                    .enumerate()
                    .map(|(i, (mtime, bytes))| DumpTotal {
                        name: format!("jeprof.<1>.{i}.u{i}.heap"),
                        mtime: *mtime,
                        bytes: *bytes,
                        objects: 3,
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn one_point_per_dump_with_its_figures_escaped() {
        let svg = heap_over_time(&manifest(&[
            (1_700_000_000, 10 << 20),
            (1_700_000_004, 12 << 20),
            (1_700_000_009, 30 << 20),
        ]))
        .unwrap();
        crate::render::plot::assert_well_formed(&svg);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("jeprof.&lt;1&gt;.2.u2.heap"));
        assert!(!svg.contains("<1>"));
        assert!(svg.contains("10.0 MiB → 30.0 MiB (+20.0 MiB)"));
        assert!(svg.contains("over 9 s"));
    }

    #[test]
    fn dumps_of_the_same_second_are_spaced_evenly() {
        let svg = heap_over_time(&manifest(&[(5, 100), (5, 50)])).unwrap();
        assert!(svg.contains("dump 2") && svg.contains("(-50 B)"));
    }

    #[test]
    fn fewer_than_two_dumps_draw_nothing() {
        assert!(heap_over_time(&manifest(&[(5, 100)])).is_none());
        assert!(heap_over_time(&Manifest::default()).is_none());
    }
}
