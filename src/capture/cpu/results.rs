//! What a CPU capture makes of its folded stacks: the flamegraphs and their views, the
//! error for a capture of no samples, and the advice on what was recorded.

use super::{cpu_share, CpuSettings, IDLE_CPU_SHARE, NODE_FOLDED, NODE_SVG, UNSYMBOLIZED_WARNING};
use crate::capture::lifecycle::Run;
use crate::capture::manifest::{subtitle, Sampling};
use crate::capture::target::Target;
use crate::capture::window::Recording;
use crate::engines::{Collected, Engine};
use crate::error::Error;
use crate::error::Result;
use crate::profile::filter::{Preset, StackFilter};
use crate::profile::folded::Folded;
use crate::profile::stacks::{self, StackHealth};
use crate::render::{write_folded_file, write_heatmap_file, write_svg_file, SvgSpec};
use crate::runtime::{node_perf_map, PerfMap, Runtime, NODE_PERF_MAP_FIX};
use crate::store::{self, CommandRecord, GraphRecord, Manifest};
use crate::units::{human_duration, thousands};

/// The error for a capture that folded into no samples, with what to do about it.
pub(super) fn no_samples<E: Engine>(
    engine: &E,
    target: &Target<E::Ready>,
    collected: &Collected,
    command_record: Option<&CommandRecord>,
    settings: &CpuSettings,
) -> Error {
    Error::NoSamples {
        container: target.container.name.clone(),
        reason: match collected.reported_samples {
            Some(0) => Some(format!("{} recorded 0 samples", engine.name())),
            Some(n) => Some(format!(
                "{} recorded {n} samples but none had a stack; {}",
                engine.name(),
                crate::text::first_error_line(&collected.stderr)
            )),
            None => None,
        },
        hint: match command_record {
            Some(run) => format!(
                "the command ran for {:.2} s and used too little CPU to be sampled at {} Hz; give it more work, or raise --frequency",
                run.wall_s, settings.frequency
            ),
            None => format!(
                "pid {} ({}) may be idle or may have exited; check it is busy, or pick another process with --process/--pid",
                target.process.pid, target.process.cmdline
            ),
        },
    }
}

/// The folded stacks, the flamegraph, the heatmap and (Node) the JavaScript-only view,
/// listed in the manifest's graphs. Returns the extensions of every file of the capture.
pub(super) fn write_graphs<R>(
    run: &Run<'_, R>,
    folded: &Folded,
    collected: &Collected,
    recording: &Recording,
    manifest: &mut Manifest,
    event: &str,
    settings: &CpuSettings,
) -> Result<Vec<&'static str>> {
    let target = run.target;
    let stem = &run.stem;
    let container = &target.container.name;
    let samples = folded.total();
    write_folded_file(folded, &stem.path("folded"))?;
    let spec = SvgSpec::cpu(
        format!(
            "{container} — CPU ({event}) — {} — {} samples",
            human_duration(recording.window),
            thousands(samples)
        ),
        Some(subtitle(
            target,
            Sampling::Frequency(manifest.frequency_hz),
            settings.call_graph,
        )),
    );
    write_svg_file(folded, &spec, &stem.path("svg"))?;
    let mut extensions: Vec<&str> = collected.raw_files.clone();
    extensions.extend(["folded", "svg"]);
    if collected.raw_files.contains(&"timeline") {
        write_heatmap_file(
            &stem.path("timeline"),
            &spec.title,
            "samples",
            &stem.path("html"),
        )?;
        extensions.push("html");
    }
    manifest.graphs.push(GraphRecord {
        svg: stem.file_name("svg"),
        folded: stem.file_name("folded"),
        view: "unfiltered".into(),
        unit: store::units::SAMPLES.into(),
    });
    if target.runtime == Runtime::Node {
        // Node users read both: the whole stacks, and the JavaScript left once the
        // runtime's own frames are dropped.
        let filter = StackFilter {
            preset: Some(Preset::Node),
            ..Default::default()
        };
        let filtered = filter.apply(folded);
        write_folded_file(&filtered, &stem.path(NODE_FOLDED))?;
        let mut spec = spec.clone();
        spec.title = format!("{} — filtered: preset node (JavaScript only)", spec.title);
        write_svg_file(&filtered, &spec, &stem.path(NODE_SVG))?;
        extensions.extend([NODE_FOLDED, NODE_SVG]);
        manifest.graphs.push(GraphRecord {
            svg: stem.file_name(NODE_SVG),
            folded: stem.file_name(NODE_FOLDED),
            view: "preset node (runtime frames dropped, JavaScript kept)".into(),
            unit: store::units::SAMPLES.into(),
        });
    }
    Ok(extensions)
}

/// The warning for a target that was mostly idle, judged by the CPU its samples stand for
/// over the window; None for one that worked.
pub(super) fn idle_warning(samples: u64, frequency_hz: u32, seconds: f64) -> Option<String> {
    let share = cpu_share(samples, frequency_hz, seconds)?;
    (share < IDLE_CPU_SHARE).then(|| {
        format!(
            "the target was mostly idle: {samples} samples at {frequency_hz} Hz over {seconds:.1} s is about {:.1}% of \
             one CPU. Put load on it while recording, or record longer.",
            share * 100.0
        )
    })
}

/// What the user should hear about the profile (few samples, unnamed frames, broken
/// stacks, a missing V8 perf map, lost chunks), into `warnings` and the manifest.
pub(super) fn advise<E: Engine>(
    engine: &E,
    target: &Target<E::Ready>,
    manifest: &mut Manifest,
    warnings: &mut Vec<String>,
    mut health: StackHealth,
    unsymbolized: f64,
    settings: &CpuSettings,
) {
    // Judged at the rate the engine sampled at (Go's runtime keeps its own).
    if let Some(warning) = idle_warning(
        manifest.sample_count,
        manifest.frequency_hz,
        manifest.duration_recorded_s,
    ) {
        warnings.push(warning);
    }
    let node_map = (target.runtime == Runtime::Node)
        .then(|| node_perf_map(&target.process.cmdline, &target.process_facts));
    // Without its perf map a Node profile is unnamed for that reason, said below.
    // A jitdump names JavaScript only through the native fold (perf script cannot read it).
    let native = manifest.fold_path.as_deref() == Some(crate::engines::NATIVE_FOLD);
    let names_js = |m: PerfMap| m == PerfMap::Written || (m == PerfMap::Jitdump && native);
    if unsymbolized > UNSYMBOLIZED_WARNING && node_map.is_none_or(names_js) {
        let fix = match target.runtime {
            Runtime::Jvm => "JIT-compiled Java code is named only through the JVM's perf map or async-profiler: \
                 record with --engine asprof (async-profiler in the container, or --asprof DIR), or let the JVM \
                 accept jcmd (no -XX:+DisableAttachMechanism, jcmd from the JDK in the image)",
            Runtime::Go => "Go functions are named from the symbol table or .gopclntab; the unnamed frames are \
                 outside the Go binary (cgo libraries, the vDSO) or its table could not be read: check the \
                 notes above, or use Go's own profile with --engine pprof",
            _ => "the binary lacks symbols/debuginfo or frame pointers. Build with debug info and \
                 `-C force-frame-pointers=yes` (or `devprof build`), don't strip it, or record with --call-graph dwarf",
        };
        warnings.push(format!(
            "{:.0}% of frames are unsymbolized: {fix}.",
            unsymbolized * 100.0
        ));
    }
    let advice = (health.broken_share > stacks::BROKEN_WARNING)
        .then(|| engine.broken_stacks_advice(target.runtime, settings.call_graph))
        .flatten();
    if let Some((why, fix)) = advice {
        warnings.push(format!(
            "{:.0}% of samples have a broken stack (it does not reach the thread's entry point): {why}. Fix: {fix}.",
            health.broken_share * 100.0
        ));
        health.why = Some(why);
        health.fix = Some(fix);
    }
    manifest.stacks = Some(health);
    if let Some(map) = node_map {
        manifest.perf_map = Some(map.describe().to_string());
        if !names_js(map) {
            warnings.push(format!(
                "V8 perf map {}: JavaScript functions show as [unknown] or as addresses. To get their names, {NODE_PERF_MAP_FIX}.",
                map.describe()
            ));
        }
    }
    if let Some(lost) = manifest.lost_chunks.filter(|l| *l > 0) {
        warnings.push(format!(
            "perf lost {lost} chunks of samples; lower --frequency"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: "only 843 samples: the target was mostly idle" fired on most short
    /// captures of busy targets (a fixed count of 1000); idleness is now judged by the CPU
    /// the samples stand for.
    #[test]
    fn a_short_capture_of_a_busy_target_is_not_called_idle_and_a_sleeping_one_is() {
        // 843 samples in 1 s at 999 Hz: 84% of a CPU.
        assert_eq!(idle_warning(843, 999, 1.0), None);
        // 2 threads busy for 0.5 s.
        assert_eq!(idle_warning(999, 999, 0.5), None);
        let warning = idle_warning(120, 999, 10.0).expect("1.2% of a CPU is idle");
        assert!(warning.contains("about 1.2% of one CPU"), "{warning}");
        assert!(idle_warning(4, 100, 5.0).is_some());
        assert_eq!(idle_warning(5, 0, 5.0), None);
    }
}
