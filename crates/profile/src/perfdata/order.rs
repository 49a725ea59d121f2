//! Decoded events held until perf's round markers say they are complete, then sent on
//! sorted by time, in bounded memory. As perf's ordered events do: a round ends at a
//! FINISHED_ROUND record, and past the memory budget the earlier half is sent on.

use super::header::*;
use super::{decode, unwind, Event, Layout, Wanted};
use std::borrow::Cow;
use std::io;

/// Memory the decoded events waiting for their round may hold: past it, the earlier half
/// goes out in order, as perf's ordered events flush half of their queue when it outgrows
/// its memory.
pub(super) const MAX_HELD_BYTES: usize = 256 << 20;

impl Event<'_> {
    /// The memory it holds while it waits for its round, as `MAX_HELD_BYTES` counts it
    /// (a stack borrowed from the mapped file is not held).
    fn held_bytes(&self) -> usize {
        let owned = match self {
            Event::Sample {
                fields,
                callchain,
                user,
                ..
            } => {
                fields.prev_state.as_ref().map_or(0, String::capacity)
                    + callchain.capacity() * size_of::<u64>()
                    + user.as_ref().map_or(0, |u| {
                        size_of::<unwind::UserState<'_>>()
                            + match &u.stack {
                                Cow::Owned(bytes) => bytes.capacity(),
                                Cow::Borrowed(_) => 0,
                            }
                    })
            }
            Event::Comm { comm, .. } => comm.capacity(),
            Event::Mmap { filename, .. } => filename.capacity(),
            Event::Switch { .. } | Event::Task { .. } => 0,
        };
        size_of::<Self>() + owned
    }
}

/// Holds decoded events until perf's round protocol says they can be emitted in order.
pub(super) struct Emitter<'a> {
    pending: Vec<Event<'a>>,
    flush_limit: u64,
    round_max: u64,
    wanted: Wanted,
    /// What `pending` holds, and how much it may (`MAX_HELD_BYTES`).
    held: usize,
    max_held: usize,
}

impl<'a> Emitter<'a> {
    pub(super) fn new(wanted: Wanted, max_held: usize) -> Self {
        Emitter {
            pending: Vec::new(),
            flush_limit: 0,
            round_max: 0,
            wanted,
            held: 0,
            max_held,
        }
    }

    pub(super) fn push<F: FnMut(Event<'a>)>(&mut self, event: Event<'a>, emit: &mut F) {
        self.round_max = self.round_max.max(event.time());
        self.held = self.held.saturating_add(event.held_bytes());
        self.pending.push(event);
        if self.held > self.max_held {
            self.flush_half(emit);
        }
    }

    /// The earlier half of what is held, out in order: a file without rounds (or with
    /// rounds far apart) is read in bounded memory, its later events that are older than
    /// the ones already out going out as perf's would, out of order.
    fn flush_half<F: FnMut(Event<'a>)>(&mut self, emit: &mut F) {
        self.pending.sort_by_key(Event::time);
        let half = self.pending.len().div_ceil(2);
        let gone: usize = self.pending[..half].iter().map(Event::held_bytes).sum();
        self.held = self.held.saturating_sub(gone);
        emit_in_order(self.pending.drain(..half), emit);
    }

    /// Whole records out of decompressed bytes; returns the bytes used.
    pub(super) fn take_records<F: FnMut(Event<'a>)>(
        &mut self,
        bytes: &[u8],
        layout: &Layout,
        emit: &mut F,
    ) -> io::Result<usize> {
        let mut at = 0;
        while bytes.len() - at >= 8 {
            let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
            let misc = u16::from_le_bytes(bytes[at + 4..at + 6].try_into().expect("2 bytes"));
            let size =
                u16::from_le_bytes(bytes[at + 6..at + 8].try_into().expect("2 bytes")) as usize;
            if size < 8 {
                return Err(invalid("compressed record with a size below its header"));
            }
            if bytes.len() - at < size {
                break;
            }
            let body = &bytes[at + 8..at + size];
            if kind == RECORD_FINISHED_ROUND {
                self.finish_round(emit);
            } else if let Some(event) =
                // The decompressed bytes are reused: what is held past them is copied.
                decode(kind, misc, body, layout, self.wanted, |b| {
                    Cow::Owned(b.to_vec())
                })?
            {
                self.push(event, emit);
            }
            at += size;
        }
        Ok(at)
    }

    /// perf's rule: at the end of a round, everything up to the previous round's latest
    /// timestamp is complete and can go out sorted.
    pub(super) fn finish_round<F: FnMut(Event<'a>)>(&mut self, emit: &mut F) {
        let limit = self.flush_limit;
        self.flush_limit = self.round_max;
        // Stable: records of one time keep their order in the file.
        self.pending.sort_by_key(Event::time);
        let split = self.pending.partition_point(|e| e.time() <= limit);
        let gone: usize = self.pending[..split].iter().map(Event::held_bytes).sum();
        self.held = self.held.saturating_sub(gone);
        emit_in_order(self.pending.drain(..split), emit);
    }

    pub(super) fn flush_all<F: FnMut(Event<'a>)>(&mut self, emit: &mut F) {
        self.pending.sort_by_key(Event::time);
        self.held = 0;
        emit_in_order(self.pending.drain(..), emit);
    }
}

/// Emits `events`, each sample's stack copy asked into the CPU's cache while the event
/// before it is handled: a DWARF sample is unwound by reads into its stack copy, which
/// lies in the mapped file (not in any cache) when its turn comes.
fn emit_in_order<'a>(events: impl Iterator<Item = Event<'a>>, emit: &mut impl FnMut(Event<'a>)) {
    let mut events = events.peekable();
    while let Some(event) = events.next() {
        if let Some(Event::Sample {
            user: Some(user), ..
        }) = events.peek()
        {
            unwind::prefetch(&user.stack);
        }
        emit(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(tid: u32, time: u64) -> Event<'static> {
        Event::Switch {
            tid,
            time,
            out: false,
        }
    }

    #[test]
    fn events_held_past_their_budget_go_out_in_order_before_their_round_ends() {
        // Room for about ten events: a round of a thousand goes out half at a time.
        let budget = 10 * switch(0, 0).held_bytes();
        let mut state = Emitter::new(Wanted::Samples, budget);
        let out = std::cell::RefCell::new(Vec::new());
        let mut emit = |e: Event<'static>| out.borrow_mut().push(e.time());
        for i in 0..1000u64 {
            state.push(switch(1, (i * 7919) % 1000), &mut emit);
            assert!(state.held <= budget, "{} held past {budget}", state.held);
        }
        let before_the_end = out.borrow().len();
        state.flush_all(&mut emit);
        let out = out.into_inner();
        assert!(
            before_the_end > 900,
            "{before_the_end} went out before the end"
        );
        // Every event goes out once; each half that goes out is in order.
        let mut sorted = out.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert!(out[..5].windows(2).all(|w| w[0] <= w[1]), "{:?}", &out[..5]);
    }
}
