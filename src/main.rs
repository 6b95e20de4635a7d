//! The `runner-manager` binary: parse, dispatch, exit. Everything else lives in the library.

fn main() {
    std::process::exit(runner_manager::cli::main());
}
