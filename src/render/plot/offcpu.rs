//! Off-CPU plots: time off the CPU per thread over the window (one lane per thread, each
//! bar the share of its bucket the thread spent switched out), and I/O bandwidth over the
//! window (bytes returned by read and write syscalls, per second).

use super::{byte_ticks, seconds_label, ticks, Frame, Svg, FAINT, GRID};
use crate::profile::offcpu::series::OverTime;
use crate::profile::offcpu::summary::Summary;
use crate::store::{BANDWIDTH_PLOT, THREADS_PLOT};
use crate::text::truncate;
use crate::units::human_bytes;

const WIDTH: f64 = 960.0;
const LANE: f64 = 24.0;
const LABELS: f64 = 230.0;
const TOTALS: f64 = 110.0;
const OFF_CPU: &str = "#5b4bb7";
const READ: &str = "#2e86de";
const WRITTEN: &str = "#e67e22";

/// The plots an off-CPU capture has data for, each with the extension it is written under.
pub fn offcpu_plots(
    container: &str,
    summary: &Summary,
    over_time: &OverTime,
) -> Vec<(&'static str, String)> {
    let mut plots = Vec::new();
    if let Some(svg) = threads_over_time(container, summary, over_time) {
        plots.push((THREADS_PLOT, svg));
    }
    if let Some(svg) = bandwidth_over_time(container, summary, over_time) {
        plots.push((BANDWIDTH_PLOT, svg));
    }
    plots
}

fn bucket_s(over_time: &OverTime) -> f64 {
    over_time.bucket_ns as f64 / 1e9
}

/// Seconds-after-start ticks along `frame`'s x axis.
fn time_ticks(span_s: f64) -> Vec<f64> {
    ticks(span_s, 8)
        .into_iter()
        .filter(|t| *t <= span_s + 1e-9)
        .collect()
}

/// Off-CPU time per thread over the window; None without sched_switch (no off-CPU time).
pub fn threads_over_time(
    container: &str,
    summary: &Summary,
    over_time: &OverTime,
) -> Option<String> {
    let off = summary.off_cpu.as_ref()?;
    if over_time.buckets == 0 || over_time.threads.is_empty() {
        return None;
    }
    let mut lanes: Vec<(String, &[u64])> = over_time
        .threads
        .iter()
        .map(|t| {
            (
                format!("{} ({})", truncate(&t.comm, 24), t.tid),
                t.off_cpu_ns.as_slice(),
            )
        })
        .collect();
    if over_time.other_threads > 0 {
        lanes.push((
            format!("{} other threads", over_time.other_threads),
            over_time.other_off_cpu_ns.as_slice(),
        ));
    }
    let top = 64.0;
    let height = top + LANE * lanes.len() as f64 + 56.0;
    let title = format!("{container}: off-CPU time per thread");
    let subtitle = format!(
        "{:.2} s off the CPU in {} threads over a {:.1} s window · bar height: share of each {} the thread was switched out",
        off.total_us as f64 / 1e6,
        off.threads.len(),
        summary.window_s,
        seconds_label(bucket_s(over_time)),
    );
    let mut svg = Svg::new(WIDTH, height, &title);
    svg.heading(&title, &subtitle);
    let span_s = bucket_s(over_time) * over_time.buckets as f64;
    let frame = Frame {
        left: LABELS,
        top,
        width: WIDTH - LABELS - TOTALS,
        height: LANE * lanes.len() as f64,
        x_max: span_s,
        y_max: 1.0,
    };
    let bar = frame.width / over_time.buckets as f64;
    for (lane, (label, series)) in lanes.iter().enumerate() {
        let y = top + LANE * lane as f64;
        svg.line((LABELS, y + LANE), (LABELS + frame.width, y + LANE), GRID);
        svg.text(LABELS - 8.0, y + LANE - 8.0, r#"text-anchor="end""#, label);
        let total_ns: u64 = series.iter().sum();
        svg.text(
            LABELS + frame.width + 8.0,
            y + LANE - 8.0,
            "",
            &format!("{:.3} s", total_ns as f64 / 1e9),
        );
        for (i, ns) in series.iter().enumerate().filter(|(_, ns)| **ns > 0) {
            // The "other threads" lane can exceed one thread's bucket: cap at full height.
            let share = (*ns as f64 / over_time.bucket_ns as f64).min(1.0);
            let h = (LANE - 4.0) * share;
            let start = bucket_s(over_time) * i as f64;
            let tip = format!(
                "{label}\n{}–{}: {:.1} ms off-CPU",
                seconds_label(start),
                seconds_label(start + bucket_s(over_time)),
                *ns as f64 / 1e6
            );
            svg.rect(
                LABELS + bar * i as f64,
                y + LANE - 2.0 - h,
                bar.max(0.5),
                h,
                &format!(r#"fill="{OFF_CPU}""#),
                &tip,
            );
        }
    }
    frame.x_ticks(&mut svg, &time_ticks(span_s), seconds_label);
    svg.text(
        LABELS,
        height - 12.0,
        &format!(r#"fill="{FAINT}""#),
        "seconds after the first event · off-CPU: from sched_switch (switched out) to switch-in",
    );
    Some(svg.finish())
}

/// I/O bandwidth over the window; None when no read or write syscall returned.
pub fn bandwidth_over_time(
    container: &str,
    summary: &Summary,
    over_time: &OverTime,
) -> Option<String> {
    let bandwidth = summary.bandwidth.as_ref()?;
    if over_time.buckets == 0 {
        return None;
    }
    let per_s = |bytes: u64| bytes as f64 / bucket_s(over_time).max(f64::MIN_POSITIVE);
    let max = over_time
        .read_bytes
        .iter()
        .chain(&over_time.written_bytes)
        .map(|b| per_s(*b))
        .fold(0.0, f64::max);
    const HEIGHT: f64 = 400.0;
    let title = format!("{container}: I/O bandwidth");
    let subtitle = format!(
        "read {} ({}/s), written {} ({}/s) over {:.1} s · bytes returned by read/write syscalls, per {}",
        human_bytes(bandwidth.read.bytes),
        human_bytes(bandwidth.read_bytes_per_s as u64),
        human_bytes(bandwidth.written.bytes),
        human_bytes(bandwidth.write_bytes_per_s as u64),
        summary.window_s,
        seconds_label(bucket_s(over_time)),
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, &title);
    svg.heading(&title, &subtitle);
    let span_s = bucket_s(over_time) * over_time.buckets as f64;
    let y_ticks = byte_ticks(max * 1.05, 5);
    let frame = Frame {
        left: 100.0,
        top: 70.0,
        width: WIDTH - 130.0,
        height: HEIGHT - 130.0,
        x_max: span_s,
        y_max: *y_ticks.last().unwrap_or(&1.0),
    };
    frame.axes(
        &mut svg,
        &time_ticks(span_s),
        seconds_label,
        &y_ticks,
        |v| format!("{}/s", human_bytes(v as u64)),
    );
    // Read under written, wider and lighter, so that equal rates show both.
    for (series, colour, name, width) in [
        (&over_time.read_bytes, READ, "read", 3.5),
        (&over_time.written_bytes, WRITTEN, "written", 1.5),
    ] {
        // A step line: each bucket's rate holds over the whole bucket.
        let mut points = Vec::with_capacity(series.len() * 2);
        for (i, bytes) in series.iter().enumerate() {
            let y = frame.y(per_s(*bytes));
            points.push((frame.x(bucket_s(over_time) * i as f64), y));
            points.push((frame.x(bucket_s(over_time) * (i + 1) as f64), y));
        }
        svg.path(&points, colour, width);
        for (i, bytes) in series.iter().enumerate().filter(|(_, b)| **b > 0) {
            let start = bucket_s(over_time) * i as f64;
            let x = frame.x(start);
            let tip = format!(
                "{name} {}–{}: {} ({}/s)",
                seconds_label(start),
                seconds_label(start + bucket_s(over_time)),
                human_bytes(*bytes),
                human_bytes(per_s(*bytes) as u64)
            );
            let w = frame.x(start + bucket_s(over_time)) - x;
            let y = frame.y(per_s(*bytes));
            svg.rect(x, y - 3.0, w, 6.0, r#"fill="transparent""#, &tip);
        }
    }
    let legend_y = HEIGHT - 14.0;
    for (i, (colour, name)) in [(READ, "read"), (WRITTEN, "written")].iter().enumerate() {
        let x = frame.left + 110.0 * i as f64;
        svg.rect(
            x,
            legend_y - 9.0,
            14.0,
            4.0,
            &format!(r#"fill="{colour}""#),
            "",
        );
        svg.text(x + 20.0, legend_y, "", name);
    }
    svg.text(
        frame.left + 240.0,
        legend_y,
        &format!(r#"fill="{FAINT}""#),
        "seconds after the first event",
    );
    Some(svg.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::offcpu::series::SeriesBuilder;
    use crate::profile::offcpu::summary::{Aggregator, Mode};
    use std::collections::HashMap;

    /// A real off-CPU recording (contextswitches config on demo-seq), summarized as a
    /// capture summarizes it.
    fn real(data: &str) -> (Summary, OverTime) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(data);
        let mut aggregator = Aggregator::new(Mode::Fast);
        crate::profile::perfdata::for_each_record(&path, |r| aggregator.add(r)).unwrap();
        let outcome = aggregator.finish(3.0, None);
        (outcome.summary, outcome.over_time)
    }

    #[test]
    fn a_real_contextswitches_capture_plots_its_threads_and_no_bandwidth() {
        let (summary, over_time) = real("tests/data/offcpu-contextswitches.data");
        let plots = offcpu_plots("demo-seq", &summary, &over_time);
        let names: Vec<&str> = plots.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, vec![THREADS_PLOT]);
        let svg = &plots[0].1;
        crate::render::plot::assert_well_formed(svg);
        let off = summary.off_cpu.as_ref().unwrap();
        // Every plotted thread has its lane; the total printed matches the summary's.
        let plotted: u64 = over_time.threads.iter().flat_map(|t| &t.off_cpu_ns).sum();
        let other: u64 = over_time.other_off_cpu_ns.iter().sum();
        let summed_us = (plotted + other) / 1000;
        assert!(summed_us.abs_diff(off.total_us) <= off.threads.len() as u64);
        for t in &over_time.threads {
            assert!(svg.contains(&format!("({})</text>", t.tid)));
        }
        assert!(svg.contains(&format!("{:.2} s off the CPU", off.total_us as f64 / 1e6)));
    }

    #[test]
    fn a_real_iobandwidth_capture_plots_its_bytes_over_time() {
        let (summary, over_time) = real("tests/data/offcpu-iobandwidth.data");
        let bandwidth = summary.bandwidth.as_ref().unwrap();
        let read: u64 = over_time.read_bytes.iter().sum();
        let written: u64 = over_time.written_bytes.iter().sum();
        assert_eq!(
            (read, written),
            (bandwidth.read.bytes, bandwidth.written.bytes)
        );
        let svg = bandwidth_over_time("demo-seq", &summary, &over_time).unwrap();
        crate::render::plot::assert_well_formed(&svg);
        assert!(svg.contains(&format!("written {}", human_bytes(bandwidth.written.bytes))));
    }

    #[test]
    fn thread_names_from_the_container_are_escaped() {
        let mut series = SeriesBuilder::default();
        series.see(0);
        series.add_off_cpu(9, 0, 5_000_000);
        let names = HashMap::from([(9, "<b>&evil".to_string())]);
        let over_time = series.finish(&names);
        let summary = Summary {
            mode: Mode::Fast,
            window_s: 1.0,
            total_events: 1,
            counts: Default::default(),
            groups: Vec::new(),
            off_cpu: Some(crate::profile::offcpu::summary::OffCpuTime {
                total_us: 5000,
                threads: Vec::new(),
            }),
            bandwidth: None,
            lost_chunks: None,
        };
        let svg = threads_over_time("c", &summary, &over_time).unwrap();
        crate::render::plot::assert_well_formed(&svg);
        assert!(svg.contains("&lt;b&gt;&amp;evil (9)"));
        assert!(!svg.contains("<b>"));
    }
}
