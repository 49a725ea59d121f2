//! The subcommands, one file each: settings in, recipe, closing summary out. `dispatch`
//! runs the one the command line names, with what every command is given: the store's
//! directory, the reporter, and for captures their context (Ctrl-C, the marker rules).

pub mod build;
pub mod clean;
pub mod completions;
pub mod compose;
pub mod cpu;
pub mod diff;
pub mod doctor;
pub mod export;
pub mod export_out;
pub mod export_session;
pub mod fold;
pub mod heap;
pub mod ls;
pub mod offcpu;
pub mod profile;
pub mod render;
pub mod sets;
pub mod slices;
pub mod stat;
pub mod summarize;
pub mod top;
pub mod trust;
pub mod view;

use crate::capture::CaptureCtx;
use crate::cli::{Cli, Command, Invocation, MarkArgs};
use crate::error::{exit, Error, Result};
use crate::signals::Interrupts;
use crate::ui::Reporter;

/// The whole program: parses the command line, runs the command on an async runtime, and
/// returns the exit code (errors are printed with the code they carry).
pub fn main() -> i32 {
    let invocation = Cli::invocation();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            crate::say!("error: cannot start the async runtime: {e}");
            return exit::FAILURE;
        }
    };
    let result = match invocation {
        Invocation::Run(cli) => runtime.block_on(dispatch(*cli)),
        Invocation::CompleteTargets => runtime.block_on(completions::print_targets()),
    };
    let code = match result {
        Ok(()) => exit::OK,
        Err(e) => {
            crate::say!("error: {e}");
            e.exit_code()
        }
    };
    // Don't wait for blocking tasks (e.g. a folder reading an aborted stream).
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}

/// Runs one parsed command line. Errors carry their exit code.
pub async fn dispatch(cli: Cli) -> Result<()> {
    let report = Reporter::new(cli.quiet, cli.verbose);
    let out = cli.output_dir;
    match cli.command {
        Command::Cpu(args) => match capture_ctx(report, Some(&args.marks))? {
            Some(mut ctx) => cpu::run(args, out, &mut ctx).await,
            None => Ok(()),
        },
        Command::Offcpu(args) => match capture_ctx(report, Some(&args.marks))? {
            Some(mut ctx) => offcpu::run(args, out, &mut ctx).await,
            None => Ok(()),
        },
        Command::Profile(args) => match capture_ctx(report, Some(&args.marks))? {
            Some(mut ctx) => profile::run(args, out, &mut ctx).await,
            None => Ok(()),
        },
        Command::Heap(args) => {
            let mut ctx = capture_ctx(report, None)?.expect("no marker help asked");
            heap::run(args, out, &mut ctx).await
        }
        Command::Stat(args) => {
            let mut ctx = capture_ctx(report, None)?.expect("no marker help asked");
            stat::run(args, out, &mut ctx).await
        }
        Command::View(args) => view::run(args, out, &mut interrupts()?).await,
        Command::Completions(args) => completions::write_script(args.shell),
        Command::Fold(args) => fold::run(args, &report),
        Command::Ls(args) => ls::run(args, out),
        Command::Clean(args) if args.containers => {
            clean::remove_sidecars(args.dry_run, args.json).await
        }
        Command::Clean(args) => clean::run(args, out),
        Command::Render(args) => render::run(args, out),
        Command::Top(args) => top::run(args, out),
        Command::Diff(args) => diff::run(args, out),
        Command::Export(args) => export::run(args, out),
        Command::Summarize(args) => summarize::run(args),
        Command::Build(args) => build::run(args, &report).await,
        Command::Compose(args) => compose::run(args).await,
        Command::Trust(args) => trust::run(args).await,
        Command::Doctor(args) => doctor::run(args).await,
    }
}

/// Ctrl-C, SIGTERM and SIGHUP for the rest of the run.
fn interrupts() -> Result<Interrupts> {
    Interrupts::install(crate::ui::term::eprint_line)
        .map_err(|e| Error::io("install signal handlers", e))
}

/// A capture command's context: Ctrl-C and the marker rules `--mark` asked for (where the
/// command takes them). None after `--mark help` printed the rules: the command then does
/// nothing else.
fn capture_ctx(report: Reporter, marks: Option<&MarkArgs>) -> Result<Option<CaptureCtx>> {
    let plan = match marks {
        None => None,
        Some(marks) => match crate::settings::marks::from_values(&marks.mark)? {
            crate::settings::marks::Marks::Help => {
                crate::out!("{}", crate::profile::markers::builtin::help_text());
                return Ok(None);
            }
            crate::settings::marks::Marks::Plan(plan) => Some(plan),
        },
    };
    Ok(Some(CaptureCtx::new(report, interrupts()?, plan)))
}

/// What every capture command does at its end: the closing summary (JSON, or for people)
/// and the warnings; with `--verbose`, where its time went; with `--open`, its first
/// flamegraph in the browser. `json` gives what its `--json` adds to the fields every
/// capture has, `human` its summary for people.
fn closing(
    outcome: &crate::capture::Captured,
    (as_json, open): (bool, bool),
    ctx: &CaptureCtx,
    json: fn(&crate::capture::Captured) -> serde_json::Value,
    human: fn(&crate::capture::Captured) -> String,
) -> Result<()> {
    let json = || {
        let mut fields = json(outcome);
        let common = serde_json::json!({
            "manifest": outcome.manifest_path,
            "files": crate::ui::output::files_json(&outcome.files),
            "process": outcome.manifest.process,
            "events": outcome.manifest.events,
            "duration_s": outcome.manifest.duration_recorded_s,
            "interrupted": outcome.manifest.interrupted,
            "warnings": outcome.warnings,
        });
        if let (Some(fields), serde_json::Value::Object(common)) = (fields.as_object_mut(), common)
        {
            fields.extend(common);
        }
        fields
    };
    let human = || human(outcome);
    crate::ui::output::emit(as_json, json, human, &outcome.warnings);
    if ctx.report.verbose() {
        if let Some(phases) = ctx.report.phases() {
            crate::ui::term::eprint(&phases);
        }
    }
    if open {
        open_flamegraph(&outcome.manifest, &outcome.manifest_path);
    }
    Ok(())
}

/// `--open` after a capture: its first flamegraph in the browser, or why not (on stderr).
fn open_flamegraph(manifest: &crate::store::Manifest, manifest_path: &std::path::Path) {
    let dir = manifest_path.parent().unwrap_or(std::path::Path::new("."));
    match manifest.flamegraphs().first() {
        Some(svg) => crate::ui::browser::open_result(&dir.join(svg)),
        None => crate::say!("--open: the capture wrote no flamegraph to open"),
    }
}
