//! demo-node: the node of the devprof demo devnet. It runs named workloads (see
//! `workloads`) in threads of the same names, so that profiles can be checked by function
//! and thread name.
//!
//! Environment:
//! - `DEMO_WORKLOADS`: `name[:percent],...` (default `hash_chain,state_lookup`)
//! - `DEMO_DATA_DIR`: where `sync_writes` and `mmap_reads` keep their files (default `/data`)
//! - `DEMO_LOCK_THREADS`: number of `contend_lock` threads (default 4)
//! - `DEMO_ALLOC_MAX_MB`: cap of the memory held by `alloc_blocks` (default 128)
//! - `DEMO_HASH_CALLS`: when set, `hash_chain` makes that many calls per 100 ms period
//!   (within its percent) and rests, instead of staying busy for its whole percent
//! - `DEMO_HASH_ROUNDS`: passes over its buffer per `hash_chain` call (default 1); with
//!   `DEMO_HASH_CALLS`, the knob that makes one function heavier per call (an A/B test's B)
//! - `_RJEM_MALLOC_CONF`: jemalloc options, e.g. `prof:true,prof_prefix:/profiling/jeprof`
//! - `DEMO_OPS_FILE`: when set, a file rewritten every 500 ms with `<ms since start> <units
//!   of work done>`: the node's throughput, for measuring what profiling costs it
//! - `DEMO_CLEAR_ENVIRON=1`: after start, blank the environment in place and turn the
//!   command line into a status title, as servers that rewrite them for `ps` do
//! - `DEMO_BLOCKS=1`: block mode (`blocks`): the workloads run in blocks with a reth-like
//!   log line each (`DEMO_BLOCK_MS`, `DEMO_BLOCK_GAP_MS`, `DEMO_HEAVY_EVERY`,
//!   `DEMO_HEAVY_WORKLOAD`, `DEMO_HEAVY_FACTOR`)
//!
//! Signals: SIGTERM/SIGINT exit at once; SIGUSR2 dumps a jemalloc heap profile.

mod blocks;
mod config;
mod proctitle;
mod workloads;

use std::any::Any;
use std::path::PathBuf;
use std::process;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use config::{parse_positive, parse_workloads, Workload, WorkloadSpec, DEFAULT_WORKLOADS};
use workloads::{Duty, PERIOD};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Entries of the `state_lookup` map.
const STATE_ENTRIES: usize = 1 << 20;

struct Settings {
    workloads: Vec<WorkloadSpec>,
    data_dir: PathBuf,
    lock_threads: u64,
    alloc_max_mb: u64,
    hash_calls: Option<u64>,
    hash_rounds: u64,
}

fn env_var(name: &str) -> Result<Option<String>, String> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not valid UTF-8")),
    }
}

fn settings_from_env() -> Result<Settings, String> {
    let spec = env_var("DEMO_WORKLOADS")?;
    let workloads = parse_workloads(spec.as_deref().unwrap_or(DEFAULT_WORKLOADS))
        .map_err(|e| format!("DEMO_WORKLOADS: {e}"))?;
    let data_dir = env_var("DEMO_DATA_DIR")?
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/data".to_string())
        .into();
    let lock_threads = parse_positive(
        "DEMO_LOCK_THREADS",
        env_var("DEMO_LOCK_THREADS")?.as_deref(),
        4,
    )?;
    let alloc_max_mb = parse_positive(
        "DEMO_ALLOC_MAX_MB",
        env_var("DEMO_ALLOC_MAX_MB")?.as_deref(),
        128,
    )?;
    let hash_calls = match env_var("DEMO_HASH_CALLS")? {
        None => None,
        Some(v) => Some(parse_positive("DEMO_HASH_CALLS", Some(&v), 1)?),
    };
    let hash_rounds = parse_positive(
        "DEMO_HASH_ROUNDS",
        env_var("DEMO_HASH_ROUNDS")?.as_deref(),
        1,
    )?;
    Ok(Settings {
        workloads,
        data_dir,
        lock_threads,
        alloc_max_mb,
        hash_calls,
        hash_rounds,
    })
}

fn log_settings(s: &Settings) {
    println!(
        "demo-node {} pid {}",
        env!("CARGO_PKG_VERSION"),
        process::id()
    );
    for spec in &s.workloads {
        let detail = match spec.workload {
            Workload::HashChain => match s.hash_calls {
                Some(calls) => format!(
                    " (at most {calls} calls per period, {} rounds each)",
                    s.hash_rounds
                ),
                None => format!(" ({} rounds per call)", s.hash_rounds),
            },
            Workload::StateLookup => format!(" ({STATE_ENTRIES} entries)"),
            Workload::ContendLock => format!(" ({} threads)", s.lock_threads),
            Workload::SyncWrites | Workload::MmapReads => {
                format!(" (in {})", s.data_dir.display())
            }
            Workload::AllocBlocks => format!(" (cap {} MiB)", s.alloc_max_mb),
        };
        println!("  workload {}: {}%{detail}", spec.workload, spec.percent);
    }
    let prof = tikv_jemalloc_ctl::profiling::prof::read().unwrap_or(false);
    let conf = std::env::var("_RJEM_MALLOC_CONF").unwrap_or_default();
    println!(
        "  jemalloc profiling: {} (_RJEM_MALLOC_CONF={conf:?})",
        if prof { "on" } else { "off" }
    );
}

/// Dumps a heap profile to `<opt.prof_prefix>.<pid>.<seq>.m<mseq>.heap`.
fn dump_heap_profile() {
    // SAFETY: "prof.dump" takes a `const char *` file name; NULL selects the default name.
    let r =
        unsafe { tikv_jemalloc_ctl::raw::write(b"prof.dump\0", std::ptr::null::<libc::c_char>()) };
    match r {
        Ok(()) => println!("demo-node: heap profile dumped"),
        Err(e) => eprintln!("demo-node: heap profile dump failed: {e} (is prof:true set?)"),
    }
}

fn handle_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR2};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGUSR2])?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGUSR2 {
                    dump_heap_profile();
                } else {
                    println!("demo-node: signal {sig}, exiting");
                    process::exit(0);
                }
            }
        })?;
    Ok(())
}

type Outcome = Result<String, Box<dyn Any + Send>>;

/// Runs `work` in a thread named `name`; reports on `done` if it ever stops.
fn spawn_workload<F>(name: &'static str, done: &mpsc::Sender<(&'static str, Outcome)>, work: F)
where
    F: FnOnce() -> String + Send + 'static,
{
    let done = done.clone();
    thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            let _ = done.send((name, outcome));
        })
        .unwrap_or_else(|e| {
            eprintln!("demo-node: cannot start thread {name}: {e}");
            process::exit(1)
        });
}

/// Rewrites `path` every 500 ms with the time since `start` and the work done so far
/// (through a rename, so a reader never sees half a line).
fn report_ops(path: PathBuf, start: Instant) {
    let spawned = thread::Builder::new()
        .name("ops_report".into())
        .spawn(move || {
            let temp = path.with_extension("tmp");
            loop {
                thread::sleep(std::time::Duration::from_millis(500));
                let line = format!(
                    "{} {}\n",
                    start.elapsed().as_millis(),
                    workloads::ops_done()
                );
                if std::fs::write(&temp, line)
                    .and_then(|()| std::fs::rename(&temp, &path))
                    .is_err()
                {
                    eprintln!("demo-node: cannot write {}", path.display());
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("demo-node: cannot start the ops report: {e}");
    }
}

fn io_outcome(r: std::io::Result<()>) -> String {
    match r {
        Ok(()) => "returned".to_string(),
        Err(e) => format!("I/O error: {e}"),
    }
}

fn main() {
    // Block mode replaces the steady workloads (see `blocks`).
    match blocks::settings_from_env() {
        Ok(Some(block_settings)) => {
            if let Err(e) = handle_signals() {
                eprintln!("demo-node: cannot install signal handlers: {e}");
                process::exit(1);
            }
            println!(
                "demo-node {} pid {} (block mode)",
                env!("CARGO_PKG_VERSION"),
                process::id()
            );
            thread::Builder::new()
                .name("block_import".into())
                .spawn(move || blocks::run(&block_settings))
                .and_then(|t| {
                    t.join()
                        .map_err(|_| std::io::Error::other("block_import panicked"))
                })
                .unwrap_or_else(|e| {
                    eprintln!("demo-node: block mode stopped: {e}");
                    process::exit(1)
                });
            process::exit(1);
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("demo-node: error: {e}");
            process::exit(2)
        }
    }
    let settings = settings_from_env().unwrap_or_else(|e| {
        eprintln!("demo-node: error: {e}");
        process::exit(2)
    });
    log_settings(&settings);
    // jemalloc read its settings at the first allocation, long before this point.
    if std::env::var("DEMO_CLEAR_ENVIRON").as_deref() == Ok("1") {
        let names: Vec<&str> = settings
            .workloads
            .iter()
            .map(|w| w.workload.name())
            .collect();
        let cleared =
            proctitle::clear_environ_and_retitle(&format!("demo-node: {}", names.join(",")));
        println!("  environment cleared in place ({cleared} variables); command line retitled");
    }
    if let Err(e) = handle_signals() {
        eprintln!("demo-node: cannot install signal handlers: {e}");
        process::exit(1);
    }

    let (done, stopped) = mpsc::channel();
    let start = Instant::now();
    if let Ok(Some(path)) = env_var("DEMO_OPS_FILE") {
        report_ops(PathBuf::from(path), start);
    }
    let count = settings.workloads.len() as u32;
    for (i, spec) in settings.workloads.iter().enumerate() {
        let pct = spec.percent;
        // All threads of a workload share one epoch; workloads are staggered over the
        // period so that their busy parts do not all start together.
        let epoch = start
            .checked_sub(PERIOD * i as u32 / count)
            .unwrap_or(start);
        let name = spec.workload.name();
        match spec.workload {
            Workload::HashChain => {
                let (calls, rounds) = (settings.hash_calls, settings.hash_rounds);
                spawn_workload(name, &done, move || {
                    let duty = Duty::new(pct, epoch);
                    let mut duty = match calls {
                        Some(calls) => duty.paced(calls),
                        None => duty,
                    };
                    workloads::hash_chain(&mut duty, rounds)
                })
            }
            Workload::StateLookup => spawn_workload(name, &done, move || {
                workloads::state_lookup(&mut Duty::new(pct, epoch), STATE_ENTRIES)
            }),
            Workload::ContendLock => {
                let lock = Arc::new(Mutex::new(0u64));
                for i in 0..settings.lock_threads {
                    let lock = Arc::clone(&lock);
                    spawn_workload(name, &done, move || {
                        workloads::contend_lock(&mut Duty::new(pct, epoch), &lock, 0xc0de + i)
                    });
                }
            }
            Workload::SyncWrites => {
                let dir = settings.data_dir.clone();
                spawn_workload(name, &done, move || {
                    io_outcome(workloads::sync_writes(
                        &mut Duty::new(pct, epoch),
                        pct,
                        &dir,
                    ))
                });
            }
            Workload::MmapReads => {
                let dir = settings.data_dir.clone();
                spawn_workload(name, &done, move || {
                    io_outcome(workloads::mmap_reads(&mut Duty::new(pct, epoch), &dir))
                });
            }
            Workload::AllocBlocks => {
                let max_bytes = usize::try_from(settings.alloc_max_mb)
                    .unwrap_or(usize::MAX / (1 << 20))
                    .saturating_mul(1 << 20);
                spawn_workload(name, &done, move || {
                    workloads::alloc_blocks(&mut Duty::new(pct, epoch), max_bytes)
                });
            }
        }
    }
    drop(done);

    // The workloads loop forever; the main thread waits here until one of them stops.
    let (name, outcome) = match stopped.recv() {
        Ok(stop) => stop,
        Err(_) => process::exit(1),
    };
    let why = match outcome {
        Ok(msg) => msg,
        Err(panic) => panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panicked".to_string()),
    };
    eprintln!("demo-node: workload {name} stopped: {why}");
    process::exit(1);
}
