//! The workloads. Each is one `#[inline(never)]` function whose name profiles look for,
//! run in thread(s) of the same name, looping forever.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::hint::black_box;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// Length of one duty-cycle period.
pub const PERIOD: Duration = Duration::from_millis(100);

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Duty cycle of a workload thread: busy for `percent` of each period, asleep for the rest.
/// Periods are counted from an epoch; threads sharing an epoch are busy at the same time
/// (the `contend_lock` threads really meet at the lock). Workloads call [`Duty::tick`]
/// after every small unit of work.
pub struct Duty {
    busy: Duration,
    epoch: Instant,
    period: u64,
    /// Units of work since the last rest, added to `OPS` when the thread rests (so the
    /// count costs nothing in the busy loop).
    ops: u64,
    /// When set, the thread rests after this many units in a period even if time is left:
    /// its CPU then follows the cost of one unit (`DEMO_HASH_ROUNDS`), which is what a
    /// regression in one function looks like, rather than a fixed share of the period.
    units_per_period: Option<u64>,
    units_this_period: u64,
}

/// Units of work (calls to `Duty::tick`) done by all workloads, as of their last rest: the
/// node's throughput, which a profiler's overhead lowers.
pub static OPS: AtomicU64 = AtomicU64::new(0);

/// The units of work done so far by all workload threads.
pub fn ops_done() -> u64 {
    OPS.load(Ordering::Relaxed)
}

impl Duty {
    pub fn new(percent: u8, epoch: Instant) -> Duty {
        let percent = u32::from(percent.clamp(1, 100));
        Duty {
            busy: PERIOD * percent / 100,
            epoch,
            period: 0,
            ops: 0,
            units_per_period: None,
            units_this_period: 0,
        }
    }

    /// Paced by units: at most `units` per period (within the busy share), then rest.
    pub fn paced(mut self, units: u64) -> Duty {
        self.units_per_period = Some(units.max(1));
        self
    }

    /// Index of the current period (counts at 100% too).
    pub fn periods(&self) -> u64 {
        self.period
    }

    #[inline]
    pub fn tick(&mut self) {
        self.ops += 1;
        let since = self.epoch.elapsed().as_nanos();
        let period = PERIOD.as_nanos();
        let phase = (since % period) as u64;
        let current = (since / period) as u64;
        if current != self.period {
            // A workload at 100% never rests: count its work once a period instead.
            OPS.fetch_add(std::mem::take(&mut self.ops), Ordering::Relaxed);
            self.units_this_period = 0;
        }
        self.period = current;
        self.units_this_period += 1;
        let quota_done = self
            .units_per_period
            .is_some_and(|units| self.units_this_period >= units);
        if quota_done || phase >= self.busy.as_nanos() as u64 {
            self.rest(phase);
        }
    }

    /// Ends the busy part of the current period early: sleeps until the next period.
    pub fn finish_period(&mut self) {
        let phase = (self.epoch.elapsed().as_nanos() % PERIOD.as_nanos()) as u64;
        self.rest(phase);
    }

    #[cold]
    #[inline(never)]
    fn rest(&mut self, phase: u64) {
        OPS.fetch_add(std::mem::take(&mut self.ops), Ordering::Relaxed);
        thread::sleep(PERIOD.saturating_sub(Duration::from_nanos(phase)));
        self.period += 1;
        self.units_this_period = 0;
    }
}

/// xorshift64*: small, fast, deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// CPU: an FNV/xorshift-multiply chain over a 64 KiB buffer, `rounds` passes per unit of
/// work. The mixing is written out here so that the CPU time is self time of this function.
#[inline(never)]
pub fn hash_chain(duty: &mut Duty, rounds: u64) -> ! {
    let mut words = vec![0u64; 64 * KIB / 8];
    let mut rng = Rng::new(0x4a5c_17e3);
    for w in words.iter_mut() {
        *w = rng.next_u64();
    }
    let mut h: u64 = HASH_SEED;
    loop {
        for _ in 0..rounds {
            h = hash_pass(&mut words, h);
        }
        duty.tick();
    }
}

/// Where a hash chain starts.
pub const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// One pass of the chain over `words` from `h`, rewriting them; the new `h`. Always inlined:
/// its CPU time is its caller's self time, as the caller's name is what profiles show.
#[inline(always)]
pub fn hash_pass(words: &mut [u64], mut h: u64) -> u64 {
    for w in words.iter_mut() {
        h ^= *w;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        h ^= h >> 29;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 32;
        *w = h;
    }
    black_box(&mut *words);
    h
}

/// CPU: point lookups with pseudo-random keys in a BTreeMap of `entries` entries
/// (about 7 in 8 hit, the rest miss).
#[inline(never)]
pub fn state_lookup(duty: &mut Duty, entries: usize) -> ! {
    let mut rng = Rng::new(0x57a7_e000);
    let mut keys = Vec::with_capacity(entries);
    let mut map = BTreeMap::new();
    for i in 0..entries {
        let k = rng.next_u64();
        map.insert(k, i as u64);
        keys.push(k);
    }
    let mut acc = 0u64;
    loop {
        acc = lookup_batch(&map, &keys, &mut rng, acc);
        duty.tick();
    }
}

/// 256 point lookups in `map`, 7 in 8 with one of `keys`, added to `acc`. Always inlined, as
/// `hash_pass` is.
#[inline(always)]
pub fn lookup_batch(map: &BTreeMap<u64, u64>, keys: &[u64], rng: &mut Rng, mut acc: u64) -> u64 {
    let n = keys.len() as u64;
    for _ in 0..256 {
        let r = rng.next_u64();
        let key = if r & 7 == 0 {
            r
        } else {
            keys[rng.below(n) as usize]
        };
        if let Some(v) = map.get(&key) {
            acc = acc.wrapping_add(*v);
        }
    }
    black_box(acc)
}

/// Off-CPU: one of several threads fighting over `lock`. Each holds it for 50..200 µs of
/// work, releases it, does a little unlocked work and comes back, so the others block in
/// futex and are switched out.
#[inline(never)]
pub fn contend_lock(duty: &mut Duty, lock: &Mutex<u64>, seed: u64) -> ! {
    let mut rng = Rng::new(seed);
    loop {
        let hold = Duration::from_micros(50 + rng.below(151));
        {
            let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
            let start = Instant::now();
            let mut x = *guard;
            while start.elapsed() < hold {
                for _ in 0..1024 {
                    x = x
                        .wrapping_mul(0x5851_f42d_4c95_7f2d)
                        .wrapping_add(0x1405_7b7e_f767_814f);
                }
            }
            *guard = x;
        }
        // Unlocked work, so that a woken waiter gets a chance at the lock.
        let unlocked = Duration::from_micros(20 + rng.below(31));
        let start = Instant::now();
        let mut y = rng.next_u64();
        while start.elapsed() < unlocked {
            for _ in 0..1024 {
                y = y.rotate_left(7).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            }
        }
        black_box(y);
        duty.tick();
    }
}

/// Off-CPU I/O: writes 4..64 KiB blocks with write(2) into a 32 MiB file used as a ring,
/// reads earlier blocks back with pread(2), and syncs each write with fsync or fdatasync
/// in turn. At most `percent / 2` (at least 1) writes per period, so that the disk is not
/// flooded where flushes are cheap: about 1.7 MB/s at 10%.
#[inline(never)]
pub fn sync_writes(duty: &mut Duty, percent: u8, dir: &Path) -> io::Result<()> {
    const FILE_SIZE: u64 = 32 * MIB as u64;
    const MAX_BLOCK: usize = 64 * KIB;
    fs::create_dir_all(dir)?;
    let path = dir.join("sync_writes.dat");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut rng = Rng::new(0x5e9c_0001);
    let mut block = vec![0u8; MAX_BLOCK];
    // Fill the ring once so that every read returns bytes.
    for _ in 0..FILE_SIZE / MAX_BLOCK as u64 {
        rng.fill(&mut block);
        file.write_all(&block)?;
    }
    file.sync_all()?;
    file.seek(SeekFrom::Start(0))?;
    let mut back = vec![0u8; MAX_BLOCK];
    let mut pos = 0u64;
    let mut writes = 0u64;
    let mut read_bytes = 0u64;
    let max_writes = u32::from(percent / 2).max(1);
    let mut period = duty.periods();
    let mut writes_in_period = 0u32;
    loop {
        if duty.periods() != period {
            period = duty.periods();
            writes_in_period = 0;
        }
        if writes_in_period >= max_writes {
            duty.finish_period();
            continue;
        }
        writes_in_period += 1;
        let len = 4 * KIB * (1 + rng.below(16) as usize);
        rng.fill(&mut block[..len]);
        if pos + len as u64 > FILE_SIZE {
            pos = 0;
            file.seek(SeekFrom::Start(0))?;
        }
        file.write_all(&block[..len])?;
        pos += len as u64;
        writes += 1;
        let off = rng.below(FILE_SIZE / (4 * KIB as u64) - 16) * 4 * KIB as u64;
        read_bytes += file.read_at(&mut back[..len], off)? as u64;
        // Every write is made durable, alternately with fsync and fdatasync; this also
        // bounds the write rate by the device's flush latency.
        if writes & 1 == 0 {
            file.sync_all()?;
        } else {
            file.sync_data()?;
        }
        black_box(read_bytes);
        duty.tick();
    }
}

/// Off-CPU page faults: maps a 64 MiB file after evicting it from the page cache and reads
/// one byte per page (with MADV_RANDOM, so that every page is its own major fault).
#[inline(never)]
pub fn mmap_reads(duty: &mut Duty, dir: &Path) -> io::Result<()> {
    const FILE_SIZE: usize = 64 * MIB;
    fs::create_dir_all(dir)?;
    let path = dir.join("mmap_reads.dat");
    let mut file = File::create(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut rng = Rng::new(0x3a9_0002);
    let mut chunk = vec![0u8; MIB];
    for _ in 0..FILE_SIZE / MIB {
        rng.fill(&mut chunk);
        file.write_all(&chunk)?;
    }
    file.sync_all()?;
    drop(file);
    let file = File::open(&path)?;
    let fd = file.as_raw_fd();
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mut sum = 0u64;
    loop {
        // SAFETY: fd is an open file descriptor; the file is clean (synced), so its pages
        // can be dropped from the page cache.
        let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // SAFETY: a fresh read-only private mapping of FILE_SIZE bytes of an open file.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                FILE_SIZE,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `map` is the mapping just made. Failure only loses the hint.
        unsafe { libc::madvise(map, FILE_SIZE, libc::MADV_RANDOM) };
        let base = map.cast::<u8>();
        for (i, off) in (0..FILE_SIZE).step_by(page).enumerate() {
            // SAFETY: off < FILE_SIZE, inside the mapping; the file is FILE_SIZE long.
            sum = sum.wrapping_add(u64::from(unsafe { std::ptr::read_volatile(base.add(off)) }));
            if i % 16 == 15 {
                duty.tick();
            }
        }
        // SAFETY: unmapping exactly the mapping made above; no references into it remain.
        unsafe { libc::munmap(map, FILE_SIZE) };
        black_box(sum);
        duty.tick();
    }
}

/// Heap: keeps growing `Vec<u8>` buffers (2 MiB per 100 ms period, touched), up to
/// `max_bytes` in all, then frees the older half and grows again. The rest of each busy
/// part re-reads the buffers.
#[inline(never)]
pub fn alloc_blocks(duty: &mut Duty, max_bytes: usize) -> ! {
    const GROW_PER_PERIOD: usize = 2 * MIB;
    const STEP: usize = 256 * KIB;
    let block_max = (max_bytes / 8).clamp(STEP, 8 * MIB);
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    let mut held = 0usize;
    let mut grown_in_period = 0usize;
    let mut period = duty.periods();
    let mut cursor = 0usize;
    let mut sum = 0u64;
    let mut fill = 1u8;
    loop {
        if duty.periods() != period {
            period = duty.periods();
            grown_in_period = 0;
        }
        if grown_in_period < GROW_PER_PERIOD {
            if blocks.last().is_none_or(|b| b.len() + STEP > block_max) {
                blocks.push(Vec::new());
            }
            let block = blocks.last_mut().expect("a block was just pushed");
            block.resize(block.len() + STEP, fill);
            fill = fill.wrapping_add(1);
            held += STEP;
            grown_in_period += STEP;
            if held >= max_bytes {
                let keep_from = blocks.len() / 2;
                blocks.drain(..keep_from);
                held = blocks.iter().map(Vec::len).sum();
            }
        } else {
            // Re-read 64 KiB of what is held, round robin.
            let total: usize = blocks.iter().map(Vec::len).sum();
            if total > 0 {
                cursor %= total;
                let mut off = cursor;
                for b in &blocks {
                    if off < b.len() {
                        let end = (off + 64 * KIB).min(b.len());
                        sum = b[off..end]
                            .iter()
                            .fold(sum, |s, &x| s.rotate_left(1) ^ u64::from(x));
                        cursor += end - off;
                        break;
                    }
                    off -= b.len();
                }
            }
        }
        black_box(sum);
        duty.tick();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duty_busy_share() {
        let now = Instant::now();
        assert_eq!(Duty::new(100, now).busy, PERIOD);
        assert_eq!(Duty::new(25, now).busy, Duration::from_millis(25));
        assert_eq!(Duty::new(1, now).busy, Duration::from_millis(1));
    }

    #[test]
    fn a_paced_duty_rests_after_its_units_even_with_time_left() {
        let mut duty = Duty::new(100, Instant::now()).paced(3);
        duty.tick();
        duty.tick();
        assert_eq!(duty.periods(), 0, "two units of three: still busy");
        duty.tick();
        assert_eq!(
            duty.periods(),
            1,
            "the third unit ends the period at 100% busy"
        );
        assert_eq!(duty.units_this_period, 0);
    }

    #[test]
    fn rng_below_is_in_range() {
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            assert!(rng.below(10) < 10);
        }
    }
}
