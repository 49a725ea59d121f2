//! Checking a config's events against what the container's kernel and perf offer, before
//! the capture window opens.

/// perf's software events (`perf list sw`), with their aliases.
pub const SOFTWARE_EVENTS: &[&str] = &[
    "cpu-clock",
    "task-clock",
    "page-faults",
    "faults",
    "context-switches",
    "cs",
    "cpu-migrations",
    "migrations",
    "minor-faults",
    "major-faults",
    "alignment-faults",
    "emulation-faults",
    "dummy",
    "bpf-output",
    "cgroup-switches",
];

/// Hardware events; whether the CPU counts them is only known by trying.
pub const HARDWARE_EVENTS: &[&str] = &[
    "cycles",
    "cpu-cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branch-instructions",
    "branches",
    "branch-misses",
    "bus-cycles",
    "ref-cycles",
];

/// Tracepoints that exist only from a kernel version on: a kernel that lacks one is not a
/// user error, so the event is skipped with a warning.
pub const VERSIONED_TRACEPOINTS: &[(&str, (u32, u32))] = &[
    ("syscalls:sys_enter_futex_waitv", (5, 16)),
    ("syscalls:sys_exit_futex_waitv", (5, 16)),
    ("syscalls:sys_enter_futex_wait", (6, 7)),
    ("syscalls:sys_exit_futex_wait", (6, 7)),
    ("syscalls:sys_enter_futex_wake", (6, 7)),
    ("syscalls:sys_exit_futex_wake", (6, 7)),
    ("syscalls:sys_enter_futex_requeue", (6, 7)),
    ("syscalls:sys_exit_futex_requeue", (6, 7)),
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckedEvents {
    pub events: Vec<String>,
    /// Events left out, each with why.
    pub skipped: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventProblem {
    Unknown {
        event: String,
        suggestion: Option<String>,
    },
    NoneLeft {
        skipped: Vec<(String, String)>,
    },
}

/// Sorts `wanted` into usable, skipped (the kernel is too old or lacks it) and unknown.
/// `tracepoints` are the `system:name` entries of the container's tracefs.
pub fn check_events(
    wanted: &[String],
    tracepoints: &[String],
    kernel: (u32, u32),
) -> Result<CheckedEvents, EventProblem> {
    let mut events = Vec::new();
    let mut skipped = Vec::new();
    for event in wanted {
        let (base, _modifier) = split_modifier(event);
        let known_here = if base.contains(':') {
            tracepoints.iter().any(|t| t == base)
        } else {
            SOFTWARE_EVENTS.contains(&base) || HARDWARE_EVENTS.contains(&base)
        };
        if known_here {
            events.push(event.clone());
            continue;
        }
        if let Some((_, since)) = VERSIONED_TRACEPOINTS.iter().find(|(name, _)| *name == base) {
            let why = if kernel < *since {
                format!(
                    "needs kernel {}.{} or newer; this one is {}.{}",
                    since.0, since.1, kernel.0, kernel.1
                )
            } else {
                "this kernel does not provide it (syscall tracepoints compiled out?)".to_string()
            };
            skipped.push((event.clone(), why));
            continue;
        }
        return Err(EventProblem::Unknown {
            event: event.clone(),
            suggestion: closest(base, tracepoints),
        });
    }
    if events.is_empty() {
        return Err(EventProblem::NoneLeft { skipped });
    }
    Ok(CheckedEvents { events, skipped })
}

/// `major-faults:u` -> (`major-faults`, `u`); tracepoints keep their colon.
fn split_modifier(event: &str) -> (&str, &str) {
    if let Some((base, modifier)) = event.rsplit_once(':') {
        let is_modifier = !modifier.is_empty() && modifier.chars().all(|c| "ukhGHpPS".contains(c));
        let known_base = base.matches(':').count() == 1
            || SOFTWARE_EVENTS.contains(&base)
            || HARDWARE_EVENTS.contains(&base);
        if is_modifier && !base.is_empty() && known_base {
            return (base, modifier);
        }
    }
    (event, "")
}

/// The real event nearest to a misspelt one.
pub fn closest(event: &str, tracepoints: &[String]) -> Option<String> {
    let candidates = SOFTWARE_EVENTS
        .iter()
        .chain(HARDWARE_EVENTS)
        .map(|s| s.to_string())
        .chain(tracepoints.iter().cloned());
    candidates
        .map(|c| (edit_distance(event, &c), c))
        .filter(|(d, c)| *d <= (c.len().max(event.len()) / 2).max(2))
        .min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)))
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j] + cost)
                    .min(previous[j + 1] + 1)
                    .min(current[j] + 1),
            );
        }
        previous = current;
    }
    previous[b.len()]
}

/// `5.15.0-91-generic` -> (5, 15).
pub fn kernel_version(release: &str) -> (u32, u32) {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty());
    let major = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor)
}

/// Whether an event is a tracepoint (`system:name`), not an event with a modifier
/// (`cycles:u`).
pub fn is_tracepoint(event: &str) -> bool {
    event.contains(':') && perf_event_name(event) == event
}

/// How perf prints an event in `perf script`: without a `:u`/`:k` modifier.
pub fn perf_event_name(event: &str) -> String {
    match event.rsplit_once(':') {
        Some((base, modifier))
            if !modifier.is_empty()
                && modifier.chars().all(|c| "ukhGHpPS".contains(c))
                && !base.is_empty() =>
        {
            base.to_string()
        }
        _ => event.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracepoints() -> Vec<String> {
        [
            "syscalls:sys_enter_futex",
            "syscalls:sys_exit_futex",
            "sched:sched_switch",
            "syscalls:sys_enter_fsync",
            "block:block_rq_issue",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn owned(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn unknown_event_is_named_with_the_closest_real_one() {
        let err =
            check_events(&owned(&["sched:sched_swich"]), &tracepoints(), (6, 18)).unwrap_err();
        assert_eq!(
            err,
            EventProblem::Unknown {
                event: "sched:sched_swich".into(),
                suggestion: Some("sched:sched_switch".into())
            }
        );
        let err = check_events(&owned(&["major-fault"]), &tracepoints(), (6, 18)).unwrap_err();
        assert!(
            matches!(err, EventProblem::Unknown { suggestion: Some(ref s), .. } if s == "major-faults")
        );
    }

    #[test]
    fn events_newer_than_the_kernel_are_skipped_with_a_reason() {
        let checked = check_events(
            &owned(&[
                "syscalls:sys_enter_futex",
                "syscalls:sys_enter_futex_waitv",
                "syscalls:sys_enter_futex_wait",
            ]),
            &tracepoints(),
            (5, 15),
        )
        .unwrap();
        assert_eq!(checked.events, vec!["syscalls:sys_enter_futex"]);
        assert_eq!(checked.skipped.len(), 2);
        assert!(checked.skipped[0].1.contains("5.16"));
        assert!(checked.skipped[1].1.contains("6.7"));
    }

    #[test]
    fn nothing_left_is_an_error() {
        let err = check_events(
            &owned(&["syscalls:sys_enter_futex_waitv"]),
            &tracepoints(),
            (5, 10),
        )
        .unwrap_err();
        assert!(matches!(err, EventProblem::NoneLeft { ref skipped } if skipped.len() == 1));
    }

    #[test]
    fn software_events_and_modifiers_pass() {
        let checked = check_events(
            &owned(&["major-faults", "minor-faults:u", "sched:sched_switch"]),
            &tracepoints(),
            (6, 18),
        )
        .unwrap();
        assert_eq!(checked.events.len(), 3);
    }

    #[test]
    fn reads_kernel_versions() {
        assert_eq!(kernel_version("6.18.44-fc-v595"), (6, 18));
        assert_eq!(kernel_version("5.15.0-91-generic"), (5, 15));
    }
}
