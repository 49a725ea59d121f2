//! `devprof view`: the store in a browser, served on 127.0.0.1 until Ctrl-C.

use crate::cli::ViewArgs;
use crate::error::Result;
use crate::settings::store::ViewSettings;
use crate::signals::Interrupts;
use std::path::PathBuf;

pub async fn run(args: ViewArgs, output_dir: PathBuf, interrupts: &mut Interrupts) -> Result<()> {
    let settings = ViewSettings::from_args(args, output_dir)?;
    crate::view::serve(&settings, interrupts).await
}
