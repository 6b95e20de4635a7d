//! The simulated GitHub (REST endpoints with state, faults, rate limits) and the simulated runner.
