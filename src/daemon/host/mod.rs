//! The host room: what the daemon knows and keeps of the machine it runs on. The
//! containment in effect (`contain`), the state directory's free space
//! (`disk_watch`) and the host's fitness (`fitness_watch`), the orphan sweep and
//! retention's upkeep, the managed runner installs (`runner_update`), the host's
//! settings checked on disk (`host_probe`) and the daemon's locks (`lock`). The
//! lowest room: it uses no other room of the daemon.

pub mod contain;
pub(super) mod disk_watch;
pub mod facts;
pub mod fitness_watch;
pub mod retention;
pub mod runner_book;
pub(super) mod sweep;
