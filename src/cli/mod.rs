//! The command line: parse with lexopt, dispatch, print tables or JSON, map errors to exit codes.

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    0
}
