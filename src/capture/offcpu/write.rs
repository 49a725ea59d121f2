//! What an off-CPU summary writes beside its recording: the event-count flamegraph and
//! heatmap, the off-CPU time flamegraph, the summary text and the plots.

use super::Summarizing;
use crate::capture::manifest::{subtitle, Sampling};
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::offcpu::series::OverTime;
use crate::profile::offcpu::summary::Summary;
use crate::profile::offcpu::text::render_text;
use crate::render::{plot, write_folded_file, write_heatmap_file, write_svg_file, SvgSpec};
use crate::store;
use crate::units::{human_duration, thousands};
use inferno::flamegraph::color::{BasicPalette, Palette};

/// What the summary made, to be written beside the recording.
pub(super) struct Outputs<'a> {
    pub(super) summary: &'a Summary,
    pub(super) events_folded: &'a Folded,
    pub(super) off_cpu_folded: Option<&'a Folded>,
    pub(super) over_time: &'a OverTime,
}

impl Outputs<'_> {
    /// The event-count flamegraph and heatmap, the off-CPU time flamegraph, the summary
    /// text and the plots. Returns the extensions of every file and the summary text.
    pub(super) fn write(
        &self,
        summarizing: &Summarizing<'_, '_>,
        notes: &[String],
    ) -> Result<(Vec<&'static str>, String)> {
        let Summarizing {
            run,
            recording,
            settings,
            ..
        } = summarizing;
        let (target, stem) = (run.target, &run.stem);
        let container = &target.container.name;
        let summary = self.summary;
        let mut extensions = vec!["data", "timeline", "folded", "svg", "txt"];
        write_folded_file(self.events_folded, &stem.path("folded"))?;
        let title = format!(
            "{container} — events of {} — {} — {} events",
            settings.config.name,
            human_duration(recording.window),
            thousands(summary.total_events)
        );
        let sub = subtitle(target, Sampling::EveryEvent, settings.call_graph);
        write_heatmap_file(&stem.path("timeline"), &title, "events", &stem.path("html"))?;
        extensions.push("html");
        write_svg_file(
            self.events_folded,
            &SvgSpec {
                title,
                subtitle: Some(sub.clone()),
                count_name: store::units::EVENTS.into(),
                palette: Palette::Basic(BasicPalette::Io),
            },
            &stem.path("svg"),
        )?;
        if let Some(off) = self.off_cpu_folded.filter(|f| !f.is_empty()) {
            write_folded_file(off, &stem.path("offcpu.folded"))?;
            write_svg_file(
                off,
                &SvgSpec {
                    title: format!(
                        "{container} — off-CPU time — {} — {:.2} s blocked in all threads",
                        human_duration(recording.window),
                        off.total() as f64 / 1e6
                    ),
                    subtitle: Some(sub),
                    count_name: store::units::OFF_CPU_US.into(),
                    palette: Palette::Basic(BasicPalette::Blue),
                },
                &stem.path("offcpu.svg"),
            )?;
            extensions.extend(["offcpu.folded", "offcpu.svg"]);
        }
        let summary_text = summary_text(summarizing, summary, notes);
        std::fs::write(stem.path("txt"), &summary_text)
            .map_err(|e| Error::io(format!("write {}", stem.path("txt").display()), e))?;
        // Off-CPU time per thread and I/O bandwidth over the window, beside the summary.
        for (extension, svg) in plot::offcpu_plots(container, summary, self.over_time) {
            std::fs::write(stem.path(extension), svg)
                .map_err(|e| Error::io(format!("write {}", stem.path(extension).display()), e))?;
            extensions.push(extension);
        }
        if settings.keep_script {
            extensions.push("script");
        }
        Ok((extensions, summary_text))
    }
}

/// The summary for people, as printed and saved to `offcpu-….txt`.
fn summary_text(summarizing: &Summarizing<'_, '_>, summary: &Summary, notes: &[String]) -> String {
    let Summarizing {
        run,
        recording,
        settings,
        ..
    } = summarizing;
    let target = run.target;
    let header = format!(
        "{} (pid {} {}): off-CPU events from {} ({}), {} window{}",
        target.container.name,
        target.process.pid,
        target.process.cmdline,
        settings.config.name,
        settings.config.source,
        human_duration(recording.window),
        if recording.interrupted {
            ", stopped early by Ctrl-C"
        } else {
            ""
        }
    );
    let mut summary_text = render_text(summary, &header);
    summary_text.insert_str(
        header.len() + 1,
        &format!("via {}\n", target.mode_description()),
    );
    if !notes.is_empty() {
        summary_text.push_str("\nnotes:\n");
        for note in notes {
            summary_text.push_str(&format!("  - {note}\n"));
        }
    }
    summary_text
}
