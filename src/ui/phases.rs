//! Where a command's time goes: named instants since it started, for `--verbose`. Marks
//! cost a lock and a push; they are printed on stderr after the closing summary.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The instants a command's phases ended at, in order.
#[derive(Debug, Default)]
pub struct Phases {
    marks: Mutex<Vec<(&'static str, Instant)>>,
}

impl Phases {
    /// `phase` ended now.
    pub fn mark(&self, phase: &'static str) {
        if let Ok(mut marks) = self.marks.lock() {
            marks.push((phase, Instant::now()));
        }
    }

    /// Each phase with the time it took (from the mark before it) and the total; None when
    /// nothing was marked after the start.
    pub fn report(&self) -> Option<String> {
        let marks = self.marks.lock().ok()?;
        let (_, first) = *marks.first()?;
        if marks.len() < 2 {
            return None;
        }
        Some(format_phases(&marks, first, Instant::now()))
    }
}

fn format_phases(marks: &[(&'static str, Instant)], first: Instant, now: Instant) -> String {
    let ms = |d: Duration| d.as_millis();
    let mut out = String::from("time by phase:\n");
    for pair in marks.windows(2) {
        let ((_, before), (phase, at)) = (pair[0], pair[1]);
        out.push_str(&format!(
            "  {:>7} ms  {phase} (at {} ms)\n",
            ms(at - before),
            ms(at - first)
        ));
    }
    out.push_str(&format!("  {:>7} ms  in all\n", ms(now - first)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_is_the_time_since_the_mark_before_it() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let marks = [
            ("started", t0),
            ("target found", at(300)),
            ("window opened", at(450)),
        ];
        let text = format_phases(&marks, t0, at(500));
        assert!(
            text.contains("      300 ms  target found (at 300 ms)"),
            "{text}"
        );
        assert!(
            text.contains("      150 ms  window opened (at 450 ms)"),
            "{text}"
        );
        assert!(text.contains("      500 ms  in all"), "{text}");
    }
}
