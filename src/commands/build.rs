//! `devprof build`: build the image, print what was built and what the check found.

use crate::cli::BuildArgs;
use crate::error::{Error, Result};
use crate::settings::setup::BuildSettings;
use crate::setup::build;

pub async fn run(args: BuildArgs) -> Result<()> {
    let settings = BuildSettings::from_args(args)?;
    let outcome = build::build(&settings).await?;
    crate::out!("{}", build::summary(&outcome));
    let problems = build::problems(&outcome);
    if !problems.is_empty() {
        return Err(Error::ImageNotReady {
            image: outcome.tag,
            problems,
        });
    }
    Ok(())
}
