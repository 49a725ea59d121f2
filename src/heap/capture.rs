//! The heap recipe: find the process, check that jemalloc profiling is on, obtain dumps
//! (fresh ones over a window, or ones already written), bring them and the binaries they
//! reference home through the archive API, symbolize, and write the folded stacks, the
//! memory flamegraph, the text report and the manifest.
//!
//! How fresh dumps are obtained: a process cannot be made to call `prof.dump` from outside
//! without a debugger (none in node images, and ptrace would stop it), so devprof uses what
//! the program offers. When it catches DEVPROF_HEAP_DUMP_SIGNAL (SIGUSR2; the convention:
//! the program calls jemalloc's `prof.dump` on it, as the demo node does), devprof sends it
//! at the start and at the end of the window, so the newest dump is the heap as the window
//! closes. Interval dumps (`lg_prof_interval`) written during the window are collected too;
//! they come every 2^N allocated bytes, so a quiet process may write none in a window and a
//! busy one many, which is why the signal is preferred when the program has it. A signal the
//! process does not catch would kill it (SIGUSR2's default action), so devprof checks the
//! process's caught-signal mask first and never sends one that is not caught.

use crate::capture::{quote, truncate};
use crate::docker::{ContainerShell, Docker, Shell};
use crate::error::{Error, Result};
use crate::heap::dumps::{
    catches, parse_listing, select, split_prefix, DumpFile, DumpKind, JemallocConf, SelectError,
    Selection,
};
use crate::heap::parse::{parse_dump, HeapDump, Measure};
use crate::heap::report::{build_profile, render_text, top_sites, HeapProfile, ReportHeader};
use crate::heap::symbolize::{
    basename, files_needed, symbolize_dumps, ModuleSymbols, SymbolizeStats,
};
use crate::heap::{DumpRecord, HeapRecord, ModuleRecord};
use crate::perf::ContainerFacts;
use crate::progress;
use crate::render::SvgSpec;
use crate::settings::{HeapSettings, HeapSource};
use crate::signals::Interrupts;
use crate::store::{self, ContainerRecord, Manifest, ProcessRecord, Stem};
use crate::target::{resolve_container, ContainerInfo, ProcInfo, ProcessSelector};
use chrono::Local;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a requested dump may take to appear and settle.
const DUMP_WAIT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(200);
/// Rows of each table in the text report.
const REPORT_ROWS: usize = 25;
/// The extensions a heap capture writes next to its manifest.
pub const HEAP_EXTENSIONS: &[&str] = &["folded", "svg", "txt"];
/// Where binaries fetched for symbols are cached, inside the container's store directory.
pub const SYMBOL_CACHE: &str = ".symbols";

/// What a finished heap capture produced.
#[derive(Debug)]
pub struct HeapOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
    pub report: String,
}

/// The process and what its jemalloc is set up to do.
struct HeapTarget {
    shell: Shell,
    container: ContainerInfo,
    process: ProcInfo,
    conf_variable: String,
    conf_text: String,
    conf: JemallocConf,
    dump_dir: String,
    dump_base: String,
    catches_signal: bool,
}

/// Dumps obtained for the capture: every one brought home, and those merged.
struct Obtained {
    collected: Vec<DumpFile>,
    merged: Vec<DumpFile>,
    how: String,
    window: Option<Duration>,
    interrupted: bool,
}

pub async fn run_heap(settings: &HeapSettings, interrupts: &mut Interrupts) -> Result<HeapOutcome> {
    let mut timings = BTreeMap::new();
    let t = Instant::now();
    let target = find_heap_target(&settings.target, &settings.process, settings.signal.1).await?;
    if settings.measure == Measure::Allocated && !target.conf.accumulates() {
        return Err(Error::Usage(format!(
            "--alloc needs accumulated counts, which jemalloc writes only with prof_accum:true; process {} of '{}' \
             runs with {}={}\n  add prof_accum:true to {} and restart the process, or drop --alloc (in-use bytes)",
            target.process.pid, target.container.name, target.conf_variable, target.conf_text, target.conf_variable
        )));
    }
    let mut warnings = Vec::new();
    if !target.conf.active() {
        warnings.push(format!(
            "prof_active:false in {}: jemalloc takes no samples until profiling is activated (mallctl prof.active)",
            target.conf_variable
        ));
    }
    timings.insert("probe".to_string(), t.elapsed().as_millis() as u64);

    let t = Instant::now();
    let obtained = match &settings.source {
        HeapSource::Existing(selection) => existing_dumps(&target, selection).await?,
        HeapSource::Window(window) => {
            fresh_dumps(
                &target,
                *window,
                &settings.signal.0,
                settings.signal.1,
                interrupts,
            )
            .await?
        }
    };
    timings.insert("obtain".to_string(), t.elapsed().as_millis() as u64);
    // A Ctrl-C not spent on ending the window: stop before writing anything.
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }

    // Every check passed: from here on, files are written.
    let dir = store::container_dir(&settings.output_dir, &target.container.name);
    let stem = Stem::reserve(&dir, "heap", Local::now())?;
    let mut downloaded = Vec::new();
    let result = tokio::select! {
        r = analyse(&target, &obtained, settings, &stem, &mut downloaded, &mut timings, &mut warnings) => r,
        _ = interrupts.next() => Err(Error::Interrupted),
    };
    match result {
        Ok((manifest, manifest_path, files, report)) => Ok(HeapOutcome {
            manifest,
            manifest_path,
            files,
            warnings,
            report,
        }),
        Err(e) => {
            stem.discard(HEAP_EXTENSIONS);
            for path in downloaded {
                let _ = std::fs::remove_file(path);
            }
            Err(e)
        }
    }
}

/// Connects, resolves the container, finds the process (no perf needed) and reads its
/// jemalloc settings; fails when profiling is off.
async fn find_heap_target(
    target: &str,
    selector: &ProcessSelector,
    signal: u32,
) -> Result<HeapTarget> {
    let docker = Docker::connect().await?;
    let containers = docker.containers().await?;
    let container = resolve_container(target, &containers)?;
    let shell = docker.shell(&container);
    let facts = ContainerFacts::probe(&shell).await?;
    let process = crate::capture::choose_process(&facts, selector, &container.name)?;
    let probe = shell.sh(&jemalloc_probe_script(process.pid)).await?;
    let facts = JemallocFacts::parse(&probe.stdout);
    let (variable, value) = facts.conf();
    let conf = JemallocConf::parse(&value.clone().unwrap_or_default());
    if !conf.profiling() {
        let found = match &value {
            None if facts.uses_jemalloc() => format!("{variable} is not set"),
            None => format!(
                "{variable} is not set, and no jemalloc was found in the program (a program with another allocator has no jemalloc heap profiles)"
            ),
            Some(v) => format!("{variable}={v} has no prof:true"),
        };
        return Err(Error::HeapProfilingOff {
            container: container.name.clone(),
            pid: process.pid,
            program: process.program().to_string(),
            variable,
            found,
        });
    }
    let (dump_dir, dump_base) = split_prefix(conf.prefix(), facts.cwd.as_deref().unwrap_or("/"));
    Ok(HeapTarget {
        catches_signal: facts.sigcgt.as_deref().is_some_and(|m| catches(m, signal)),
        shell,
        container,
        process,
        conf_variable: variable,
        conf_text: value.unwrap_or_default(),
        conf,
        dump_dir,
        dump_base,
    })
}

/// Prints `env`, `cwd`, `sigcgt` and `reads` (the variable the program's jemalloc reads,
/// found in its binary) lines for `pid`.
fn jemalloc_probe_script(pid: u32) -> String {
    format!(
        r#"p={pid}
tr '\0' '\n' < /proc/$p/environ 2>/dev/null | while IFS= read -r l; do
  case "$l" in _RJEM_MALLOC_CONF=*|MALLOC_CONF=*) printf 'env\t%s\n' "$l";; esac
done
printf 'cwd\t%s\n' "$(readlink /proc/$p/cwd 2>/dev/null)"
while read -r k v _; do [ "$k" = SigCgt: ] && printf 'sigcgt\t%s\n' "$v"; done < /proc/$p/status
while read -r _ _ _ _ _ f; do case "$f" in *jemalloc*) printf 'lib\t%s\n' "$f";; esac; done < /proc/$p/maps
if command -v grep >/dev/null 2>&1; then
  if grep -q -a _RJEM_MALLOC_CONF /proc/$p/exe 2>/dev/null; then printf 'reads\t_RJEM_MALLOC_CONF\n'
  elif grep -q -a MALLOC_CONF /proc/$p/exe 2>/dev/null; then printf 'reads\tMALLOC_CONF\n'
  fi
fi
"#
    )
}

#[derive(Debug, Default, PartialEq)]
struct JemallocFacts {
    env: Vec<(String, String)>,
    cwd: Option<String>,
    sigcgt: Option<String>,
    reads: Option<String>,
    jemalloc_libs: Vec<String>,
}

impl JemallocFacts {
    fn parse(text: &str) -> Self {
        let mut f = JemallocFacts::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once('\t') else {
                continue;
            };
            match k {
                "env" => {
                    if let Some((name, value)) = v.split_once('=') {
                        f.env.push((name.to_string(), value.to_string()));
                    }
                }
                "cwd" if !v.trim().is_empty() => f.cwd = Some(v.trim().to_string()),
                "sigcgt" => f.sigcgt = Some(v.trim().to_string()),
                "reads" => f.reads = Some(v.trim().to_string()),
                "lib" => f.jemalloc_libs.push(v.trim().to_string()),
                _ => {}
            }
        }
        f
    }

    fn uses_jemalloc(&self) -> bool {
        self.reads.is_some() || !self.jemalloc_libs.is_empty()
    }

    /// The variable this program's jemalloc reads and its value: the one found in the
    /// binary; else a set one (prefixed first); else `MALLOC_CONF` (unprefixed builds).
    fn conf(&self) -> (String, Option<String>) {
        let value_of = |name: &str| {
            self.env
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let variable = match &self.reads {
            Some(v) => v.clone(),
            None if !self.jemalloc_libs.is_empty() => "MALLOC_CONF".to_string(),
            None => ["_RJEM_MALLOC_CONF", "MALLOC_CONF"]
                .into_iter()
                .find(|n| value_of(n).is_some_and(|v| JemallocConf::parse(&v).profiling()))
                .or_else(|| {
                    ["_RJEM_MALLOC_CONF", "MALLOC_CONF"]
                        .into_iter()
                        .find(|n| value_of(n).is_some())
                })
                .unwrap_or(
                    "_RJEM_MALLOC_CONF (tikv-jemallocator) or MALLOC_CONF (unprefixed jemalloc)",
                )
                .to_string(),
        };
        let value = value_of(&variable);
        (variable, value)
    }
}

/// Lists `<dir>/<base>.*.heap` with sizes and modification times.
fn listing_script(dir: &str, base: &str) -> String {
    format!(
        r#"cd {dir} 2>/dev/null || {{ echo "nodir"; exit 0; }}
for f in {base}.*.heap; do
  [ -f "$f" ] || continue
  s=$(stat -c '%s %Y' -- "$f" 2>/dev/null) || s="$(wc -c < "$f") 0"
  printf 'dump\t%s\t%s\t%s\n' "$f" "${{s% *}}" "${{s#* }}"
done
"#,
        dir = quote(dir),
        base = quote(base)
    )
}

async fn list_dumps(target: &HeapTarget) -> Result<Vec<DumpFile>> {
    let out = target
        .shell
        .sh(&listing_script(&target.dump_dir, &target.dump_base))
        .await?;
    if out.stdout.trim() == "nodir" {
        return Ok(Vec::new());
    }
    Ok(parse_listing(&target.dump_base, &out.stdout))
}

fn dump_names(dumps: &[DumpFile]) -> Vec<String> {
    dumps
        .iter()
        .map(|d| {
            format!(
                "{} (pid {}, seq {}, {}, {})",
                d.name,
                d.pid,
                d.seq,
                d.kind.describe(),
                local_time(d.mtime)
            )
        })
        .collect()
}

fn local_time(mtime: i64) -> String {
    chrono::DateTime::from_timestamp(mtime, 0)
        .map(|t| {
            t.with_timezone(&Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| mtime.to_string())
}

async fn existing_dumps(target: &HeapTarget, selection: &Selection) -> Result<Obtained> {
    let all = list_dumps(target).await?;
    let pid = target.process.pid;
    let own: Vec<DumpFile> = all.iter().filter(|d| d.pid == pid).cloned().collect();
    let listing = |dumps: &[DumpFile]| -> String {
        if dumps.is_empty() {
            "there are none".to_string()
        } else {
            format!(
                "dumps there, oldest first:\n{}",
                dump_names(dumps)
                    .iter()
                    .map(|n| format!("    - {n}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        }
    };
    let make_one = format!(
        "make one with `devprof heap {} 10` (asks the process for fresh dumps)",
        target.container.name
    );
    let merged = select(&all, pid, selection).map_err(|e| {
        let (what, hint) = match e {
            SelectError::NoDumps => (
                format!("process {pid} has written no heap dump yet"),
                format!("{make_one}; {}", listing(&all)),
            ),
            SelectError::TooFew { wanted, have } => (
                format!(
                    "--last {wanted}: process {pid} has written only {have} dump{}",
                    if have == 1 { "" } else { "s" }
                ),
                format!("{}; {make_one}", listing(&own)),
            ),
            SelectError::Missing(names) => {
                (format!("no dump named {}", names.join(", ")), listing(&all))
            }
        };
        Error::HeapNoDumps {
            container: target.container.name.clone(),
            what,
            dir: target.dump_dir.clone(),
            hint,
        }
    })?;
    let how = match selection {
        Selection::Latest => "--latest: the newest dump the process wrote".to_string(),
        Selection::All => format!("--all: every dump of the process ({})", merged.len()),
        Selection::Last(n) => format!("--last {n}: the newest {n} dumps of the process"),
        Selection::Files(names) => format!(
            "--files: {} named dump{}",
            names.len(),
            if names.len() == 1 { "" } else { "s" }
        ),
    };
    Ok(Obtained {
        collected: merged.clone(),
        merged,
        how,
        window: None,
        interrupted: false,
    })
}

/// Over the window: the signal at the start and the end (when the process catches it),
/// interval dumps meanwhile. The newest fresh dump is rendered; all are collected.
async fn fresh_dumps(
    target: &HeapTarget,
    window: Duration,
    signal_name: &str,
    signal: u32,
    interrupts: &mut Interrupts,
) -> Result<Obtained> {
    let pid = target.process.pid;
    let interval = target.conf.lg_interval();
    if !target.catches_signal && interval.is_none() {
        return Err(Error::HeapDumpUnavailable {
            container: target.container.name.clone(),
            pid,
            detail: format!(
                "it does not catch SIG{signal_name} (sending it would kill it) and interval dumps are off (no lg_prof_interval in {})",
                target.conf_variable
            ),
            hint: format!(
                "either have the program call jemalloc's prof.dump on SIG{signal_name} (DEVPROF_HEAP_DUMP_SIGNAL names another signal), \
                 or add lg_prof_interval:N to {} (a dump per 2^N allocated bytes; restart needed), \
                 or render dumps it already wrote: `devprof heap {} --latest`",
                target.conf_variable, target.container.name
            ),
        });
    }
    let before = list_dumps(target).await?;
    let mut last_seq = before.iter().filter(|d| d.pid == pid).map(|d| d.seq).max();
    let label = format!("heap dumps of {} (pid {pid})", target.container.name);
    let bar = progress::capture_bar(window, &label);
    if target.catches_signal {
        bar.set_message(format!("SIG{signal_name}: dump at the start"));
        let first = request_dump(target, signal_name, signal, last_seq).await;
        match first {
            Ok(d) => last_seq = Some(d.seq),
            Err(e) => {
                bar.finish_and_clear();
                return Err(e);
            }
        }
    }
    bar.set_message(match (target.catches_signal, interval) {
        (true, Some(n)) => format!("interval dumps every 2^{n} bytes; SIG{signal_name} at the end"),
        (true, None) => format!("SIG{signal_name} at the end"),
        (false, Some(n)) => format!("interval dumps every 2^{n} bytes"),
        (false, None) => unreachable!("checked above"),
    });
    let started = Instant::now();
    let mut interrupted = false;
    loop {
        let elapsed = started.elapsed();
        if elapsed >= window {
            break;
        }
        tokio::select! {
            _ = interrupts.next() => {
                interrupted = true;
                bar.set_message("Ctrl-C: ending the window (again aborts)");
                break;
            }
            _ = tokio::time::sleep(Duration::from_millis(100).min(window - elapsed)) => {
                let tenths = (started.elapsed().as_millis() / 100) as u64;
                bar.set_position(tenths.min(bar.length().unwrap_or(tenths)));
            }
        }
    }
    let recorded = started.elapsed().min(window);
    if interrupts.pending() {
        bar.abandon_with_message("aborted");
        return Err(Error::Interrupted);
    }
    if target.catches_signal {
        bar.set_message(format!("SIG{signal_name}: dump at the end"));
        let now = list_dumps(target).await?;
        let seq = now
            .iter()
            .filter(|d| d.pid == pid)
            .map(|d| d.seq)
            .max()
            .max(last_seq);
        if let Err(e) = request_dump(target, signal_name, signal, seq).await {
            bar.finish_and_clear();
            return Err(e);
        }
    }
    bar.finish_and_clear();
    let before_max = before.iter().filter(|d| d.pid == pid).map(|d| d.seq).max();
    let after = list_dumps(target).await?;
    let fresh: Vec<DumpFile> = after
        .into_iter()
        .filter(|d| d.pid == pid && before_max.is_none_or(|m| d.seq > m))
        .collect();
    let Some(newest) = fresh.last().cloned() else {
        return Err(Error::HeapDumpUnavailable {
            container: target.container.name.clone(),
            pid,
            detail: format!(
                "no interval dump was written in the {:.0} s window (one comes every 2^{} allocated bytes)",
                recorded.as_secs_f64(),
                interval.unwrap_or(0)
            ),
            hint: "lengthen the window or lower lg_prof_interval, or have the program call prof.dump on a signal".into(),
        });
    };
    let intervals = fresh
        .iter()
        .filter(|d| matches!(d.kind, DumpKind::Interval(_)))
        .count();
    let how = match (target.catches_signal, intervals) {
        (true, 0) => format!("SIG{signal_name} at the start and the end of the window (the program calls prof.dump); the end dump is rendered"),
        (true, n) => format!("SIG{signal_name} at the start and the end of the window, and {n} interval dumps; the end dump is rendered"),
        (false, n) => format!("{n} interval dumps written in the window (lg_prof_interval); the newest is rendered"),
    };
    Ok(Obtained {
        collected: fresh,
        merged: vec![newest],
        how,
        window: Some(recorded),
        interrupted,
    })
}

/// Sends the dump signal and waits for a new dump (sequence above `after_seq`) to appear
/// and stop growing.
async fn request_dump(
    target: &HeapTarget,
    signal_name: &str,
    signal: u32,
    after_seq: Option<u64>,
) -> Result<DumpFile> {
    let pid = target.process.pid;
    let unavailable = |detail: String| {
        Error::HeapDumpUnavailable {
        container: target.container.name.clone(),
        pid,
        detail,
        hint: format!(
            "check that the process may write to {} (prof_prefix in {}), and that the program calls jemalloc's \
             prof.dump on SIG{signal_name}; its log may say why (`docker logs {}`)",
            target.dump_dir, target.conf_variable, target.container.name
        ),
    }
    };
    let sent = target
        .shell
        .run(&["kill", &format!("-{signal}"), &pid.to_string()])
        .await?;
    if !sent.success() {
        return Err(unavailable(format!(
            "kill -{signal} {pid} failed: {}",
            sent.stderr.trim()
        )));
    }
    let deadline = Instant::now() + DUMP_WAIT;
    let mut seen: Option<DumpFile> = None;
    loop {
        tokio::time::sleep(POLL).await;
        let newest = list_dumps(target)
            .await?
            .into_iter()
            .filter(|d| d.pid == pid && after_seq.is_none_or(|s| d.seq > s))
            .max_by_key(|d| d.seq);
        match (newest, &seen) {
            // Settled: the same file, the same size, twice in a row.
            (Some(d), Some(prev)) if d.name == prev.name && d.size == prev.size && d.size > 0 => {
                return Ok(d)
            }
            (Some(d), _) => seen = Some(d),
            (None, _) => {}
        }
        if Instant::now() > deadline {
            return Err(unavailable(format!(
                "no new dump appeared in {} within {} s of SIG{signal_name}",
                target.dump_dir,
                DUMP_WAIT.as_secs()
            )));
        }
    }
}

/// Downloads, parses, symbolizes and writes everything. `downloaded` collects the dump
/// files written, so a failure can remove them.
async fn analyse(
    target: &HeapTarget,
    obtained: &Obtained,
    settings: &HeapSettings,
    stem: &Stem,
    downloaded: &mut Vec<PathBuf>,
    timings: &mut BTreeMap<String, u64>,
    warnings: &mut Vec<String>,
) -> Result<(Manifest, PathBuf, Vec<(PathBuf, u64)>, String)> {
    let dir = stem.dir().to_path_buf();
    let t = Instant::now();
    let spinner = progress::spinner(&format!(
        "copying {} dump(s) out of {}",
        obtained.collected.len(),
        target.container.name
    ));
    let mut local_names: HashMap<String, String> = HashMap::new();
    for d in &obtained.collected {
        let (local, fresh) = fetch_dump(target, d, &dir)
            .await
            .inspect_err(|_| spinner.finish_and_clear())?;
        if fresh {
            downloaded.push(dir.join(&local));
        }
        local_names.insert(d.name.clone(), local);
    }
    spinner.finish_and_clear();
    timings.insert("download_dumps".to_string(), t.elapsed().as_millis() as u64);

    let t = Instant::now();
    let mut parsed: Vec<HeapDump> = Vec::new();
    for d in &obtained.merged {
        let path = dir.join(&local_names[&d.name]);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        let dump = parse_dump(&text).map_err(|e| Error::HeapDumpInvalid {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        parsed.push(dump);
    }
    timings.insert("parse".to_string(), t.elapsed().as_millis() as u64);
    let dump_refs: Vec<&HeapDump> = parsed.iter().collect();
    if settings.measure == Measure::Allocated && !dump_refs.iter().any(|d| d.has_accumulated()) {
        return Err(Error::Usage(format!(
            "--alloc: the dumps have no accumulated counts (written without prof_accum:true); drop --alloc, or add \
             prof_accum:true to {} and restart the process",
            target.conf_variable
        )));
    }

    // The binaries the stacks point into, fetched once into the cache.
    let t = Instant::now();
    let spinner = progress::spinner("fetching binaries for symbols");
    let (modules, module_records) = fetch_modules(target, &dump_refs, &dir, warnings).await;
    spinner.finish_and_clear();
    timings.insert("fetch_binaries".to_string(), t.elapsed().as_millis() as u64);

    let t = Instant::now();
    let spinner = progress::spinner("symbolizing");
    let (resolved, stats) = symbolize_dumps(&dump_refs, &modules);
    spinner.finish_and_clear();
    timings.insert("symbolize".to_string(), t.elapsed().as_millis() as u64);

    let t = Instant::now();
    let profile = build_profile(
        target.process.program(),
        &dump_refs,
        &resolved,
        settings.measure,
    );
    if profile.total_bytes == 0 {
        return Err(Error::HeapNoDumps {
            container: target.container.name.clone(),
            what: format!("the dumps hold no {} bytes", settings.measure.label()),
            dir: target.dump_dir.clone(),
            hint: "the process had nothing sampled yet; let it run longer, or lower lg_prof_sample"
                .into(),
        });
    }
    let gap = profile.header_gap_percent();
    if gap > 1.0 {
        warnings.push(format!(
            "the stacks add up to {} bytes, {gap:.1}% away from the dumps' t*: total of {} bytes",
            profile.total_bytes, profile.header_bytes
        ));
    }
    let period = dump_refs.first().map(|d| d.sample_period).unwrap_or(0);
    let subject = format!(
        "{} (pid {}: {})",
        target.container.name,
        target.process.pid,
        truncate(&target.process.cmdline, 60)
    );
    let header = ReportHeader {
        subject: subject.clone(),
        dumps: dump_names(&obtained.merged),
        sample_period: period,
        symbols: stats.clone(),
    };
    let report = render_text(&profile, &header, REPORT_ROWS);
    write_text(&stem.path("txt"), &report)?;
    crate::capture::cpu::write_folded(&profile.folded, &stem.path("folded"))?;
    let spec = SvgSpec {
        title: format!(
            "Heap: {}, {} bytes",
            target.container.name,
            settings.measure.label()
        ),
        subtitle: Some(format!(
            "pid {} {} · {} dump{} · {} total · {}",
            target.process.pid,
            truncate(&target.process.cmdline, 60),
            obtained.merged.len(),
            if obtained.merged.len() == 1 { "" } else { "s" },
            crate::units::human_bytes(profile.total_bytes),
            Local::now().format("%Y-%m-%d %H:%M:%S")
        )),
        count_name: "bytes".into(),
        palette: inferno::flamegraph::color::Palette::Basic(
            inferno::flamegraph::color::BasicPalette::Mem,
        ),
    };
    crate::capture::cpu::write_svg(&profile.folded, &spec, &stem.path("svg"))?;
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);

    let mut manifest = heap_manifest(
        target,
        settings,
        obtained,
        &profile,
        &stats,
        module_records,
        &local_names,
        timings.clone(),
        period,
    );
    let mut files: Vec<(PathBuf, u64)> = obtained
        .collected
        .iter()
        .map(|d| manifest.record_file(&dir, &local_names[&d.name]))
        .collect();
    files.extend(manifest.record_stem_files(stem, HEAP_EXTENSIONS));
    manifest.notes.extend(warnings.iter().cloned());
    let manifest_path = manifest.write(stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok((manifest, manifest_path, files, report))
}

fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// Brings one dump home under its own name (a copy already there with the same size is
/// the same dump and is reused). Should a different file hold the name (the process was
/// restarted with the same pid and counted again from 0), the new copy gets the dump's
/// time in its name. Returns the local name and whether it was downloaded now.
async fn fetch_dump(target: &HeapTarget, dump: &DumpFile, dir: &Path) -> Result<(String, bool)> {
    let mut local = dump.name.clone();
    let existing = dir.join(&local);
    if let Ok(meta) = std::fs::symlink_metadata(&existing) {
        if meta.is_file() && meta.len() == dump.size {
            return Ok((local, false));
        }
        local = format!(
            "{}.t{}.heap",
            dump.name.trim_end_matches(".heap"),
            dump.mtime
        );
        if std::fs::symlink_metadata(dir.join(&local))
            .is_ok_and(|m| m.is_file() && m.len() == dump.size)
        {
            return Ok((local, false));
        }
    }
    let source = format!("{}/{}", target.dump_dir.trim_end_matches('/'), dump.name);
    let entry = PathBuf::from(&dump.name);
    let new_name = PathBuf::from(&local);
    target
        .shell
        .docker()
        .download(&target.container.name, &source, dir, move |e| {
            (e == entry).then(|| new_name.clone())
        })
        .await?;
    if !dir.join(&local).is_file() {
        return Err(Error::HeapNoDumps {
            container: target.container.name.clone(),
            what: format!("dump {} disappeared before it could be copied", dump.name),
            dir: target.dump_dir.clone(),
            hint: "something removed it meanwhile; run again".into(),
        });
    }
    Ok((local, true))
}

/// Fetches every file the stacks point into (once, into `.symbols/<key>/` of the store
/// directory, keyed by path, size and time in the container) and reads its symbols. A
/// file that cannot be fetched or read leaves its addresses as module+offset.
async fn fetch_modules(
    target: &HeapTarget,
    dumps: &[&HeapDump],
    dir: &Path,
    warnings: &mut Vec<String>,
) -> (HashMap<String, Option<ModuleSymbols>>, Vec<ModuleRecord>) {
    let paths = files_needed(dumps);
    let mut modules = HashMap::new();
    let mut records = Vec::new();
    if paths.is_empty() {
        return (modules, records);
    }
    let script: String = paths
        .iter()
        .map(|p| {
            format!(
                "printf 'file\\t%s\\n' \"$(stat -L -c '%s %Y %i' -- {} 2>/dev/null)\"\n",
                quote(p)
            )
        })
        .collect();
    let stats: Vec<Option<(u64, i64, u64)>> = match target.shell.sh(&script).await {
        Ok(out) => {
            let lines: Vec<&str> = out
                .stdout
                .lines()
                .filter_map(|l| l.strip_prefix("file\t"))
                .collect();
            paths
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    let mut f = lines.get(i)?.split_whitespace();
                    Some((
                        f.next()?.parse().ok()?,
                        f.next()?.parse().ok()?,
                        f.next()?.parse().ok()?,
                    ))
                })
                .collect()
        }
        Err(_) => vec![None; paths.len()],
    };
    for (path, stat) in paths.iter().zip(stats) {
        let mut record = ModuleRecord {
            path: path.clone(),
            symbols: String::new(),
            cached: None,
        };
        let Some((size, mtime, inode)) = stat else {
            record.symbols = "missing: not found in the container".into();
            warnings.push(format!(
                "{path} is not in the container any more: its frames stay as {}+offset",
                basename(path)
            ));
            modules.insert(path.clone(), None);
            records.push(record);
            continue;
        };
        for dump in dumps {
            if dump
                .mappings
                .iter()
                .any(|m| m.file() == Some(path.as_str()) && m.inode != 0 && m.inode != inode)
            {
                warnings.push(format!(
                    "{path} in the container is not the file the dump mapped (inode changed): names from it may be wrong"
                ));
                break;
            }
        }
        let key = cache_key(path, size, mtime);
        let relative = PathBuf::from(SYMBOL_CACHE).join(&key).join(basename(path));
        let local = dir.join(&relative);
        let present =
            std::fs::symlink_metadata(&local).is_ok_and(|m| m.is_file() && m.len() == size);
        if !present {
            // A partial copy from an interrupted run: this cache is devprof's own.
            if std::fs::symlink_metadata(&local).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(&local);
            }
            let entry = PathBuf::from(basename(path));
            let rel = relative.clone();
            let fetched = target
                .shell
                .docker()
                .download(&target.container.name, path, dir, move |e| {
                    (e == entry).then(|| rel.clone())
                })
                .await;
            if let Err(e) = fetched {
                record.symbols = format!("missing: {e}");
                warnings.push(format!("could not copy {path} out of the container ({e}): its frames stay as {}+offset", basename(path)));
                modules.insert(path.clone(), None);
                records.push(record);
                continue;
            }
        }
        record.cached = Some(relative.display().to_string());
        match ModuleSymbols::from_elf(&local) {
            Ok(m) => {
                record.symbols = format!("{:?}", m.kind).to_lowercase();
                if m.symbol_count() == 0 && m.kind != crate::heap::symbolize::SymbolKind::Dwarf {
                    record.symbols = "missing: stripped (no symbol table)".into();
                }
                modules.insert(path.clone(), Some(m));
            }
            Err(e) => {
                record.symbols = format!("missing: {e}");
                modules.insert(path.clone(), None);
            }
        }
        records.push(record);
    }
    (modules, records)
}

/// A stable directory name for one version of a file: FNV-1a of path, size and time.
fn cache_key(path: &str, size: u64, mtime: i64) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in format!("{path}\0{size}\0{mtime}").bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

#[allow(clippy::too_many_arguments)]
fn heap_manifest(
    target: &HeapTarget,
    settings: &HeapSettings,
    obtained: &Obtained,
    profile: &HeapProfile,
    stats: &SymbolizeStats,
    modules: Vec<ModuleRecord>,
    local_names: &HashMap<String, String>,
    timings: BTreeMap<String, u64>,
    period: u64,
) -> Manifest {
    let (by_self, by_incl) = top_sites(&profile.folded, 10);
    let requested = match settings.source {
        HeapSource::Window(w) => w.as_secs_f64(),
        HeapSource::Existing(_) => 0.0,
    };
    let recorded = obtained
        .window
        .map(|w| (w.as_secs_f64() * 1000.0).round() / 1000.0)
        .unwrap_or(0.0);
    let record = HeapRecord {
        measure: settings.measure.label().to_string(),
        how: obtained.how.clone(),
        conf_variable: target.conf_variable.clone(),
        conf: target.conf_text.clone(),
        dump_dir: target.dump_dir.clone(),
        dumps: obtained
            .merged
            .iter()
            .map(|d| DumpRecord {
                name: d.name.clone(),
                local_name: local_names.get(&d.name).cloned().unwrap_or_default(),
                pid: d.pid,
                seq: d.seq,
                kind: d.kind.describe().to_string(),
                bytes: d.size,
                mtime: d.mtime,
            })
            .collect(),
        total_bytes: profile.total_bytes,
        total_objects: profile.total_objects,
        header_total_bytes: profile.header_bytes,
        header_gap_percent: (profile.header_gap_percent() * 1000.0).round() / 1000.0,
        sample_period: period,
        stacks: profile.stacks,
        addresses: stats.addresses,
        addresses_symbolized: stats.symbolized,
        bytes_at_unnamed_sites: profile.bytes_at_unnamed_sites,
        own_sites: crate::heap::report::own_sites(&profile.folded, 10),
        modules,
        top_self: by_self
            .iter()
            .map(|s| (s.function.clone(), s.self_bytes))
            .collect(),
        top_inclusive: by_incl
            .iter()
            .map(|s| (s.function.clone(), s.inclusive_bytes))
            .collect(),
    };
    Manifest {
        devprof_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: "heap".into(),
        created: Local::now().to_rfc3339(),
        target: settings.target.clone(),
        container: ContainerRecord {
            name: target.container.name.clone(),
            id: target.container.id.clone(),
            image: target.container.image.clone(),
        },
        process: ProcessRecord {
            pid: target.process.pid,
            command_line: target.process.cmdline.clone(),
        },
        events: vec![format!(
            "jemalloc heap ({} bytes)",
            settings.measure.label()
        )],
        duration_requested_s: requested,
        duration_recorded_s: recorded,
        interrupted: obtained.interrupted,
        sample_count: profile.total_bytes,
        unsymbolized_share: if stats.addresses == 0 {
            0.0
        } else {
            1.0 - stats.symbolized as f64 / stats.addresses as f64
        },
        top_functions: by_self
            .iter()
            .map(|s| (s.function.clone(), s.self_bytes))
            .collect(),
        timings_ms: timings,
        heap: Some(record),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_facts_name_the_variable_the_program_reads() {
        let f = JemallocFacts::parse(
            "env\t_RJEM_MALLOC_CONF=prof:true,prof_prefix:/profiling/jeprof.x\nenv\tMALLOC_CONF=prof:false\n\
             cwd\t/\nsigcgt\t0000000100004c42\nreads\t_RJEM_MALLOC_CONF\n",
        );
        assert_eq!(
            f.conf(),
            (
                "_RJEM_MALLOC_CONF".into(),
                Some("prof:true,prof_prefix:/profiling/jeprof.x".into())
            )
        );
        assert!(f.uses_jemalloc());
        assert!(catches(f.sigcgt.as_deref().unwrap(), 12));

        // Unprefixed jemalloc as a shared library: MALLOC_CONF, unset.
        let g =
            JemallocFacts::parse("lib\t/usr/lib/x86_64-linux-gnu/libjemalloc.so.2\ncwd\t/srv\n");
        assert_eq!(g.conf(), ("MALLOC_CONF".into(), None));

        // No grep in the image, nothing set: both names are offered.
        let h = JemallocFacts::parse("cwd\t/\n");
        assert!(h.conf().0.contains("_RJEM_MALLOC_CONF") && h.conf().0.contains("MALLOC_CONF"));
        assert!(!h.uses_jemalloc());
    }

    #[test]
    fn cache_keys_differ_by_version_and_are_plain_names() {
        let a = cache_key("/usr/local/bin/demo-node", 10, 1);
        assert_ne!(a, cache_key("/usr/local/bin/demo-node", 10, 2));
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
