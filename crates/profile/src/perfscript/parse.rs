//! The lines of `perf script` output, parsed without copying: an event line opens a sample
//! (`comm pid/tid [cpu] time: [period] event: [frame]`), stack lines follow it (`pc symbol
//! (module)`, leaf first), a blank line ends it. The rules follow perf's own output and
//! inferno's reading of it, so that what devprof folds is what the FlameGraph tools fold.

/// The event line of one sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine<'a> {
    /// The thread's name as perf reports it (may contain spaces).
    pub comm: &'a str,
    /// None when perf printed only a tid.
    pub pid: Option<u32>,
    pub tid: u32,
    /// The sample's time in nanoseconds of perf's clock, when printed.
    pub time_ns: Option<u64>,
    pub event: &'a str,
    /// The sample's period, when printed (`-F period`); a sample counts once otherwise.
    pub period: Option<u64>,
    /// A frame printed on the event line itself (single-frame stacks).
    pub inline_frame: Option<&'a str>,
}

/// One stack line: program counter, symbol (`[unknown]` when perf has none) and module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackLine<'a> {
    pub pc: &'a str,
    pub symbol: &'a str,
    pub module: &'a str,
}

impl StackLine<'_> {
    /// The program counter as a number (perf prints hex without `0x`).
    pub fn address(&self) -> Option<u64> {
        u64::from_str_radix(self.pc.strip_prefix("0x").unwrap_or(self.pc), 16).ok()
    }
}

/// perf pads a thread name (at most 15 bytes) to 16 columns and the pid to 7: the real
/// `pid/tid` (or `tid`) word starts within this many bytes of the line.
const IDS_REACH: usize = 32;

/// Finds the `pid/tid` (or `tid`) word of an event line: a word made only of digits and at
/// most one slash, after the comm. The comm is data: a thread may call itself `x 1/2 3.4:`,
/// so where words shaped like the ids are followed by a time (`[cpu] 1085.94:`), the last
/// of them within perf's reach is taken, else the first such word (lines without times).
/// Returns (comm, pid, tid, index after the word).
fn split_comm_and_ids(line: &str) -> Option<(&str, Option<u32>, u32, usize)> {
    let mut first = None;
    let mut timed = None;
    for (start, end) in words(line) {
        if start == 0 || end == line.len() {
            continue; // the comm comes first; the ids word is followed by more
        }
        if first.is_some() && start > IDS_REACH {
            break;
        }
        let Some((pid, tid)) = ids_word(&line[start..end]) else {
            continue;
        };
        let candidate = (start, pid, tid, end);
        first.get_or_insert(candidate);
        if start <= IDS_REACH && followed_by_time(&line[end..]) {
            timed = Some(candidate);
        }
    }
    let (start, pid, tid, end) = timed.or(first)?;
    Some((line[..start].trim(), pid, tid, end + 1))
}

/// The byte ranges of the words of `line`, split at ASCII spaces.
fn words(line: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = line.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() && bytes[at] == b' ' {
            at += 1;
        }
        if at >= bytes.len() {
            return None;
        }
        let start = at;
        while at < bytes.len() && bytes[at] != b' ' {
            at += 1;
        }
        Some((start, at))
    })
}

/// `pid/tid`, `/tid` or `tid`: digits with at most one slash; the tid must be there.
fn ids_word(word: &str) -> Option<(Option<u32>, u32)> {
    if !word.bytes().all(|b| b.is_ascii_digit() || b == b'/') {
        return None;
    }
    match word.split_once('/') {
        Some((pid, tid)) => Some((pid.parse().ok(), tid.parse().ok()?)),
        None => Some((None, word.parse().ok()?)),
    }
}

/// Whether `rest` (after an ids word) goes on with `[cpu]` and/or a time and its colon.
fn followed_by_time(rest: &str) -> bool {
    let mut words = rest.split(' ').filter(|w| !w.is_empty());
    let mut word = words.next();
    if word.is_some_and(|w| w.starts_with('[') && w.ends_with(']')) {
        word = words.next();
    }
    word.and_then(|w| w.strip_suffix(':')).is_some_and(|time| {
        time.contains('.') && time.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    })
}

/// `1085.945746` -> nanoseconds.
fn parse_time(text: &str) -> Option<u64> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    let secs: u64 = secs.parse().ok()?;
    if frac.len() > 9 || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut nanos: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..9 {
        nanos *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Parses an event line; None when the line is not one.
pub fn event_line(line: &str) -> Option<EventLine<'_>> {
    let (comm, pid, tid, end) = split_comm_and_ids(line)?;
    let rest = &line[end..];
    // `[cpu] time:` when perf prints the time, then `[period] event: [payload or frame]`.
    let (head, tail) = rest.split_once(':')?;
    let time_word = head.trim().rsplit(' ').next().unwrap_or("");
    let (time_ns, tail) = match parse_time(time_word) {
        Some(t) if time_word.contains('.') => (Some(t), tail),
        _ => (None, rest),
    };
    // The event ends at the first colon followed by a blank or the end of the line: event
    // names hold colons themselves (`sched:sched_switch`, `cycles:u`).
    let bytes = tail.as_bytes();
    let end_of_event = (0..bytes.len()).find(|&i| {
        bytes[i] == b':' && bytes.get(i + 1).is_none_or(|c| *c == b' ' || *c == b'\t')
    })?;
    let (period_and_event, after) = (&tail[..end_of_event], &tail[end_of_event + 1..]);
    let mut words = period_and_event.split_whitespace().rev();
    let event = strip_modifiers(words.next()?);
    let period = words.next().and_then(|w| w.parse().ok());
    let after = after.trim();
    let inline_frame = (!after.is_empty()).then_some(after);
    Some(EventLine {
        comm,
        pid,
        tid,
        time_ns,
        event,
        period,
        inline_frame,
    })
}

/// `cycles:u` -> `cycles`: an event's modifiers are not part of its name.
fn strip_modifiers(event: &str) -> &str {
    match event.rsplit_once(':') {
        Some((base, modifiers))
            if !base.is_empty()
                && !modifiers.is_empty()
                && modifiers.chars().all(|c| "ukhGHpPSDIW".contains(c)) =>
        {
            base
        }
        _ => event,
    }
}

/// Parses a stack line; None when the line is not one (a hex address first, `(module)`
/// at the end).
pub fn stack_line(line: &str) -> Option<StackLine<'_>> {
    let mut split = line.trim_start().splitn(2, ' ');
    let pc = split.next()?.trim_end();
    let digits = pc.strip_prefix("0x").unwrap_or(pc);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut rest = split.next()?.rsplitn(2, ' ');
    let module = rest.next()?;
    let module = module.strip_prefix('(')?.strip_suffix(')')?;
    let symbol = match rest.next()?.trim() {
        // Two spaces between the pc and the module: perf printed no symbol at all.
        "" => " ",
        s => s,
    };
    Some(StackLine { pc, symbol, module })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_event_lines_perf_prints() {
        let e = event_line("state_lookup     7/10     1085.945746: cpu-clock: ").unwrap();
        assert_eq!(
            (e.comm, e.pid, e.tid, e.time_ns, e.event),
            (
                "state_lookup",
                Some(7),
                10,
                Some(1_085_945_746_000),
                "cpu-clock"
            )
        );
        assert_eq!(e.inline_frame, None);
        let e = event_line("V8 WorkerThread 24636/25607 [000] 94564.109216: cycles:").unwrap();
        assert_eq!(
            (e.comm, e.pid, e.tid),
            ("V8 WorkerThread", Some(24636), 25607)
        );
        assert_eq!(e.event, "cycles");
        let e = event_line("vote   913    72.176760:     257597 cycles:uppp:").unwrap();
        assert_eq!((e.tid, e.period, e.event), (913, Some(257597), "cycles"));
        assert_eq!(e.inline_frame, None);
        let e = event_line(
            "false 64414 20110.539270:      34467 cycles:u:  ffffffff9aa3c8de [unknown] ([unknown])",
        )
        .unwrap();
        assert_eq!(
            e.inline_frame,
            Some("ffffffff9aa3c8de [unknown] ([unknown])")
        );
        let e = event_line(
            "alloc_blocks     7/17     1802.202941:            sched:sched_switch: prev_comm=alloc_blocks prev_pid=31583",
        )
        .unwrap();
        assert_eq!(e.event, "sched:sched_switch");
        assert!(e.inline_frame.is_some_and(|f| stack_line(f).is_none()));
        let e = event_line("java 12688 [002] 6544038.708352: cpu-clock:").unwrap();
        assert_eq!((e.pid, e.tid), (None, 12688));
        assert!(event_line("\t  3877c demo_node::x (/bin/x)").is_none());
        assert!(event_line("not an event").is_none());
    }

    /// Regression: the first digits/digits word was taken for the ids, so a thread named
    /// like the columns gave its samples to another process and thread.
    #[test]
    fn a_thread_named_like_the_columns_does_not_choose_its_pid_and_tid() {
        for (line, comm) in [
            ("x 1/2 y    7/10     1085.945746: cpu-clock: ", "x 1/2 y"),
            (
                "x 1/2 3.4:    7/10     1085.945746: cpu-clock: ",
                "x 1/2 3.4:",
            ),
            (
                "     9/9 [1] 2.0:    7/10 [000] 1085.945746: cpu-clock:",
                "9/9 [1] 2.0:",
            ),
            ("123    7/10     1085.945746: cpu-clock: ", "123"),
        ] {
            let e = event_line(line).unwrap();
            assert_eq!(
                (e.comm, e.pid, e.tid, e.time_ns),
                (comm, Some(7), 10, Some(1_085_945_746_000)),
                "{line}"
            );
            assert_eq!(e.event, "cpu-clock", "{line}");
        }
        // Without times there is nothing to tell them apart by: the first word still wins,
        // as before, and nothing panics.
        let e = event_line("x 1 y 7 cycles: ").unwrap();
        assert_eq!((e.comm, e.tid), ("x", 1));
    }

    #[test]
    fn reads_stack_lines_with_and_without_symbols() {
        let s = stack_line(
            "\t           3877c demo_node::workloads::state_lookup (/usr/local/bin/demo-node)",
        )
        .unwrap();
        assert_eq!(s.symbol, "demo_node::workloads::state_lookup");
        assert_eq!(s.module, "/usr/local/bin/demo-node");
        assert_eq!(s.address(), Some(0x3877c));
        let s = stack_line("\t7f1e2215d058  (/lib/x86_64-linux-gnu/libc-2.15.so)").unwrap();
        assert_eq!(s.symbol, " ");
        let s = stack_line("\t7f53389994d0 [unknown] ([unknown])").unwrap();
        assert_eq!((s.symbol, s.module), ("[unknown]", "[unknown]"));
        assert!(stack_line("garbage").is_none());
        assert!(stack_line("\tabc def").is_none());
    }

    #[test]
    fn times_are_nanoseconds() {
        assert_eq!(parse_time("1.5"), Some(1_500_000_000));
        assert_eq!(parse_time("0.000000001"), Some(1));
        assert_eq!(parse_time("x"), None);
        assert_eq!(parse_time("99999999999999999999.1"), None);
    }
}
