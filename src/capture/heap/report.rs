//! From dumps on disk to the capture's files: parse, fetch the binaries the stacks point
//! into (cached in `.symbols/`), symbolize, and write the folded stacks, the memory
//! flamegraph, the text report and the manifest.

use super::dumps::{dump_names, fetch_dump};
use super::{HeapTarget, Obtained, HEAP_EXTENSIONS, REPORT_ROWS};
use crate::capture::manifest::identity;
use crate::docker::binary::{self, Fetched};
use crate::error::{Error, Result};
use crate::profile::heap::dumps::DumpKind;
use crate::profile::heap::parse::{parse_dump, HeapDump, Measure};
use crate::profile::heap::report::{
    build_profile, own_sites, render_text, top_sites, HeapProfile, ReportHeader,
};
use crate::profile::heap::symbolize::{files_needed, symbolize_dumps, SymbolizeStats};
use crate::profile::heap::{dump_totals, DumpRecord, HeapRecord, ModuleRecord};
use crate::render::{plot, write_folded_file, write_svg_file, SvgSpec};
use crate::settings::{HeapSettings, HeapSource};
use crate::store::{self, Manifest, Stem};
use crate::symbols::module::{basename, ModuleSymbols, SymbolKind};
use crate::text::truncate;
use crate::ui::Reporter;
use crate::units::human_bytes;
use chrono::Local;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How much the heap grew over the window: the end dump's total less the start dump's
/// (both from their `t*:` headers, unbiased), when the window had a dump at each end.
fn window_growth(
    obtained: &Obtained,
    dir: &Path,
    local_names: &HashMap<String, String>,
    measure: Measure,
    end: Option<&HeapDump>,
) -> Option<i64> {
    let end = end?;
    obtained.window?;
    // The start dump: the first asked for (interval dumps may come before it), else the
    // first written in the window.
    let first = obtained
        .collected
        .iter()
        .find(|d| matches!(d.kind, DumpKind::Manual(_)))
        .or(obtained.collected.first())?;
    if obtained.merged.iter().any(|d| d.name == first.name) {
        return None;
    }
    let text = std::fs::read_to_string(dir.join(local_names.get(&first.name)?)).ok()?;
    let start = parse_dump(&text).ok()?;
    Some((end.header_total(measure).1 - start.header_total(measure).1).round() as i64)
}

/// Parses, symbolizes and writes everything, the dumps being home (`local_names`: each
/// dump's file name in the stem's directory).
#[allow(clippy::too_many_arguments)]
pub(super) async fn analyse(
    target: &HeapTarget,
    obtained: &Obtained,
    local_names: &HashMap<String, String>,
    settings: &HeapSettings,
    stem: &Stem,
    timings: &mut BTreeMap<String, u64>,
    warnings: &mut Vec<String>,
    report: &Reporter,
) -> Result<Analysis> {
    let dir = stem.dir().to_path_buf();
    let t = Instant::now();
    let parsed = parse_dumps(obtained, &dir, local_names)?;
    timings.insert("parse".to_string(), t.elapsed().as_millis() as u64);
    let dump_refs: Vec<&HeapDump> = parsed.iter().collect();
    if settings.measure == Measure::Allocated && !dump_refs.iter().any(|d| d.has_accumulated()) {
        return Err(Error::Usage(format!(
            "--alloc: the dumps have no accumulated counts (written without prof_accum:true); drop --alloc, or add \
             prof_accum:true to {} and restart the process",
            target.ready.conf_variable
        )));
    }

    // The binaries the stacks point into, fetched once into the cache.
    let t = Instant::now();
    let spinner = report.spinner("fetching binaries for symbols");
    let (modules, module_records) = fetch_modules(target, &dump_refs, &dir, warnings).await;
    spinner.finish_and_clear();
    timings.insert("fetch_binaries".to_string(), t.elapsed().as_millis() as u64);

    let t = Instant::now();
    let spinner = report.spinner("symbolizing");
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
            dir: target.ready.shown_dir(),
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
    let text = write_profile(target, obtained, settings, stem, &profile, period, &stats)?;
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);

    let done = Analysed {
        dir: &dir,
        local_names,
        parsed: &parsed,
        profile: &profile,
        stats: &stats,
        period,
    };
    let (manifest, extensions) = done.manifest(
        target,
        obtained,
        settings,
        stem,
        module_records,
        timings.clone(),
        warnings,
    )?;
    Ok(Analysis {
        manifest,
        extensions,
        text,
    })
}

/// What the analysis made: the manifest (the dumps listed in it, its other files still to
/// list), the extensions written at the stem, and the report.
pub(super) struct Analysis {
    pub(super) manifest: Manifest,
    pub(super) extensions: Vec<&'static str>,
    pub(super) text: String,
}

/// Copies the dumps out of the container into `dir`. Returns each dump's local file name;
/// `copied` collects the copies this call made, for the caller to remove should the
/// capture end before they are all home (an error, the target stopping, Ctrl-C).
pub(super) async fn download_dumps(
    target: &HeapTarget,
    obtained: &Obtained,
    dir: &Path,
    copied: &mut Vec<PathBuf>,
    report: &Reporter,
) -> Result<HashMap<String, String>> {
    let spinner = report.spinner(&format!(
        "copying {} dump(s) out of {}",
        obtained.collected.len(),
        target.container.name
    ));
    let mut local_names: HashMap<String, String> = HashMap::new();
    for d in &obtained.collected {
        let (local, fresh) = fetch_dump(target, d, dir)
            .await
            .inspect_err(|_| spinner.finish_and_clear())?;
        if fresh {
            copied.push(dir.join(&local));
        }
        local_names.insert(d.name.clone(), local);
    }
    spinner.finish_and_clear();
    Ok(local_names)
}

/// The dumps the profile merges, parsed.
fn parse_dumps(
    obtained: &Obtained,
    dir: &Path,
    local_names: &HashMap<String, String>,
) -> Result<Vec<HeapDump>> {
    let mut parsed: Vec<HeapDump> = Vec::new();
    for d in &obtained.merged {
        let path = dir.join(&local_names[&d.name]);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        // The dump's text is the process's: the error quotes it on one line.
        let dump = parse_dump(&text).map_err(|e| Error::HeapDumpInvalid {
            path: crate::text::printable(&path.display().to_string()),
            detail: crate::text::printable(&e.to_string()),
        })?;
        parsed.push(dump);
    }
    Ok(parsed)
}

/// The text report, the folded stacks and the memory flamegraph. Returns the report.
fn write_profile(
    target: &HeapTarget,
    obtained: &Obtained,
    settings: &HeapSettings,
    stem: &Stem,
    profile: &HeapProfile,
    period: u64,
    stats: &SymbolizeStats,
) -> Result<String> {
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
    let report = render_text(profile, &header, REPORT_ROWS);
    write_text(&stem.path("txt"), &report)?;
    write_folded_file(&profile.folded, &stem.path("folded"))?;
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
            human_bytes(profile.total_bytes),
            Local::now().format("%Y-%m-%d %H:%M:%S")
        )),
        count_name: store::units::BYTES.into(),
        palette: inferno::flamegraph::color::Palette::Basic(
            inferno::flamegraph::color::BasicPalette::Mem,
        ),
    };
    write_svg_file(&profile.folded, &spec, &stem.path("svg"))?;
    Ok(report)
}

/// What the analysis made, for the manifest.
struct Analysed<'a> {
    dir: &'a Path,
    local_names: &'a HashMap<String, String>,
    parsed: &'a [HeapDump],
    profile: &'a HeapProfile,
    stats: &'a SymbolizeStats,
    period: u64,
}

impl Analysed<'_> {
    /// The manifest, with the heap over time plotted beside the report. Returns it, the
    /// dumps it lists, and the extensions of the files written at the stem.
    #[allow(clippy::too_many_arguments)]
    fn manifest(
        &self,
        target: &HeapTarget,
        obtained: &Obtained,
        settings: &HeapSettings,
        stem: &Stem,
        module_records: Vec<ModuleRecord>,
        timings: BTreeMap<String, u64>,
        warnings: &[String],
    ) -> Result<(Manifest, Vec<&'static str>)> {
        let (dir, local_names, parsed) = (self.dir, self.local_names, self.parsed);
        let (profile, stats, period) = (self.profile, self.stats, self.period);
        let mut manifest = heap_manifest(
            target,
            settings,
            obtained,
            profile,
            stats,
            module_records,
            local_names,
            timings,
            period,
        );
        if let Some(heap) = manifest.heap.as_mut() {
            heap.window_growth_bytes =
                window_growth(obtained, dir, local_names, settings.measure, parsed.last());
        }
        manifest.graphs.push(store::GraphRecord {
            svg: stem.file_name("svg"),
            folded: stem.file_name("folded"),
            view: "unfiltered".into(),
            unit: store::units::BYTES.into(),
        });
        // The heap over time: every dump's total, plotted beside the report.
        if let Some(heap) = manifest.heap.as_mut() {
            let on_disk = obtained
                .collected
                .iter()
                .map(|d| (d.name.as_str(), d.mtime, dir.join(&local_names[&d.name])));
            heap.dump_totals = dump_totals(on_disk, settings.measure);
        }
        let plot = plot::heap_over_time(&manifest);
        if let Some(svg) = &plot {
            write_text(&stem.path(plot::HEAP_PLOT), svg)?;
        }
        if let Some(recording) = &obtained.recording {
            recording.stamp(&mut manifest);
        }
        for dump in &obtained.collected {
            manifest.record_file(dir, &local_names[&dump.name]);
        }
        let mut extensions = HEAP_EXTENSIONS.to_vec();
        if plot.is_some() {
            extensions.push(plot::HEAP_PLOT);
        }
        manifest.notes.extend(warnings.iter().cloned());
        Ok((manifest, extensions))
    }
}

pub(super) fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// Fetches every file the stacks point into (once, into `.symbols/<key>/` of the store
/// directory, keyed by path, size and time in the container) and reads its symbols. A
/// file that cannot be fetched or read leaves its addresses as module+offset.
pub(super) async fn fetch_modules(
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
    let fetched =
        binary::fetch_cached(&target.shell, "", &target.container.name, &paths, dir).await;
    for (path, fetched) in paths.iter().zip(fetched) {
        let mut record = ModuleRecord {
            path: path.clone(),
            symbols: String::new(),
            cached: None,
        };
        let (local, relative, inode) = match fetched {
            Fetched::Missing => {
                record.symbols = "missing: not found in the container".into();
                warnings.push(format!(
                    "{path} is not in the container any more: its frames stay as {}+offset",
                    basename(path)
                ));
                modules.insert(path.clone(), None);
                records.push(record);
                continue;
            }
            Fetched::Failed(e) => {
                record.symbols = format!("missing: {e}");
                warnings.push(format!("could not copy {path} out of the container ({e}): its frames stay as {}+offset", basename(path)));
                modules.insert(path.clone(), None);
                records.push(record);
                continue;
            }
            Fetched::Local {
                local,
                relative,
                inode,
            } => (local, relative, inode),
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
        record.cached = Some(relative.display().to_string());
        match ModuleSymbols::from_elf(&local) {
            Ok(m) => {
                record.symbols = format!("{:?}", m.kind).to_lowercase();
                if m.symbol_count() == 0 && m.kind != SymbolKind::Dwarf {
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

#[allow(clippy::too_many_arguments)]
pub(super) fn heap_manifest(
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
        conf_variable: target.ready.conf_variable.clone(),
        conf: target.ready.conf_text.clone(),
        dump_dir: target.ready.dump_dir.clone(),
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
        own_sites: own_sites(&profile.folded, 10),
        modules,
        top_self: by_self
            .iter()
            .map(|s| (s.function.clone(), s.self_bytes))
            .collect(),
        top_inclusive: by_incl
            .iter()
            .map(|s| (s.function.clone(), s.inclusive_bytes))
            .collect(),
        window_growth_bytes: None,
        dump_totals: Vec::new(),
    };
    Manifest {
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
        ..identity(
            "heap",
            &settings.target,
            &target.container,
            &target.process,
            &target.process_facts,
            target.runtime,
        )
    }
}
