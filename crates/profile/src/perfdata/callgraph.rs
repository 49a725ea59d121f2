//! How a perf.data's call graphs were recorded, read from its event attributes: which the
//! native fold reads whole as they are (frame-pointer callchains the kernel walked) and
//! which hold only part of each stack until something unwinds the rest (DWARF: the user
//! registers and a copy of the user stack; LBR: the branch unit's call stack).

use super::header::*;
use std::fs::File;
use std::io;
use std::path::Path;

/// The call graphs of a perf.data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// No callchains: every sample is its own leaf frame.
    None,
    /// Callchains walked by frame pointers (`-g`): whole in the sample.
    FramePointer,
    /// `--call-graph dwarf`: the callchain holds the kernel frames only; the user frames
    /// are unwound afterwards from the saved registers and stack (perf script does).
    Dwarf,
    /// `--call-graph lbr`: the user frames come from the last-branch-record call stack.
    Lbr,
}

impl CallGraph {
    pub(super) fn of_attr(attr: &Attr) -> Self {
        let st = attr.sample_type;
        if st & SAMPLE_REGS_USER != 0 && st & SAMPLE_STACK_USER != 0 {
            CallGraph::Dwarf
        } else if st & SAMPLE_BRANCH_STACK != 0 && attr.branch_sample_type & BRANCH_CALL_STACK != 0
        {
            CallGraph::Lbr
        } else if st & SAMPLE_CALLCHAIN != 0 {
            CallGraph::FramePointer
        } else {
            CallGraph::None
        }
    }

    /// A file's call graphs: the event whose stacks are hardest to read decides (one such
    /// event is enough to make a fold partial).
    pub(super) fn of_attrs(attrs: &[Attr]) -> Self {
        let kinds: Vec<CallGraph> = attrs.iter().map(Self::of_attr).collect();
        [CallGraph::Lbr, CallGraph::Dwarf, CallGraph::FramePointer]
            .into_iter()
            .find(|k| kinds.contains(k))
            .unwrap_or(CallGraph::None)
    }

    /// Whether the native fold reads these stacks whole: frame-pointer callchains as they
    /// are, DWARF stacks unwound from the binaries (`unwind`). LBR call stacks are left to
    /// `perf script`.
    pub fn folds_natively(self) -> bool {
        !matches!(self, CallGraph::Lbr)
    }

    /// Whether the user frames must be unwound from the binaries' unwind tables.
    pub fn needs_unwinding(self) -> bool {
        self == CallGraph::Dwarf
    }

    /// What the recording was, as users know it.
    pub fn describe(self) -> &'static str {
        match self {
            CallGraph::None => "no call graphs",
            CallGraph::FramePointer => "frame-pointer call graphs (-g)",
            CallGraph::Dwarf => "DWARF call graphs (--call-graph dwarf)",
            CallGraph::Lbr => "LBR call graphs (--call-graph lbr)",
        }
    }

    /// Why a native read would be partial: what it would keep of each stack.
    pub fn native_loss(self) -> &'static str {
        match self {
            CallGraph::Dwarf => "it keeps the kernel frames only without the binaries",
            CallGraph::Lbr => "it would keep the frame-pointer part only",
            CallGraph::None | CallGraph::FramePointer => "",
        }
    }
}

/// How the call graphs of the perf.data at `path` were recorded (its header alone is read).
pub fn recorded_call_graph(path: &Path) -> io::Result<CallGraph> {
    let mut file = File::open(path)?;
    let (layout, _, _) = read_layout(&mut file)?;
    Ok(CallGraph::of_attrs(&layout.attrs))
}

/// The error a native read of stacks it cannot read whole returns, instead of a part.
pub(super) fn not_native(call_graph: CallGraph) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "perf.data: recorded with {}, which devprof does not read without the binaries to \
             unwind with ({}): fold it with them or with perf script",
            call_graph.describe(),
            call_graph.native_loss()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(sample_type: u64, branch_sample_type: u64) -> Attr {
        Attr {
            kind: 1,
            config: 0,
            sample_type,
            branch_sample_type,
            sample_regs_user: 0,
            name: String::new(),
            clockid: None,
        }
    }

    const FP: u64 = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CALLCHAIN | SAMPLE_PERIOD;

    #[test]
    fn the_sample_type_says_how_stacks_were_recorded() {
        assert_eq!(CallGraph::of_attr(&attr(FP, 0)), CallGraph::FramePointer);
        assert_eq!(
            CallGraph::of_attr(&attr(FP | SAMPLE_REGS_USER | SAMPLE_STACK_USER, 0)),
            CallGraph::Dwarf
        );
        assert_eq!(
            CallGraph::of_attr(&attr(SAMPLE_IP | SAMPLE_TID, 0)),
            CallGraph::None
        );
    }

    /// LBR cannot be recorded without a hardware PMU: the attribute perf writes for
    /// `--call-graph lbr` (branch stack of the user call stack), made by hand.
    #[test]
    fn fold_of_an_lbr_capture_is_not_read_natively() {
        let lbr = attr(FP | SAMPLE_BRANCH_STACK, 1 | BRANCH_CALL_STACK | 1 << 14);
        assert_eq!(CallGraph::of_attr(&lbr), CallGraph::Lbr);
        assert!(!CallGraph::of_attrs(&[attr(FP, 0), lbr]).folds_natively());
        // A branch stack of any branches (`perf record -b -g`) is not a call graph: the
        // frame-pointer callchain is whole.
        let branches = attr(FP | SAMPLE_BRANCH_STACK, 1 << 3);
        assert_eq!(CallGraph::of_attr(&branches), CallGraph::FramePointer);
        assert!(not_native(CallGraph::Lbr).to_string().contains("lbr"));
    }

    #[test]
    fn one_dwarf_event_makes_the_whole_file_need_unwinding() {
        let dwarf = attr(FP | SAMPLE_REGS_USER | SAMPLE_STACK_USER, 0);
        assert_eq!(
            CallGraph::of_attrs(&[attr(FP, 0), dwarf.clone()]),
            CallGraph::Dwarf
        );
        assert_eq!(
            CallGraph::of_attrs(&[attr(SAMPLE_IP, 0), attr(FP, 0)]),
            CallGraph::FramePointer
        );
        assert_eq!(CallGraph::of_attrs(&[]), CallGraph::None);
    }
}
