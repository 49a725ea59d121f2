//! `devprof doctor`: gather, evaluate, print the checklist (or JSON), and fail when a
//! check that blocks profiling failed.

use crate::cli::DoctorArgs;
use crate::error::{exit, Error, Result};
use crate::settings::setup::DoctorSettings;
use crate::setup::doctor::{self, checks};

pub async fn run(args: DoctorArgs) -> Result<()> {
    let settings = DoctorSettings::from_args(args)?;
    let facts = doctor::gather(&settings).await;
    let list = checks::evaluate(&facts);
    let failed = checks::failures(&list);
    if settings.json {
        let container = match &facts.container {
            Some(Ok(c)) => Some(c.name.clone()),
            _ => None,
        };
        let json = serde_json::json!({
            "target": settings.target,
            "container": container,
            "ok": failed.is_empty(),
            "blocking": failed.iter().map(|c| c.id).collect::<Vec<_>>(),
            "checks": list,
        });
        crate::ui::output::print_json(&json);
    } else {
        crate::out!("{}", checks::render(&settings.target, &list));
    }
    match failed.first() {
        None => Ok(()),
        Some(first) => Err(Error::DoctorFailed {
            target: settings.target.clone(),
            failed: failed.iter().map(|c| c.title.to_string()).collect(),
            exit: match first.id {
                "daemon" => exit::DAEMON,
                "container" | "process" => exit::TARGET,
                _ => exit::DOCTOR,
            },
        }),
    }
}
