//! `devprof build`: build the image, print what was built and what the check found.

use crate::cli::BuildArgs;
use crate::error::{Error, Result};
use crate::imagebuild;
use crate::setup_settings::BuildSettings;

pub async fn run(args: BuildArgs) -> Result<()> {
    let settings = BuildSettings::from_args(args)?;
    let outcome = imagebuild::build(&settings).await?;
    print!("{}", imagebuild::summary(&outcome));
    let problems = imagebuild::problems(&outcome);
    if !problems.is_empty() {
        return Err(Error::ImageNotReady {
            image: outcome.tag,
            problems,
        });
    }
    Ok(())
}
