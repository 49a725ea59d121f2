//! `devprof build`: build the image, print what was built and what the check found.

use crate::cli::BuildArgs;
use crate::error::{Error, Result};
use crate::settings::setup::BuildSettings;
use crate::setup::image;
use crate::ui::Reporter;

pub async fn run(args: BuildArgs, report: &Reporter) -> Result<()> {
    let settings = BuildSettings::from_args(args)?;
    let outcome = image::build(&settings, report).await?;
    crate::out!("{}", image::summary(&outcome));
    let problems = image::problems(&outcome);
    if !problems.is_empty() {
        return Err(Error::ImageNotReady {
            image: outcome.tag,
            problems,
        });
    }
    Ok(())
}
