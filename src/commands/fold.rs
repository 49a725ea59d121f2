//! `devprof fold`: the streaming folder on its own, for `perf script` text made elsewhere.
//! Also what the throughput benchmark drives.

use crate::cli::FoldArgs;
use crate::error::{Error, Result};
use crate::profile::folded::{fold_perf_script, fold_perf_script_with};
use crate::profile::timeline::TimelineWriter;
use crate::render::{write_heatmap_file, write_svg, SvgSpec};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read};

pub fn run(args: FoldArgs) -> Result<()> {
    let input: Box<dyn Read> = if args.input.as_os_str() == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(
            File::open(&args.input)
                .map_err(|e| Error::io(format!("open {}", args.input.display()), e))?,
        )
    };
    let reader = BufReader::with_capacity(1 << 20, input);
    let folded = match &args.timeline {
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
    .map_err(|e| Error::io("fold perf script input", e))?;
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
