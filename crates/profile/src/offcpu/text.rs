//! The off-CPU summary for people, as printed and saved to `offcpu-….txt`.

use super::summary::{IoStat, Mode, Summary};
use devprof_base::units::human_bytes;
use std::fmt::Write as _;

/// The human summary, as printed and saved to `offcpu-….txt`.
pub fn render_text(summary: &Summary, header: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}");
    let _ = writeln!(
        out,
        "mode: {} · window {:.1} s · {} events",
        match summary.mode {
            Mode::Full => "full (stacks symbolized)",
            Mode::Fast => "fast (no stacks or symbols; --full forces them)",
        },
        summary.window_s,
        summary.total_events
    );
    if let Some(lost) = summary.lost_chunks {
        let _ = writeln!(out, "lost: perf reports {lost} lost chunks of events (raise the ring buffer, or record fewer events)");
    }
    let _ = writeln!(out, "\nevents (exact counts):");
    for (event, count) in &summary.counts {
        let _ = writeln!(out, "  {count:>10}  {event}");
    }
    for group in &summary.groups {
        let _ = writeln!(out, "\n{}: {}", group.title, group.reading);
        for (stack, count) in &group.top_stacks {
            let _ = writeln!(out, "  {count:>8}  {stack}");
        }
    }
    if let Some(off) = &summary.off_cpu {
        let _ = writeln!(
            out,
            "\noff-CPU time per thread (switch-out to switch-in; window {:.1} s):",
            summary.window_s
        );
        for t in off.threads.iter().take(20) {
            let _ = writeln!(
                out,
                "  {:>10.3} s  {:>6} switches  {} (tid {})",
                t.off_cpu_us as f64 / 1e6,
                t.switches,
                t.comm,
                t.tid
            );
        }
        if off.threads.len() > 20 {
            let _ = writeln!(out, "  … {} more threads", off.threads.len() - 20);
        }
    }
    if let Some(b) = &summary.bandwidth {
        let avg = |s: &IoStat| {
            if s.completed > s.errors {
                s.bytes / (s.completed - s.errors)
            } else {
                0
            }
        };
        let _ = writeln!(out, "\nI/O bandwidth (bytes from syscall return values):");
        let _ = writeln!(
            out,
            "  read:    {} calls, {}, avg {} per call, {}/s",
            b.read.calls,
            human_bytes(b.read.bytes),
            human_bytes(avg(&b.read)),
            human_bytes(b.read_bytes_per_s as u64)
        );
        let _ = writeln!(
            out,
            "  written: {} calls, {}, avg {} per call, {}/s",
            b.written.calls,
            human_bytes(b.written.bytes),
            human_bytes(avg(&b.written)),
            human_bytes(b.write_bytes_per_s as u64)
        );
        let _ = writeln!(out, "  top functions by bytes:");
        for (f, bytes, calls) in &b.top_by_bytes {
            let _ = writeln!(
                out,
                "    {:>10}  {calls:>8} calls  {f}",
                human_bytes(*bytes)
            );
        }
        let _ = writeln!(out, "  top functions by calls:");
        for (f, bytes, calls) in &b.top_by_calls {
            let _ = writeln!(
                out,
                "    {calls:>8} calls  {:>10}  {f}",
                human_bytes(*bytes)
            );
        }
    }
    out
}
