//! The pages of a mapped perf.data, handled on a thread of their own beside the reader:
//! the next megabytes are mapped in ahead of it (`MADV_POPULATE_READ`), so that the reader
//! seldom takes a page fault, and those it has passed are released (`MADV_DONTNEED`), so
//! that a recording of gigabytes is read through a window of a few dozen megabytes. A
//! DWARF capture carries up to 8 KiB of stack per sample: faulting its pages in and out
//! took 12-15% of a fold's CPU, on the reader's own thread.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// What is released is rounded down to this: the largest page size Linux uses, so that
/// only pages wholly before the reader's record go, whatever the kernel's page size.
const PAGE: usize = 64 << 10;
/// How much of the recording is read before the pages behind the reader are released.
const RELEASE_EVERY: usize = 64 << 20;
/// How far ahead of the reader pages are mapped in, and by how much at a time.
const AHEAD: usize = 24 << 20;
const STEP: usize = 2 << 20;
/// How long the pager waits, once far enough ahead, before it looks again (the reader
/// goes through about 3 MiB a millisecond).
const IDLE: Duration = Duration::from_micros(500);

/// Where the reader is, for the pager.
pub(super) struct Progress<'m> {
    reached: AtomicUsize,
    done: AtomicBool,
    /// Without a pager thread: the reader releases what it passed itself.
    inline: Option<(&'m memmap2::Mmap, Range<usize>, AtomicUsize)>,
}

impl Progress<'_> {
    /// The reader has everything before `offset` (in the mapping) behind it.
    pub(super) fn reached(&self, offset: usize) {
        self.reached.store(offset, Ordering::Relaxed);
        if let Some((map, data, released)) = &self.inline {
            let mut plan = Plan {
                data: data.clone(),
                populated: data.end,
                released: released.load(Ordering::Relaxed),
            };
            if let Step::Release(range) = plan.next(offset) {
                release(map, range);
                released.store(plan.released, Ordering::Relaxed);
            }
        }
    }
}

/// Runs `read` over `map[data]` with the pager beside it, on a scoped thread: `read` is
/// told its progress through the `Progress` it gets. The pager only advises the kernel:
/// where it cannot (an older kernel has no `MADV_POPULATE_READ`), the reader faults the
/// pages in itself, as before.
pub(super) fn paged<T>(
    map: &memmap2::Mmap,
    data: Range<usize>,
    read: impl FnOnce(&Progress<'_>) -> T,
) -> T {
    let data = data.start.min(map.len())..data.end.min(map.len());
    let mut progress = Progress {
        reached: AtomicUsize::new(data.start),
        done: AtomicBool::new(false),
        inline: None,
    };
    let mut read = Some(read);
    let paged = std::thread::scope(|scope| {
        let pager = std::thread::Builder::new()
            .name("perf.data pager".into())
            .spawn_scoped(scope, || page(map, data.clone(), &progress));
        if pager.is_err() {
            return None;
        }
        // The pager stops however the reading ends (a panic too): the scope waits for it.
        let _stop = Stop(&progress.done);
        read.take().map(|read| read(&progress))
    });
    if let Some(result) = paged {
        return result;
    }
    // No thread to be had: the reader pages on its own, releasing as it goes.
    progress.inline = Some((map, data, AtomicUsize::new(0)));
    let read = read
        .take()
        .expect("not read while the pager could not start");
    read(&progress)
}

/// Tells the pager to stop when dropped.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn page(map: &memmap2::Mmap, data: Range<usize>, progress: &Progress<'_>) {
    let mut plan = Plan {
        populated: data.start,
        released: 0,
        data,
    };
    let mut populating = true;
    while !progress.done.load(Ordering::Relaxed) {
        match plan.next(progress.reached.load(Ordering::Relaxed)) {
            Step::Release(range) => release(map, range),
            Step::Populate(range) if populating => {
                populating = map
                    .advise_range(memmap2::Advice::PopulateRead, range.start, range.len())
                    .is_ok();
            }
            Step::Populate(_) | Step::Wait => std::thread::sleep(IDLE),
        }
    }
}

fn release(map: &memmap2::Mmap, range: Range<usize>) {
    // SAFETY: a read-only file mapping; the pages wholly before the reader's record are
    // seldom read again (an event held for its round may borrow from them), and then they
    // fault in the same bytes from the file.
    let _ = unsafe {
        map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len())
    };
}

/// The pager's decisions, apart from the system calls that carry them out.
struct Plan {
    /// The records' place in the mapping.
    data: Range<usize>,
    /// Mapped in up to here.
    populated: usize,
    /// Released up to here.
    released: usize,
}

#[derive(Debug, PartialEq, Eq)]
enum Step {
    Release(Range<usize>),
    Populate(Range<usize>),
    Wait,
}

impl Plan {
    /// The next step with the reader at `reached`: release what it passed once that is
    /// RELEASE_EVERY, else map in the next STEP within AHEAD of it (never behind it: a
    /// pager that fell behind skips ahead), else wait.
    fn next(&mut self, reached: usize) -> Step {
        let reached = reached.clamp(self.data.start, self.data.end);
        let behind = reached & !(PAGE - 1);
        if behind.saturating_sub(self.released) >= RELEASE_EVERY {
            let range = self.released..behind;
            self.released = behind;
            return Step::Release(range);
        }
        self.populated = self.populated.max(reached);
        let wanted = reached.saturating_add(AHEAD).min(self.data.end);
        if self.populated < wanted {
            let range = self.populated..self.populated + STEP.min(self.data.end - self.populated);
            self.populated = range.end;
            return Step::Populate(range);
        }
        Step::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The pager's steps as a reader goes through `data` a `stride` at a time.
    fn steps(data: Range<usize>, stride: usize) -> Vec<(usize, Step)> {
        let mut plan = Plan {
            populated: data.start,
            released: 0,
            data: data.clone(),
        };
        let mut out = Vec::new();
        let mut reached = data.start;
        while reached <= data.end {
            loop {
                match plan.next(reached) {
                    Step::Wait => break,
                    step => out.push((reached, step)),
                }
            }
            reached += stride;
        }
        out
    }

    #[test]
    fn pages_are_mapped_in_only_ahead_of_the_reader_and_released_only_behind_it() {
        let data = 4096..300 << 20;
        let steps = steps(data.clone(), 1 << 20);
        let mut populated = Vec::new();
        let mut released = Vec::new();
        for (reached, step) in &steps {
            match step {
                Step::Populate(r) => {
                    assert!(r.start >= *reached && r.end <= data.end, "{reached}: {r:?}");
                    assert!(r.end <= reached + AHEAD + STEP, "{reached}: {r:?}");
                    populated.push(r.clone());
                }
                Step::Release(r) => {
                    assert!(r.end <= *reached && r.end % PAGE == 0, "{reached}: {r:?}");
                    released.push(r.clone());
                }
                Step::Wait => unreachable!(),
            }
        }
        // Each byte mapped in once, in order, all of the records; released in order,
        // never more than RELEASE_EVERY and a page behind the reader.
        assert_eq!(populated.first().unwrap().start, data.start);
        assert_eq!(populated.last().unwrap().end, data.end);
        assert!(populated.windows(2).all(|w| w[0].end == w[1].start));
        assert!(released.windows(2).all(|w| w[0].end == w[1].start));
        assert!(data.end - released.last().unwrap().end < RELEASE_EVERY + PAGE);
    }

    #[test]
    fn a_pager_that_fell_behind_skips_to_the_reader() {
        let mut plan = Plan {
            data: 0..100 << 20,
            populated: 0,
            released: 0,
        };
        assert_eq!(plan.next(40 << 20), Step::Populate(40 << 20..42 << 20));
        // A reader past the end (the last record's end) maps nothing past the data.
        assert_eq!(plan.next(200 << 20), Step::Release(0..100 << 20));
        assert_eq!(plan.next(200 << 20), Step::Wait);
    }

    #[test]
    fn the_reader_sees_the_whole_mapping_while_the_pager_runs_beside_it() {
        // Larger than a release and a look-ahead, so that both happen while it is read.
        let len = RELEASE_EVERY + AHEAD + 3 * STEP + 123;
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&bytes).unwrap();
        let map = unsafe { memmap2::Mmap::map(file.as_file()).unwrap() };
        let sum = paged(&map, 100..len, |progress| {
            let mut sum = 0u64;
            for (at, b) in map[100..].iter().enumerate() {
                sum += *b as u64;
                if at % 4096 == 0 {
                    progress.reached(100 + at);
                }
            }
            sum
        });
        assert_eq!(sum, bytes[100..].iter().map(|b| *b as u64).sum::<u64>());
    }

    /// A reader that panics (a parser bug) must not leave the pager running, which the
    /// scope would wait for forever.
    #[test]
    fn a_panicking_reader_stops_the_pager() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&[0u8; 3 * 4096]).unwrap();
        let map = unsafe { memmap2::Mmap::map(file.as_file()).unwrap() };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            paged(&map, 0..3 * 4096, |_| panic!("a parser bug"))
        }));
        assert!(caught.is_err());
    }
}
