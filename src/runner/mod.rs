//! Running a runner: per-attempt roots, spawning in its own session, reading its log lines, /proc facts.
