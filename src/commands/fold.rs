//! `devprof fold`: the streaming folder on its own, for `perf script` text made elsewhere,
//! or the fold of a perf.data (natively when its stacks are whole in the file, through
//! this host's `perf script` when they need unwinding). Also what the benchmarks drive.

use crate::cli::{FoldArgs, WeightArg};
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::perfdata::stacks::{self, Symbols};
use crate::profile::perfdata::{recorded_call_graph, unwind, CallGraph};
use crate::profile::perfscript::{fold, FoldOptions, SampleSink, Weight};
use crate::profile::timeline::TimelineWriter;
use crate::render::{write_heatmap_file, write_svg, SvgSpec};
use crate::store::loader;
use crate::symbols::binary::SYMBOL_CACHE;
use crate::symbols::debugfile;
use crate::symbols::kernel_cache;
use crate::symbols::module::ModuleFiles;
use crate::symbols::module_loader::Loader;
use crate::symbols::perfmap::{PerfMap, PERF_MAP_LIMIT};
use crate::ui::Reporter;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read};
use std::path::{Path, PathBuf};

pub fn run(args: FoldArgs, report: &Reporter) -> Result<()> {
    let weight = match args.weight {
        WeightArg::Samples => Weight::Samples,
        WeightArg::Period => Weight::Period,
    };
    let counted = if is_perf_data(&args.input) {
        if weight == Weight::Period {
            return Err(Error::Usage(format!(
                "--weight period sums the periods of perf script text; {} is a perf.data, folded \
                 in samples (`perf script -i FILE | devprof fold - --weight period` sums its periods)",
                args.input.display()
            )));
        }
        Counted::samples(fold_perf_data(&args, report)?)
    } else {
        fold_script(&args, weight)?
    };
    let folded = &counted.folded;
    match &args.output {
        Some(path) => {
            let file = File::create(path)
                .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
            folded.write_to(BufWriter::new(file))
        }
        // A reader that went away (`| head`) ends the output; it is not an error.
        None => folded
            .write_to(BufWriter::new(crate::ui::term::data_writer()))
            .or_else(crate::ui::output::reader_gone),
    }
    .map_err(|e| Error::io("write folded stacks", e))?;
    let unit = counted.unit();
    if let Some(svg) = &args.svg {
        let file =
            File::create(svg).map_err(|e| Error::io(format!("create {}", svg.display()), e))?;
        let mut spec = SvgSpec::cpu(args.title.clone(), None);
        spec.count_name = unit.clone();
        write_svg(folded, &spec, BufWriter::new(file))
            .map_err(|e| Error::io(format!("write {}", svg.display()), e))?;
    }
    if let (Some(timeline), Some(page)) = (&args.timeline, &args.heatmap) {
        write_heatmap_file(timeline, &args.title, &unit, page)?;
    }
    crate::say!("{}", counted.summary());
    if report.verbose() {
        if let Some(phases) = report.phases() {
            crate::ui::term::eprint(&phases);
        }
    }
    Ok(())
}

/// Folded stacks and what their counts are.
struct Counted {
    folded: Folded,
    weight: Weight,
    samples: u64,
    /// From perf script text: how many samples had a period printed, their sum, the event.
    with_period: u64,
    period_total: u64,
    event: Option<String>,
}

impl Counted {
    fn samples(folded: Folded) -> Self {
        Counted {
            samples: folded.total(),
            folded,
            weight: Weight::Samples,
            with_period: 0,
            period_total: 0,
            event: None,
        }
    }

    /// What one count is: a sample, or a unit of the event's period.
    fn unit(&self) -> String {
        match self.weight {
            Weight::Period if self.with_period > 0 => period_unit(self.event.as_deref()),
            _ => "samples".into(),
        }
    }

    /// The closing line: the total in its unit, and the other weight when the input has it.
    fn summary(&self) -> String {
        let stacks = self.folded.stacks.len();
        let periods = format!(
            "{} {}",
            self.period_total,
            period_unit(self.event.as_deref())
        );
        match self.weight {
            Weight::Samples if self.with_period > 0 => format!(
                "{} samples in {stacks} stacks (counts are samples; --weight period sums the \
                 periods perf printed instead: {periods})",
                self.samples
            ),
            Weight::Samples => format!("{} samples in {stacks} stacks", self.samples),
            Weight::Period if self.with_period > 0 => format!(
                "{periods} (perf's periods, summed) in {stacks} stacks, from {} samples \
                 (--weight samples counts samples instead)",
                self.samples
            ),
            Weight::Period => format!(
                "{} samples in {stacks} stacks (--weight period: the input has no periods, \
                 so each sample counts 1; `perf script -F ...,period` prints them)",
                self.samples
            ),
        }
    }
}

/// What one unit of an event's period is: nanoseconds for the clock events, an occurrence
/// of the event otherwise (cycles, instructions, a tracepoint's hits).
fn period_unit(event: Option<&str>) -> String {
    let base = event.map(|e| e.split(':').next().unwrap_or(e));
    match base {
        Some(clock @ ("cpu-clock" | "task-clock")) => format!("ns of {clock}"),
        Some(event) => format!("counts of {event}"),
        None => "period units".into(),
    }
}

/// Whether `path` is a perf.data file (by its magic; standard input is text).
fn is_perf_data(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    path.as_os_str() != "-"
        && File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == b"PERFILE2"
}

/// A perf.data folded natively when its stacks are whole in the file; stacks that need
/// unwinding (DWARF, LBR) through this host's `perf script`, or refused without it.
fn fold_perf_data(args: &FoldArgs, report: &Reporter) -> Result<Folded> {
    let call_graph = recorded_call_graph(&args.input)
        .map_err(|e| Error::io(format!("read {}", args.input.display()), e))?;
    if call_graph.folds_natively() {
        return fold_natively(args, call_graph, report);
    }
    let symfs = (args.symfs != Path::new("/")).then_some(args.symfs.as_path());
    let folded = with_timeline(args.timeline.as_deref(), clock_of(args), |sink| {
        loader::fold_with_host_perf(&args.input, symfs, sink)
    })
    .map_err(|e| match e {
        Error::HostPerfMissing { .. } => needs_perf_script(args, call_graph, symfs),
        e => e,
    })?;
    crate::note!(
        "{} was recorded with {}, which devprof does not unwind itself: folded through \
         this host's perf script",
        args.input.display(),
        call_graph.describe()
    );
    Ok(folded)
}

fn needs_perf_script(args: &FoldArgs, call_graph: CallGraph, symfs: Option<&Path>) -> Error {
    Error::NeedsPerfScript {
        path: args.input.display().to_string(),
        recorded: call_graph.describe().into(),
        command: loader::perf_script_command(&args.input, symfs),
    }
}

/// perf.data read and symbolized natively, with the files under `--symfs` (the binaries a
/// DWARF capture's user stacks are unwound with too) and the perf maps of its JIT code.
fn fold_natively(args: &FoldArgs, call_graph: CallGraph, report: &Reporter) -> Result<Folded> {
    // The kernel makes /proc/kallsyms line by line (50-70 ms): a capture in the store uses
    // the copy its container's symbol cache keeps for this boot, read on another core
    // while the perf.data is read; it is dropped when no frame is the kernel's.
    let cache = args
        .input
        .parent()
        .map(|dir| dir.join(SYMBOL_CACHE))
        .filter(|cache| std::fs::symlink_metadata(cache).is_ok_and(|m| m.is_dir()));
    let kept_in = cache.clone();
    let kallsyms = std::thread::Builder::new()
        .name("kernel symbols".into())
        .spawn(move || kernel_cache::host_symbols(kept_in.as_deref()))
        .map_err(|e| Error::io("start a thread", e))?;
    let keep_samples = args.timeline.is_some();
    // Each file's symbols are read on another core from the moment a stack first points
    // into it; a stripped library is named from its debug file in the same tree, as perf
    // does.
    let loader = Loader::new(false);
    let mut seen = |path: &str| {
        let binary = match under_symfs(&args.symfs, path) {
            Ok(binary) => binary,
            Err(why) => {
                crate::say!("not read: {} ({why})", crate::text::printable(path));
                return;
            }
        };
        let (symfs, path) = (args.symfs.clone(), path.to_string());
        loader.load_found(path.clone(), move || {
            let debug = debugfile::find_for(&symfs, &path, &binary);
            ModuleFiles { binary, debug }
        });
    };
    let raw = if call_graph.needs_unwinding() {
        let vdso = unwind::own_vdso();
        let open = |path: &str| -> Option<stacks::Image> {
            if path == "[vdso]" {
                return vdso.clone().map(stacks::Image::Owned);
            }
            stacks::Image::map(&under_symfs(&args.symfs, path).ok()?).ok()
        };
        stacks::read_unwound(&args.input, keep_samples, &open, &mut seen)
    } else {
        stacks::read(&args.input, keep_samples, &mut seen)
    }
    .map_err(|e| Error::io(format!("read {}", args.input.display()), e))?;
    report.mark(if call_graph.needs_unwinding() {
        "perf.data read, user stacks unwound"
    } else {
        "perf.data read"
    });
    let mut symbols = Symbols::default();
    // The vdso is no file under --symfs: this host's names its frames (the same kernel).
    let mut vdso_dir = None;
    if raw.modules.iter().any(|m| m == unwind::VDSO) {
        let dir = cache.clone().or_else(|| {
            let made = vdso_dir.insert(tempfile::tempdir().ok()?);
            Some(made.path().to_path_buf())
        });
        if let Some(vdso) = dir.and_then(|d| unwind::own_vdso_file(&d)) {
            loader.load(unwind::VDSO.to_string(), vdso);
        }
    }
    let loaded = loader.finish();
    symbols.modules.extend(loaded.modules);
    let mut failed = loaded.failed;
    failed.sort();
    for (path, e) in failed {
        // Paths named by the recording's mmap events: the recorded program's.
        crate::say!("no symbols for {}: {e}", crate::text::printable(&path));
    }
    for pid in raw.jit_pids() {
        let map = args.symfs.join(format!("tmp/perf-{pid}.map"));
        let read = under_symfs(&args.symfs, &format!("/tmp/perf-{pid}.map"))
            .map_err(|why| io::Error::other(why.to_string()))
            .and_then(|safe| PerfMap::read(&safe, PERF_MAP_LIMIT));
        match read {
            Ok(names) => {
                symbols.perf_maps.insert(pid, names);
            }
            Err(e) => crate::say!(
                "no names for the JIT code of process {pid}: {} {e}",
                map.display()
            ),
        }
    }
    report.mark("binaries' symbols and perf maps read");
    if raw.has_kernel_frames() {
        symbols.kernel = match kallsyms.join().ok().flatten() {
            // It still names what it covers if the read fails.
            Some(kept) if !raw.kernel_covered_by(&kept) => {
                kernel_cache::host_live(cache.as_deref()).or(Some(kept))
            }
            read => read,
        };
        report.mark("kernel symbols read");
    }
    let fold = with_timeline(args.timeline.as_deref(), clock_of(args), |sink| {
        Ok(stacks::fold(&raw, &symbols, false, sink))
    })?;
    report.mark("stacks named and folded");
    if fold.unwind_incomplete > 0 {
        crate::note!(
            "{} of {} samples have user stacks that could not be unwound to their first \
             function (folded as far as they go)",
            fold.unwind_incomplete,
            fold.samples
        );
    }
    if fold.jit_samples > 0 {
        crate::note!(
            "{} samples are in JIT code of processes without a perf map (named by file)",
            fold.jit_samples
        );
    }
    Ok(fold.folded)
}

/// `perf script` text, streamed through the parallel folder.
/// The file a recording names (`path`, absolute in the recorded container) under `symfs`,
/// when it is safe to read: a path that climbs out (`..`), a link that leads outside
/// `symfs`, and anything but a regular file (a FIFO or a device would hang the read or
/// feed it forever) are refused, with why. A file that is not there is left for the
/// reader to report.
fn under_symfs(symfs: &Path, path: &str) -> std::result::Result<PathBuf, &'static str> {
    use std::path::Component;
    let relative = Path::new(path.trim_start_matches('/'));
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err("the path climbs out of --symfs");
    }
    let joined = symfs.join(relative);
    let Ok(real) = std::fs::canonicalize(&joined) else {
        return Ok(joined);
    };
    let root = std::fs::canonicalize(symfs).map_err(|_| "--symfs cannot be read")?;
    if !real.starts_with(&root) {
        return Err("a link leads outside --symfs");
    }
    match std::fs::metadata(&real) {
        Ok(m) if m.is_file() => Ok(real),
        _ => Err("not a regular file"),
    }
}

fn fold_script(args: &FoldArgs, weight: Weight) -> Result<Counted> {
    let input: Box<dyn Read> = if args.input.as_os_str() == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(
            File::open(&args.input)
                .map_err(|e| Error::io(format!("open {}", args.input.display()), e))?,
        )
    };
    let reader = BufReader::with_capacity(1 << 20, input);
    let outcome = with_timeline(args.timeline.as_deref(), None, |sink| {
        let options = FoldOptions {
            sink,
            weight,
            ..FoldOptions::default()
        };
        fold(reader, options).map_err(|e| Error::io("fold perf script input", e))
    })?;
    Ok(Counted {
        folded: outcome.folded,
        weight,
        samples: outcome.samples,
        with_period: outcome.with_period,
        period_total: outcome.period_total,
        event: outcome.event,
    })
}

/// Runs `fold` with the `--timeline` file's writer as its sample sink, when one is asked
/// for, and finishes the file.
/// The clock a perf.data's samples were recorded on, for its timeline (none when unknown).
fn clock_of(args: &FoldArgs) -> Option<crate::profile::timeline::Clock> {
    crate::profile::perfdata::recording_clock(&args.input)
        .ok()
        .flatten()
}

fn with_timeline<T>(
    path: Option<&Path>,
    clock: Option<crate::profile::timeline::Clock>,
    fold: impl FnOnce(Option<&mut dyn SampleSink>) -> Result<T>,
) -> Result<T> {
    let Some(path) = path else {
        return fold(None);
    };
    let file =
        File::create(path).map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    let mut timeline = TimelineWriter::new(BufWriter::new(file))
        .map_err(|e| Error::io("start the timeline", e))?;
    if let Some(clock) = &clock {
        timeline.set_clock(clock);
    }
    let out = fold(Some(&mut timeline))?;
    timeline
        .finish()
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (security round two, finding 9): `fold --symfs` joined the recording's
    /// paths without a `..` check and opened FIFOs (a hang), and a link in a `docker
    /// export` led to the host's files.
    #[test]
    fn only_regular_files_inside_symfs_are_read() {
        let root = tempfile::tempdir().unwrap();
        let symfs = root.path().join("root");
        std::fs::create_dir_all(symfs.join("usr/lib")).unwrap();
        std::fs::write(symfs.join("usr/lib/libok.so"), b"elf").unwrap();
        std::fs::write(root.path().join("secret"), b"host").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret"), symfs.join("usr/lib/out.so"))
            .unwrap();
        std::os::unix::fs::symlink("libok.so", symfs.join("usr/lib/in.so")).unwrap();
        let fifo = symfs.join("usr/lib/fifo.so");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());

        let ok = std::fs::canonicalize(symfs.join("usr/lib/libok.so")).unwrap();
        assert_eq!(under_symfs(&symfs, "/usr/lib/libok.so"), Ok(ok.clone()));
        assert_eq!(under_symfs(&symfs, "/usr/lib/in.so"), Ok(ok));
        assert_eq!(
            under_symfs(&symfs, "/usr/lib/../../../secret"),
            Err("the path climbs out of --symfs")
        );
        assert_eq!(
            under_symfs(&symfs, "/usr/lib/out.so"),
            Err("a link leads outside --symfs")
        );
        assert_eq!(
            under_symfs(&symfs, "/usr/lib/fifo.so"),
            Err("not a regular file")
        );
        assert_eq!(under_symfs(&symfs, "/usr/lib"), Err("not a regular file"));
        // Not there: the reader says so, as before.
        assert_eq!(
            under_symfs(&symfs, "/usr/lib/gone.so"),
            Ok(symfs.join("usr/lib/gone.so"))
        );
    }

    #[test]
    fn a_periods_total_is_named_in_its_unit() {
        assert_eq!(period_unit(Some("cpu-clock:pppH")), "ns of cpu-clock");
        assert_eq!(period_unit(Some("task-clock")), "ns of task-clock");
        assert_eq!(period_unit(Some("cycles:u")), "counts of cycles");
        let counted = Counted {
            folded: Folded::from_pairs([("a;b".to_string(), 3)].into_iter()),
            weight: Weight::Samples,
            samples: 3,
            with_period: 3,
            period_total: 3_003_003,
            event: Some("cpu-clock".into()),
        };
        assert_eq!(
            counted.summary(),
            "3 samples in 1 stacks (counts are samples; --weight period sums the periods \
             perf printed instead: 3003003 ns of cpu-clock)"
        );
        let by_period = Counted {
            weight: Weight::Period,
            ..counted
        };
        assert_eq!(by_period.unit(), "ns of cpu-clock");
        assert!(by_period.summary().starts_with(
            "3003003 ns of cpu-clock (perf's periods, summed) in 1 stacks, from 3 samples"
        ));
    }
}
