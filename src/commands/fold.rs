//! `devprof fold`: the streaming folder on its own, for `perf script` text made elsewhere,
//! or the native fold of a perf.data. Also what the benchmarks drive.

use crate::cli::FoldArgs;
use crate::error::{Error, Result};
use crate::profile::folded::{fold_perf_script, fold_perf_script_with, Folded};
use crate::profile::perfdata::stacks::{self, Symbols};
use crate::profile::timeline::TimelineWriter;
use crate::render::{write_heatmap_file, write_svg, SvgSpec};
use crate::symbols::binary::SYMBOL_CACHE;
use crate::symbols::kernel_cache;
use crate::symbols::module::load_all;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read};
use std::path::Path;

pub fn run(args: FoldArgs) -> Result<()> {
    let folded = if is_perf_data(&args.input) {
        fold_perf_data(&args)?
    } else {
        fold_script(&args)?
    };
    match &args.output {
        Some(path) => {
            let file = File::create(path)
                .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
            folded.write_to(BufWriter::new(file))
        }
        None => folded.write_to(BufWriter::new(io::stdout().lock())),
    }
    .map_err(|e| Error::io("write folded stacks", e))?;
    if let Some(svg) = &args.svg {
        let file =
            File::create(svg).map_err(|e| Error::io(format!("create {}", svg.display()), e))?;
        write_svg(
            &folded,
            &SvgSpec::cpu(args.title.clone(), None),
            BufWriter::new(file),
        )
        .map_err(|e| Error::io(format!("write {}", svg.display()), e))?;
    }
    if let (Some(timeline), Some(page)) = (&args.timeline, &args.heatmap) {
        write_heatmap_file(timeline, &args.title, "samples", page)?;
    }
    eprintln!(
        "{} samples in {} stacks",
        folded.total(),
        folded.stacks.len()
    );
    Ok(())
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

/// perf.data read and symbolized natively, with the files under `--symfs`.
fn fold_perf_data(args: &FoldArgs) -> Result<Folded> {
    // The kernel makes /proc/kallsyms line by line (50-70 ms): a capture in the store uses
    // the copy its container's symbol cache keeps for this boot, read on another core
    // while the perf.data is read; it is dropped when no frame is the kernel's.
    let cache = args
        .input
        .parent()
        .map(|dir| dir.join(SYMBOL_CACHE))
        .filter(|cache| std::fs::symlink_metadata(cache).is_ok_and(|m| m.is_dir()));
    let kept_in = cache.clone();
    let kallsyms = std::thread::spawn(move || kernel_cache::host_symbols(kept_in.as_deref()));
    let raw = stacks::read(&args.input, args.timeline.is_some())
        .map_err(|e| Error::io(format!("read {}", args.input.display()), e))?;
    let mut symbols = Symbols::default();
    let files = raw
        .files_used()
        .into_iter()
        .map(|path| {
            let local = args.symfs.join(path.trim_start_matches('/'));
            (path, local)
        })
        .collect();
    let loaded = load_all(files, false);
    symbols.modules.extend(loaded.modules);
    let mut failed = loaded.failed;
    failed.sort();
    for (path, e) in failed {
        eprintln!("no symbols for {path}: {e}");
    }
    if raw.has_kernel_frames() {
        symbols.kernel = match kallsyms.join().ok().flatten() {
            // It still names what it covers if the read fails.
            Some(kept) if !raw.kernel_covered_by(&kept) => {
                kernel_cache::host_live(cache.as_deref()).or(Some(kept))
            }
            read => read,
        };
    }
    let fold = match &args.timeline {
        Some(path) => {
            let file = File::create(path)
                .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
            let mut timeline = TimelineWriter::new(BufWriter::new(file))
                .map_err(|e| Error::io("start the timeline", e))?;
            let fold = stacks::fold(&raw, &symbols, false, Some(&mut timeline));
            timeline
                .finish()
                .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
            fold
        }
        None => stacks::fold(&raw, &symbols, false, None),
    };
    Ok(fold.folded)
}

/// `perf script` text, streamed through the parallel folder.
fn fold_script(args: &FoldArgs) -> Result<Folded> {
    let input: Box<dyn Read> = if args.input.as_os_str() == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(
            File::open(&args.input)
                .map_err(|e| Error::io(format!("open {}", args.input.display()), e))?,
        )
    };
    let reader = BufReader::with_capacity(1 << 20, input);
    match &args.timeline {
        Some(path) => {
            let file = File::create(path)
                .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
            let mut timeline = TimelineWriter::new(BufWriter::new(file))
                .map_err(|e| Error::io("start the timeline", e))?;
            let folded = fold_perf_script_with(reader, &mut timeline);
            timeline
                .finish()
                .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
            folded
        }
        None => fold_perf_script(reader),
    }
    .map_err(|e| Error::io("fold perf script input", e))
}
