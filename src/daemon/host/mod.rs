//! The host room: what the daemon knows and keeps of the machine it runs on, as
//! `HostFacts` (`facts`) holds it: the containment in effect (`contain`), the state
//! directory's free space (`disk_watch`) and the host's fitness (`fitness_watch`),
//! each written by its watcher only; when the runner installs are next checked
//! (`runner_book`); and the orphan sweep and retention's upkeep. The lowest room: it
//! uses no other room of the daemon (the watchers return whether the target loops
//! need waking; `Shared` wakes them).

pub mod contain;
pub(super) mod disk_watch;
pub mod facts;
pub mod fitness_watch;
pub mod retention;
pub mod runner_book;
pub(super) mod sweep;
