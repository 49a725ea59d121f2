//! The pages of a mapped perf.data, handled on a thread of their own beside the reader:
//! the next megabytes are mapped in ahead of it (`MADV_POPULATE_READ`), so that the reader
//! seldom takes a page fault, and those it has passed are released (`MADV_DONTNEED`), so
//! that a recording of gigabytes is read through a window of a few dozen megabytes. A
//! DWARF capture carries up to 8 KiB of stack per sample: faulting its pages in and out
//! was an eighth of a fold's time, on the reader's own thread.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The page size pages are released by.
const PAGE: usize = 4096;
/// How much of the recording is read before the pages behind the reader are released.
const RELEASE_EVERY: usize = 64 << 20;
/// How far ahead of the reader pages are mapped in, and by how much at a time.
const AHEAD: usize = 24 << 20;
const STEP: usize = 2 << 20;
/// How long the pager waits, once far enough ahead, before it looks again (the reader
/// goes through about 3 MiB a millisecond).
const IDLE: Duration = Duration::from_micros(500);

/// Where the reader is, for the pager.
pub(super) struct Progress {
    reached: AtomicUsize,
    done: AtomicBool,
}

impl Progress {
    /// The reader has everything before `offset` (in the mapping) behind it.
    pub(super) fn reached(&self, offset: usize) {
        self.reached.store(offset, Ordering::Relaxed);
    }
}

/// Runs `read` over `map[data]` with the pager beside it, on a scoped thread: `read` is
/// told its progress through the `Progress` it gets. The pager only advises the kernel:
/// where it cannot (an older kernel has no `MADV_POPULATE_READ`), the reader faults the
/// pages in itself, as before.
pub(super) fn paged<T>(
    map: &memmap2::Mmap,
    data: std::ops::Range<usize>,
    read: impl FnOnce(&Progress) -> T,
) -> T {
    let progress = Progress {
        reached: AtomicUsize::new(data.start),
        done: AtomicBool::new(false),
    };
    std::thread::scope(|scope| {
        // Without a thread (the system has none to give), the reader faults the pages in
        // and the mapping is released only as it ends, as perf script does.
        let _ = std::thread::Builder::new()
            .name("perf.data pager".into())
            .spawn_scoped(scope, || page(map, data, &progress));
        // The pager stops however the reading ends (a panic too): the scope waits for it.
        let _stop = Stop(&progress.done);
        read(&progress)
    })
}

/// Tells the pager to stop when dropped.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn page(map: &memmap2::Mmap, data: std::ops::Range<usize>, progress: &Progress) {
    let mut populated = data.start;
    let mut populating = true;
    let mut released = 0usize;
    while !progress.done.load(Ordering::Relaxed) {
        let reached = progress.reached.load(Ordering::Relaxed);
        let behind = reached & !(PAGE - 1);
        if behind.saturating_sub(released) >= RELEASE_EVERY {
            // SAFETY: a read-only file mapping; the pages wholly before the reader's record
            // are seldom read again (an event held for its round may borrow from them),
            // and then they fault in the same bytes.
            let _ = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    released,
                    behind - released,
                )
            };
            released = behind;
        }
        let wanted = reached.saturating_add(AHEAD).min(data.end);
        if populating && populated < wanted {
            let len = STEP.min(data.end - populated);
            populating = map
                .advise_range(memmap2::Advice::PopulateRead, populated, len)
                .is_ok();
            populated += len;
            continue;
        }
        std::thread::sleep(IDLE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_reader_sees_the_whole_mapping_while_the_pager_runs_beside_it() {
        // Larger than a release and a look-ahead, so that both happen while it is read.
        let len = RELEASE_EVERY + AHEAD + 3 * STEP + 123;
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&bytes).unwrap();
        let map = unsafe { memmap2::Mmap::map(file.as_file()).unwrap() };
        let sum = paged(&map, 0..len, |progress| {
            let mut sum = 0u64;
            for (at, chunk) in map.chunks(PAGE).enumerate() {
                sum += chunk.iter().map(|b| *b as u64).sum::<u64>();
                progress.reached((at + 1) * PAGE);
            }
            sum
        });
        assert_eq!(sum, bytes.iter().map(|b| *b as u64).sum::<u64>());
    }

    /// A reader that panics (a parser bug) must not leave the pager
    /// running, which the scope would wait for forever.
    #[test]
    fn a_panicking_reader_stops_the_pager() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&[0u8; 3 * PAGE]).unwrap();
        let map = unsafe { memmap2::Mmap::map(file.as_file()).unwrap() };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            paged(&map, 0..3 * PAGE, |_| panic!("a parser bug"))
        }));
        assert!(caught.is_err());
    }
}
