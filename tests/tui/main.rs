//! `top`'s tests without a terminal: every view on ratatui's `TestBackend` against
//! golden buffers, keys as state changes, actions against a real store, and the
//! render-time figure. The real-terminal test is `tui_tmux.rs`.

mod figures;
mod golden;
mod keys;
mod meters;
mod support;
mod views;
