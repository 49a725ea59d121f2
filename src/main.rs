//! The binary: parses the command line, runs the command (`commands::dispatch`), maps
//! errors to exit codes.

use devprof::cli::{Cli, Invocation};
use devprof::error::exit;

fn main() {
    let invocation = Cli::invocation();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(exit::FAILURE);
        }
    };
    let result = match invocation {
        Invocation::Run(cli) => runtime.block_on(devprof::commands::dispatch(*cli)),
        Invocation::CompleteTargets => {
            runtime.block_on(devprof::commands::completions::print_targets())
        }
    };
    let code = match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    };
    // Don't wait for blocking tasks (e.g. a folder reading an aborted stream).
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    std::process::exit(code);
}
