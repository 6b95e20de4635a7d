//! GitHub's runner list for each target as the daemon last read it, published for
//! `top`'s Runners view: now `store::daemon_facts`'s (`publish_runners`,
//! `runners_seen`), named here under its old names for the I/O workers' one call.

pub use crate::store::daemon_facts::publish_runners as publish;
