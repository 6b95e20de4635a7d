//! Meters: sampling each live attempt's process tree (RSS, CPU, process count) from /proc.
