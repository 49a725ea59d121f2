//! The native fold of a perf capture: perf.data read by devprof (`profile::perfdata::stacks`),
//! the files its stacks point into fetched from the container into the store's symbol cache
//! and named by devprof's symbolizer, kernel frames named from the container's kallsyms.
//! A DWARF capture's user stacks are unwound with the binaries it mapped, fetched the same
//! way first. `perf script` stays the fallback (JIT code without a perf map, files it
//! cannot fetch).

use super::kernel::{kernel_listing_script, kernel_symbols, KernelPreload, MODULES_AGAIN};
use super::CollectJob;
use crate::docker::binary::{self, Fetched, FileStat};
use crate::docker::wire;
use crate::docker::ContainerShell;
use crate::error::{Error, Result};
use crate::profile::perfdata::stacks::{self, NativeFold, RawProfile, Symbols};
use crate::profile::perfdata::unwind;
use crate::profile::timeline::TimelineWriter;
use crate::runtime::perf_map;
use crate::settings::{CallGraph, FoldPath};
use crate::symbols::binary::SYMBOL_CACHE;
use crate::symbols::jitdump;
use crate::symbols::module_loader::Loader;
use crate::symbols::perfmap::PerfMap;
use crate::text::quote;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The manifest's names for the two paths.
pub const NATIVE: &str = "native";
pub const PERF_SCRIPT: &str = "perf-script";

/// Above this share of samples it cannot name as perf would, auto mode hands the capture
/// to `perf script`.
const DOUBT_LIMIT: f64 = 0.02;

/// Whether this capture is folded natively first: asked for, or auto on a frame-pointer
/// or DWARF capture whose `perf script` text is not wanted anyway.
pub fn wanted(job: &CollectJob<'_>) -> bool {
    match job.fold {
        FoldPath::Native => true,
        FoldPath::PerfScript => false,
        FoldPath::Auto => {
            matches!(job.call_graph, CallGraph::FramePointer | CallGraph::Dwarf) && !job.keep_script
        }
    }
}

/// Whether auto mode may keep a native fold.
pub fn trusted(fold: &NativeFold) -> bool {
    fold.doubtful_share() <= DOUBT_LIMIT
}

/// What the manifest says about a kept native fold.
pub fn notes(fold: &NativeFold) -> Vec<String> {
    let mut notes = Vec::new();
    if !fold.missing_modules.is_empty() {
        notes.push(format!(
            "native fold: no symbols for {} (their frames are named by file)",
            fold.missing_modules.join(", ")
        ));
    }
    if fold.unwind_incomplete > 0 {
        notes.push(format!(
            "native fold: {} of {} samples have user stacks that could not be unwound to their \
             first function (folded as far as they go)",
            fold.unwind_incomplete, fold.samples
        ));
    }
    if fold.jit_samples > 0 {
        notes.push(format!(
            "native fold: {} samples in JIT code without a readable perf map or jitdump, unnamed (--fold perf-script tries a perf map where perf finds it; it cannot read a jitdump)",
            fold.jit_samples
        ));
    }
    notes
}

/// The files the process maps now, with their size, mtime and inode in the container (the
/// files a recording's stacks point into are nearly always among them; at most
/// `FETCH_FILES_BUDGET`): the files in `/proc/PID/maps`, seen under `root`, as
/// one encoded NUL-separated list (a file name is the process's to choose), then one
/// `SIZE MTIME INODE` line for each from a single `stat` (a fork per file would cost more
/// than the exec it saves on a loaded host).
fn mapped_stats_script(root: &str, pid: u32) -> String {
    format!(
        "{prelude}\nset --; last=; n=0\n\
         while read -r a b c d e f; do\n\
           case \"$f\" in /*) ;; *) continue;; esac\n\
           [ \"$f\" = \"$last\" ] && continue; last=$f\n\
           [ -f {root}\"$f\" ] || continue\n\
           n=$((n+1)); [ $n -le {budget} ] || break\n\
           set -- \"$@\" {root}\"$f\"\n\
         done < /proc/{pid}/maps\n\
         if [ $# -gt 0 ]; then\n\
           printf 'files\\t'; printf '%s\\0' \"$@\" | enc {limit}; echo\n\
           stat -L -c '%s %Y %i' -- \"$@\" 2>/dev/null\n\
         fi",
        prelude = wire::PRELUDE,
        budget = binary::FETCH_FILES_BUDGET,
        root = quote(root),
        limit = binary::FETCH_FILES_BUDGET * (wire::NAME_LIMIT + 1),
    )
}

/// The `files` record, then a stat line for each file in it. A list and lines that do not
/// pair up (a file gone between the two, `enc` without `od`) give nothing: the fold then
/// asks for what it needs.
fn parse_mapped_stats(text: &str, root: &str) -> HashMap<String, FileStat> {
    let mut lines = text.lines();
    let Some(files) = lines
        .by_ref()
        .map(wire::Record::parse)
        .find(|r| r.key == "files")
        .and_then(|r| r.bytes(0))
    else {
        return HashMap::new();
    };
    // Every name ends with its NUL (without `od`, `enc` turns them into spaces).
    let Some(files) = files.strip_suffix(b"\0") else {
        return HashMap::new();
    };
    let paths: Vec<&[u8]> = files.split(|b| *b == 0).collect();
    let stats: Vec<Option<FileStat>> = lines.map(binary::parse_stat).collect();
    if paths.len() != stats.len() || stats.iter().any(Option::is_none) {
        return HashMap::new();
    }
    paths
        .into_iter()
        .zip(stats)
        .filter_map(|(path, stat)| {
            let path = std::str::from_utf8(path).ok()?.strip_prefix(root)?;
            Some((path.to_string(), stat?))
        })
        .collect()
}

/// What is read from the container while the recording is copied out (`prefetch`).
#[derive(Default)]
pub struct Prefetched {
    kernel: Option<String>,
    stats: HashMap<String, FileStat>,
    /// The perf map check's verdict line (`perf_map::map_check_text`), when it came.
    perf_map_verdict: String,
}

impl Prefetched {
    /// Whether perf must not read the recorded process's perf map: Some(why), also when
    /// the prefetch gave no verdict.
    pub fn perf_map_refused(&self, pid: u32) -> Option<String> {
        perf_map::refused_by(&self.perf_map_verdict, pid)
    }
}

/// Ends the mapped files' part of the prefetch's output; the kernel's listing follows.
const MAPPED_END: &str = "@@devprof-mapped-end";

/// Reads, beside the copy-out of the recording, what the fold would otherwise ask the
/// container after it: whether perf may read the process's perf map, the files the
/// process maps and the kernel's listing, in one exec (on a loaded host an exec costs its
/// CPU more than its wait).
pub async fn prefetch(job: &CollectJob<'_>) -> Prefetched {
    let root = job.symfs.as_deref().unwrap_or("");
    let cache = job.stem.dir().join(SYMBOL_CACHE);
    let script = prefetch_script(job.symfs.as_deref(), job.pid, &cache);
    match job.shell.sh(&script).await {
        Ok(out) => parse_prefetch(&out.stdout, out.success(), root),
        Err(_) => Prefetched::default(),
    }
}

fn prefetch_script(root: Option<&str>, pid: u32, cache: &Path) -> String {
    format!(
        "{}{}\necho {MAPPED_END}\n{}",
        perf_map::map_check_text(pid, root),
        mapped_stats_script(root.unwrap_or(""), pid),
        kernel_listing_script(cache)
    )
}

/// The prefetch's output: the perf map's verdict on its first line, the mapped files'
/// stats, and the kernel's listing, kept only from a script that succeeded.
fn parse_prefetch(stdout: &str, success: bool, root: &str) -> Prefetched {
    let (verdict, rest) = stdout.split_once('\n').unwrap_or((stdout, ""));
    let perf_map_verdict = verdict.to_string();
    let Some((mapped, kernel)) = rest.split_once(&format!("{MAPPED_END}\n")) else {
        return Prefetched {
            perf_map_verdict,
            ..Prefetched::default()
        };
    };
    Prefetched {
        kernel: success.then(|| kernel.to_string()),
        stats: parse_mapped_stats(mapped, root),
        perf_map_verdict,
    }
}

/// Copies `paths` (as the capture names them) out of the container into the store's
/// symbol cache; the ones that came out, with their local copies.
async fn fetch_local(
    job: &CollectJob<'_>,
    paths: Vec<String>,
    known: &HashMap<String, FileStat>,
) -> Vec<(String, PathBuf)> {
    // In a sidecar, the target's files are seen under its /proc/<pid>/root.
    let root = job.symfs.as_deref().unwrap_or("");
    let fetched = binary::fetch_cached_knowing(
        job.shell,
        root,
        job.target_container,
        &paths,
        job.stem.dir(),
        known,
    )
    .await;
    paths
        .into_iter()
        .zip(fetched)
        .filter_map(|(path, f)| match f {
            Fetched::Local { local, .. } => Some((path, local)),
            Fetched::Missing | Fetched::Failed(_) => None,
        })
        .collect()
}

/// The extension of the recorded process's perf map, kept beside the capture so a later
/// fold names its JIT code as this one did.
pub const PERF_MAP: &str = "perf-map";

/// The names of the JIT code of the processes with JIT frames, read out of the container
/// after the window (a runtime appends as it compiles, so they name everything sampled):
/// each one's perf map (`/tmp/perf-<pid>.map`) and its jitdump (`jit-<pid>.dump`, found
/// where the recording saw the runtime map it), the jitdump's entries after the map's. The
/// recorded process's names are kept as `<stem>.perf-map`, in a perf map's text; names that
/// cannot be read leave their frames unnamed, counted, and auto mode then asks perf script.
/// Also returns notes for the manifest (a jitdump read, or why not).
async fn jit_names(job: &CollectJob<'_>, raw: &RawProfile) -> (HashMap<u32, PerfMap>, Vec<String>) {
    let mut maps = HashMap::new();
    let mut notes = Vec::new();
    for pid in raw.jit_pids() {
        let map = perf_map::read_perf_map(job.shell, pid, job.symfs.as_deref())
            .await
            .ok()
            .map(|text| PerfMap::parse(&text));
        let dumped = match raw.modules.iter().find(|m| jitdump::is_jitdump_of(m, pid)) {
            Some(path) => read_jitdump(job, pid, path, &mut notes).await,
            None => None,
        };
        let names = match (map, dumped) {
            (Some(map), Some(dumped)) => map.then(dumped),
            (map, dumped) => match map.or(dumped) {
                Some(names) => names,
                None => continue,
            },
        };
        if pid == job.pid {
            // Re-analysis loses only JIT names if this copy cannot be written.
            let _ = std::fs::write(job.stem.path(PERF_MAP), names.to_text());
        }
        maps.insert(pid, names);
    }
    (maps, notes)
}

/// The code names in the jitdump at `path` (as the recording names it), with a note.
async fn read_jitdump(
    job: &CollectJob<'_>,
    pid: u32,
    path: &str,
    notes: &mut Vec<String>,
) -> Option<PerfMap> {
    let shown = crate::text::printable(path);
    let bytes = match perf_map::read_jit_file(job.shell, path, job.symfs.as_deref()).await {
        Ok(bytes) => bytes,
        Err(why) => {
            notes.push(format!("the jitdump of pid {pid} was not read: {why}"));
            return None;
        }
    };
    match jitdump::parse(&bytes) {
        Ok(dump) => {
            notes.push(format!(
                "JIT code of pid {pid} named from its jitdump {shown} ({} code loads{})",
                dump.loads,
                if dump.truncated {
                    ", the last record still being written"
                } else {
                    ""
                }
            ));
            Some(dump.map)
        }
        Err(e) => {
            notes.push(format!(
                "{shown} of pid {pid} is no jitdump ({e}); not used"
            ));
            None
        }
    }
}

/// Folds the downloaded `<stem>.data` natively and writes its timeline; with notes on
/// how its JIT code was named.
pub async fn fold(
    job: &CollectJob<'_>,
    prefetched: Prefetched,
    preloaded: &KernelPreload,
) -> Result<(NativeFold, Vec<String>)> {
    let spinner = job
        .report
        .spinner("symbolizing and folding stacks (native)");
    let result = fold_inner(job, prefetched, preloaded).await;
    spinner.finish_and_clear();
    result
}

async fn fold_inner(
    job: &CollectJob<'_>,
    prefetched: Prefetched,
    preloaded: &KernelPreload,
) -> Result<(NativeFold, Vec<String>)> {
    let Prefetched {
        kernel: listing,
        stats,
        ..
    } = prefetched;
    let data = job.stem.path("data");
    let read_path = data.clone();
    let dwarf = job.call_graph == CallGraph::Dwarf;
    // A DWARF capture is unwound with every binary it mapped: they come out first.
    let mut binaries: Vec<(String, PathBuf)> = Vec::new();
    if dwarf {
        let listed = data.clone();
        let mapped = tokio::task::spawn_blocking(move || stacks::mapped_files(&listed))
            .await
            .map_err(|e| Error::io("read perf.data", std::io::Error::other(e)))?
            .map_err(|e| Error::io(format!("read {}", data.display()), e))?;
        binaries = fetch_local(job, mapped, &stats).await;
    }
    let inline = job.inline;
    let (raw, loader, early) = tokio::task::spawn_blocking(move || {
        // The binaries of a DWARF capture are here before the read: each one's symbols
        // are read on another core from the moment a stack first points into it.
        let loader = Loader::new(inline);
        let mut early: Vec<String> = Vec::new();
        if !dwarf {
            let raw = stacks::read(&read_path, true, &mut |_| {});
            return raw.map(|raw| (raw, loader, early));
        }
        let vdso = unwind::own_vdso();
        let open = |path: &str| -> Option<stacks::Image> {
            if path == "[vdso]" {
                return vdso.clone().map(stacks::Image::Owned);
            }
            let (_, local) = binaries.iter().find(|(p, _)| p == path)?;
            stacks::Image::map(local).ok()
        };
        let mut seen = |path: &str| {
            if let Some(binary) = binaries.iter().find(|(p, _)| p == path) {
                loader.load(binary.0.clone(), binary.1.clone());
                early.push(binary.0.clone());
            }
        };
        let raw = stacks::read_unwound(&read_path, true, &open, &mut seen);
        raw.map(|raw| (raw, loader, early))
    })
    .await
    .map_err(|e| Error::io("read perf.data", std::io::Error::other(e)))?
    .map_err(|e| Error::io(format!("read {}", data.display()), e))?;

    job.report.mark("perf.data read");
    let paths = raw.files_used();
    let kernel = raw.has_kernel_frames();
    let (perf_maps, jit_notes) = jit_names(job, &raw).await;
    // The binaries and the kernel's symbols come out of the container at the same time.
    let cache = job.stem.dir().join(SYMBOL_CACHE);
    let kallsyms = async {
        if !kernel {
            // A listing the prefetch read whole is still kept for the boot's next fold.
            if let Some(whole) = listing.filter(|l| l.contains(MODULES_AGAIN)) {
                kernel_symbols(job.shell, &cache, &raw, Some(whole), preloaded).await;
            }
            return None;
        }
        kernel_symbols(job.shell, &cache, &raw, listing, preloaded).await
    };
    let (mut locals, kallsyms) = tokio::join!(fetch_local(job, paths, &stats), kallsyms);
    job.report.mark("symbol files fetched");
    if raw.modules.iter().any(|m| m == unwind::VDSO) {
        locals.extend(unwind::own_vdso_file(&cache).map(|local| (unwind::VDSO.to_string(), local)));
    }
    let timeline = job.stem.path("timeline");
    let clock = crate::profile::perfdata::recording_clock(&job.stem.path("data"))
        .ok()
        .flatten();
    tokio::task::spawn_blocking(move || -> std::io::Result<NativeFold> {
        let mut symbols = Symbols {
            kernel: kallsyms,
            ..Symbols::default()
        };
        for (path, local) in locals {
            if !early.contains(&path) {
                loader.load(path, local);
            }
        }
        symbols.modules.extend(loader.finish().modules);
        symbols.perf_maps.extend(perf_maps);
        let file = std::io::BufWriter::new(std::fs::File::create(&timeline)?);
        let mut writer = TimelineWriter::new(file)?;
        if let Some(clock) = &clock {
            writer.set_clock(clock);
        }
        let fold = stacks::fold(&raw, &symbols, inline, Some(&mut writer));
        writer.finish()?;
        Ok(fold)
    })
    .await
    .map_err(|e| Error::io("fold perf.data", std::io::Error::other(e)))?
    .map_err(|e| Error::io("write the timeline", e))
    .map(|fold| (fold, jit_notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::wire::encode;
    use crate::engines::perf::kernel::KALLSYMS_FOLLOWS;

    #[test]
    fn mapped_stats_pair_encoded_paths_with_stat_lines_or_give_nothing() {
        let list = encode(b"/r/usr/lib/libc.so.6\0/r/tmp/a\nfile\tb\0");
        let text = format!("files\t{list}\n1024 1700000000 42\n7 1 2\n");
        let stats = parse_mapped_stats(&text, "/r");
        assert_eq!(
            stats.get("/usr/lib/libc.so.6"),
            Some(&(1024, 1700000000, 42))
        );
        // A newline in a file's name stays in its name.
        assert_eq!(stats.get("/tmp/a\nfile\tb"), Some(&(7, 1, 2)));
        assert_eq!(stats.len(), 2, "{stats:?}");
        // One file gone before `stat` saw it: the lines no longer pair up.
        let short = format!("files\t{list}\n1024 1700000000 42\n");
        assert!(parse_mapped_stats(&short, "/r").is_empty());
        let bad = format!("files\t{list}\n1024 x 42\n7 1 2\n");
        assert!(parse_mapped_stats(&bad, "/r").is_empty());
        assert!(parse_mapped_stats("", "").is_empty());
        // A prefetch that failed keeps its stats, not its kernel listing.
        let failed = parse_prefetch(
            &format!(
                "@@devprof-perf-map 2 is not there\n{text}{MAPPED_END}\nboot\n{KALLSYMS_FOLLOWS}\n"
            ),
            false,
            "/r",
        );
        assert_eq!(failed.perf_map_refused(7), None);
        assert_eq!((failed.stats.len(), failed.kernel), (2, None));
        // Without the perf map's verdict first, the map counts as not checked: refused.
        let unjudged = parse_prefetch(&format!("{text}{MAPPED_END}\n"), true, "/r");
        assert!(unjudged
            .perf_map_refused(7)
            .unwrap()
            .contains("could not be checked"));
        let broken = parse_prefetch("@@devprof-perf-map 127 \n", true, "/r");
        assert!(broken
            .perf_map_refused(7)
            .unwrap()
            .contains("could not be checked"));
        let refused = parse_prefetch("@@devprof-perf-map 3 is a symbolic link\n", true, "/r");
        assert_eq!(
            refused.perf_map_refused(7).as_deref(),
            Some("/tmp/perf-7.map is a symbolic link")
        );
        // Names whose NULs became spaces (`enc` without `od`) are not taken.
        let spaced = format!("files\t{}\n7 1 2\n", encode(b"/r/app/x "));
        assert!(parse_mapped_stats(&spaced, "/r").is_empty());
    }

    /// The script as the container runs it, run here on this test's own process: its
    /// executable is listed with the size and inode the file has, after the perf map's
    /// verdict, and the kernel's listing (no copy kept: kallsyms too) follows.
    #[test]
    fn the_prefetch_script_lists_the_processs_files_with_their_stat_then_the_kernel() {
        let cache = tempfile::tempdir().unwrap();
        let script = prefetch_script(None, std::process::id(), cache.path());
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .expect("sh on this host");
        let prefetched = parse_prefetch(&String::from_utf8_lossy(&out.stdout), true, "");
        // This process has no perf map: nothing to refuse.
        assert_eq!(prefetched.perf_map_refused(std::process::id()), None);
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let kernel = prefetched.kernel.unwrap();
        assert!(
            kernel.starts_with(boot.trim()),
            "{}",
            &kernel[..80.min(kernel.len())]
        );
        assert!(kernel.contains(KALLSYMS_FOLLOWS) && kernel.contains(MODULES_AGAIN));
        let stats = prefetched.stats;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let meta = std::fs::metadata(&exe).unwrap();
        use std::os::unix::fs::MetadataExt;
        let listed = stats.get(exe.to_str().unwrap()).copied();
        assert_eq!(
            listed,
            Some((meta.len(), meta.mtime(), meta.ino())),
            "{stats:?}"
        );
    }
}
