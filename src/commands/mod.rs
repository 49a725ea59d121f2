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
pub mod view;

/// `--open` after a capture: its first flamegraph in the browser, or why not (on stderr).
fn open_flamegraph(manifest: &crate::store::Manifest, manifest_path: &std::path::Path) {
    let dir = manifest_path.parent().unwrap_or(std::path::Path::new("."));
    match manifest.flamegraphs().first() {
        Some(svg) => crate::ui::browser::open_result(&dir.join(svg)),
        None => eprintln!("--open: the capture wrote no flamegraph to open"),
    }
}

/// Sets this run's marker rules from `--mark`; false after `--mark help` printed them (the
/// command then does nothing else).
pub fn configure_marks(values: &[String]) -> crate::error::Result<bool> {
    match crate::settings::marks::from_values(values)? {
        crate::settings::marks::Marks::Help => {
            crate::out!("{}", crate::profile::markers::builtin::help_text());
            Ok(false)
        }
        crate::settings::marks::Marks::Plan(plan) => {
            crate::capture::markers::configure(plan);
            Ok(true)
        }
    }
}
