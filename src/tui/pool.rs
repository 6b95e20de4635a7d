//! The Pool pane: what a coordinator's store says about its pool, its hosts (name,
//! connected, version, free capacity, open leases) and its open leases (job, host,
//! profile, age). Shown only when the store has coordinator hosts, so `top` pointed at
//! a coordinator's state directory shows the pool and a plain host's `top` does not.

use super::app::{Component, Ctx, Handled, movement, step_index};
use super::fmt;
use super::model::Snapshot;
use crate::domain::job_phase::Phase;
use crate::store::{CoordHostRow, CoordJobRow, SqliteStore, StoreError};
use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Block, Cell, Row, Table, TableState};

/// The coordinator's tables, read once per refresh.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolSnapshot {
    /// Every host allowed to connect, by name.
    pub hosts: Vec<CoordHostRow>,
    /// Jobs with an open lease (offered or accepted), oldest queued first.
    pub leases: Vec<CoordJobRow>,
    /// Jobs waiting for a host.
    pub waiting: usize,
    /// Jobs served by a started runner.
    pub started: usize,
}

impl PoolSnapshot {
    /// `None` when the store has no coordinator hosts (a host's store, or a
    /// coordinator no host was added to yet): the pane is not shown.
    pub fn load(store: &SqliteStore) -> Result<Option<PoolSnapshot>, StoreError> {
        let hosts = store.coord_hosts()?;
        if hosts.is_empty() {
            return Ok(None);
        }
        let jobs = store.coord_jobs()?;
        let count = |p: Phase| jobs.iter().filter(|j| j.phase == p.into()).count();
        let (waiting, started) = (count(Phase::Waiting), count(Phase::Started));
        let leases = jobs
            .into_iter()
            .filter(|j| j.lease_id.is_some() && j.phase.known().is_some_and(|p| p.is_leased()))
            .collect();
        Ok(Some(PoolSnapshot {
            hosts,
            leases,
            waiting,
            started,
        }))
    }

    pub fn connected(&self) -> usize {
        self.hosts.iter().filter(|h| h.connected).count()
    }
}

/// The Pool pane's own state: which lease row is selected.
#[derive(Debug, Clone, Default)]
pub struct PoolView {
    pub index: usize,
}

impl Component for PoolView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        let len = snap.pool.as_ref().map_or(0, |p| p.leases.len());
        match movement(&key, 10) {
            Some(by) => {
                self.index = step_index(self.index, by, len);
                Handled::Yes
            }
            None => Handled::No,
        }
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let Some(pool) = cx.snap.pool.as_ref() else {
            return;
        };
        // The hosts table takes what it needs up to half the pane; leases the rest.
        let want = pool.hosts.len() as u16 + 3;
        let [top, bottom] = Layout::vertical([
            Constraint::Length(want.min(area.height / 2).max(4)),
            Constraint::Fill(1),
        ])
        .areas(area);
        draw_hosts(f, top, cx, pool);
        self.draw_leases(f, bottom, cx, pool);
    }
}

fn draw_hosts(f: &mut Frame, area: Rect, cx: &Ctx, pool: &PoolSnapshot) {
    let th = &cx.theme;
    let wide = area.width >= 120;
    let mut header = vec!["HOST", "CONNECTED", "PROTO", "FREE", "LEASES"];
    if wide {
        header.extend(["STARTED", "FINISHED", "REFUSED", "PROFILES", "LAST SEEN"]);
    }
    let rows: Vec<Row> = pool
        .hosts
        .iter()
        .map(|h| {
            let conn = if !h.connected {
                Span::styled("no", th.quiet())
            } else if h.draining {
                Span::styled("draining", th.waiting())
            } else if !h.unfit.is_empty() {
                Span::styled("unfit", th.bad())
            } else {
                Span::styled("yes", th.good())
            };
            let free = match (h.free, h.capacity) {
                (Some(f), Some(c)) => format!("{f}/{c}"),
                (f, _) => fmt::or_dash(f, |f| f.to_string()),
            };
            let mut cells = vec![
                Cell::from(h.name.clone()),
                Cell::from(conn),
                Cell::from(fmt::or_dash(h.version, |v| v.to_string())),
                Cell::from(free),
                Cell::from(h.open_leases.to_string()),
            ];
            if wide {
                cells.extend([
                    Cell::from(h.started.to_string()),
                    Cell::from(h.finished.to_string()),
                    Cell::from(h.refusals.to_string()),
                    Cell::from(h.profiles.join(",")),
                    Cell::from(fmt::or_dash(h.last_seen_at, |t| {
                        format!("{} ago", fmt::age(cx.snap.now - t))
                    })),
                ]);
            }
            Row::new(cells)
        })
        .collect();
    // The host's name as wide as the longest (a pool's names are short), the rest of
    // the line to the profiles when wide.
    let host_width = pool
        .hosts
        .iter()
        .map(|h| h.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 40) as u16;
    let mut widths = vec![
        Constraint::Length(host_width),
        Constraint::Length(9),
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(6),
    ];
    if wide {
        widths.extend([
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Fill(1),
            Constraint::Length(10),
        ]);
    }
    let title = format!(
        " Pool hosts ({}, {} connected) ",
        pool.hosts.len(),
        pool.connected()
    );
    f.render_widget(
        Table::new(rows, widths)
            .header(Row::new(header).style(th.header()))
            .block(Block::bordered().title(title)),
        area,
    );
}

impl PoolView {
    fn draw_leases(&self, f: &mut Frame, area: Rect, cx: &Ctx, pool: &PoolSnapshot) {
        let (th, now) = (&cx.theme, cx.snap.now);
        let wide = area.width >= 120;
        let mut header = vec!["JOB", "HOST", "PROFILE", "AGE", "PHASE"];
        if wide {
            header.extend(["EXPIRES IN", "TRIES", "LEASE", "NAME"]);
        }
        let rows: Vec<Row> = pool
            .leases
            .iter()
            .map(|j| {
                let phase = if j.phase == Phase::Accepted.into() {
                    Span::styled(j.phase.to_string(), th.good())
                } else {
                    Span::styled(j.phase.to_string(), th.waiting())
                };
                let mut cells = vec![
                    Cell::from(j.job_key.clone()),
                    Cell::from(j.host.clone().unwrap_or_else(|| "-".into())),
                    Cell::from(j.profile.clone().unwrap_or_else(|| "-".into())),
                    Cell::from(fmt::age(now - j.queued_at)),
                    Cell::from(phase),
                ];
                if wide {
                    cells.extend([
                        Cell::from(fmt::or_dash(j.expires_at, |e| fmt::age(e - now))),
                        Cell::from(j.placements.to_string()),
                        Cell::from(j.lease_id.clone().unwrap_or_default()),
                        Cell::from(format!("{} {}", j.repo, j.name)),
                    ]);
                }
                Row::new(cells)
            })
            .collect();
        let mut widths = vec![
            Constraint::Length(12),
            Constraint::Fill(1),
            Constraint::Fill(1),
            Constraint::Length(6),
            Constraint::Length(8),
        ];
        if wide {
            widths.extend([
                Constraint::Length(10),
                Constraint::Length(5),
                Constraint::Length(20),
                Constraint::Fill(2),
            ]);
        }
        let title = format!(
            " Open leases ({}) · {} waiting · {} started ",
            pool.leases.len(),
            pool.waiting,
            pool.started
        );
        let table = Table::new(rows, widths)
            .header(Row::new(header).style(th.header()))
            .row_highlight_style(th.selected())
            .block(Block::bordered().title(title));
        let selected = (!pool.leases.is_empty()).then(|| self.index.min(pool.leases.len() - 1));
        let mut state = TableState::default().with_selected(selected);
        f.render_stateful_widget(table, area, &mut state);
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
