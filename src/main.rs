//! The `runner-manager` binary: parse, dispatch, exit. Everything else lives in the library.

fn main() {
    // Run as bin/Runner.Listener or bin/Runner.Worker of a simulated runner install.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let name = std::path::Path::new(&argv0).file_name().unwrap_or_default();
    let code = match name.to_str() {
        Some("Runner.Listener") => runner_manager::sim::runner::main(),
        Some("Runner.Worker") => runner_manager::sim::runner::worker_main(),
        _ => runner_manager::cli::main(),
    };
    std::process::exit(code);
}
