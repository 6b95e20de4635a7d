//! The store: the books of hosts, targets, profiles and attempts in embedded SQLite.
