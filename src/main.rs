use devprof::{cli::Cli, exit};

fn main() {
    // .env fills in what neither flags nor the environment set (dotenvy never overrides).
    let _ = dotenvy::dotenv();
    let cli = Cli::parse_args();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(exit::FAILURE);
        }
    };
    let code = match runtime.block_on(devprof::run(cli)) {
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
