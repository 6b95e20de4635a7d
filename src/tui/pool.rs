//! The Pool pane: what a coordinator's store says about its pool. Its hosts: name,
//! connected, free capacity, open leases, their runners' meters (RSS, CPU,
//! processes, as each last reported them) and whether each takes launches now, or
//! why not (draining, full, unfit profiles), which is why a launch is refused. Its
//! jobs: which host holds or runs which (leases offered or accepted, runners started)
//! and those waiting, the selected one's story below (tried and back, or what it
//! waits for). Shown only when the store has coordinator hosts, so `top` pointed at
//! a coordinator's state directory shows the pool and a plain host's `top` does not.
//! A host's REFUSED says how many launches it refused or let expire and the last
//! one's reason word, as the host sent it (`host_capacity`, `draining`, ...).
//! At fifty hosts: the hosts' title is the pool's summary line, `/` filters hosts and
//! jobs alike (`coordinator::view`'s words, as `coordinator hosts --filter`), `s`
//! sorts the hosts by the fields `coordinator hosts --sort` takes.

use super::app::{Component, Ctx, Handled, movement, step_index, type_filter};
use super::columns::{self, Col};
use super::fmt;
use super::keys::{self, Binding};
use super::model::Snapshot;
use crate::coordinator::view;
use crate::domain::job_phase::Phase;
use crate::store::{CoordHostRow, CoordJobRow, SqliteStore, StoreError};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Table, TableState, Wrap};

/// The coordinator's tables, read once per refresh.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolSnapshot {
    /// Every host allowed to connect, by name.
    pub hosts: Vec<CoordHostRow>,
    /// Jobs with an open lease (offered or accepted), oldest queued first.
    pub leases: Vec<CoordJobRow>,
    /// Jobs a started runner serves, with the host it runs on.
    pub running: Vec<CoordJobRow>,
    /// Jobs waiting for a host, oldest first.
    pub queued: Vec<CoordJobRow>,
    /// Jobs waiting for a host.
    pub waiting: usize,
    /// Jobs served by a started runner.
    pub started: usize,
    /// A coordinator says it serves from this store (`coordinator status`'s word).
    pub serving: bool,
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
        let of = |p: Phase| -> Vec<CoordJobRow> {
            jobs.iter()
                .filter(|j| j.phase == p.into())
                .cloned()
                .collect()
        };
        let (queued, running) = (of(Phase::Waiting), of(Phase::Started));
        let leases = jobs
            .iter()
            .filter(|j| j.lease_id.is_some() && j.phase.known().is_some_and(|p| p.is_leased()))
            .cloned()
            .collect();
        Ok(Some(PoolSnapshot {
            hosts,
            leases,
            waiting: queued.len(),
            started: running.len(),
            running,
            queued,
            serving: store.coord_serving()?.is_some(),
        }))
    }

    pub fn connected(&self) -> usize {
        self.hosts.iter().filter(|h| h.connected).count()
    }

    /// The header's words on a coordinator, where no host daemon beats, after its
    /// `coordinator up|down`: what it serves (`hosts up 3/5  leases 2`).
    pub fn header(&self) -> String {
        format!(
            "hosts up {}/{}  leases {}",
            self.connected(),
            self.hosts.len(),
            self.leases.len()
        )
    }

    /// The jobs table's rows: leases, then runners, then the waiting.
    pub fn jobs(&self) -> impl Iterator<Item = &CoordJobRow> {
        self.leases.iter().chain(&self.running).chain(&self.queued)
    }
}

/// Whether a host takes launches now, and if not why: what it last reported that
/// makes it refuse one (`None` when it takes them).
pub fn refuses(h: &CoordHostRow) -> Option<String> {
    if !h.connected {
        return Some("not connected".into());
    }
    if h.draining {
        return Some("draining".into());
    }
    if h.free == Some(0) {
        return Some("full".into());
    }
    if !h.unfit.is_empty() && h.unfit.len() >= h.profiles.len() {
        return Some(format!("unfit: {}", h.unfit.join(",")));
    }
    None
}

/// A host's word in TAKES: `yes`, `yes, not <unfit profiles>`, or `no: <why>`.
pub fn takes(h: &CoordHostRow) -> String {
    match refuses(h) {
        Some(why) => format!("no: {why}"),
        None if !h.unfit.is_empty() => format!("yes, not {}", h.unfit.join(",")),
        None => "yes".into(),
    }
}

/// REFUSED: the count, and the last refusal's reason and age when there is one.
pub fn refused(h: &CoordHostRow, now: crate::timefmt::Millis) -> String {
    match (&h.last_refusal, h.last_refusal_at) {
        (Some(why), Some(at)) => format!("{} ({why} {} ago)", h.refusals, fmt::age(now - at)),
        (Some(why), None) => format!("{} ({why})", h.refusals),
        _ => h.refusals.to_string(),
    }
}

/// What the selected job's line says: where it runs or is offered, or why it waits.
pub fn story(pool: &PoolSnapshot, j: &CoordJobRow, now: crate::timefmt::Millis) -> String {
    let what = format!("{} {} {}", j.job_key, j.repo, j.name);
    let host = j.host.as_deref().unwrap_or("-");
    match j.phase.known() {
        Some(Phase::Started) => format!(
            "{what}: runs on {host} as {}",
            j.runner_name.as_deref().unwrap_or("-")
        ),
        Some(p @ (Phase::Offered | Phase::Accepted)) => format!(
            "{what}: {p} to {host} for profile {}, the lease ends in {}",
            j.profile.as_deref().unwrap_or("-"),
            fmt::or_dash(j.expires_at, |e| fmt::age(e - now))
        ),
        Some(Phase::Waiting) => format!("{what}: waits {}", waiting_why(pool, j)),
        _ => format!("{what}: {}", j.phase),
    }
}

fn waiting_why(pool: &PoolSnapshot, j: &CoordJobRow) -> String {
    let labels = j.labels.join(",");
    if pool.connected() == 0 {
        return "for a host: none is connected".into();
    }
    if pool.hosts.iter().all(|h| refuses(h).is_some()) {
        return "for a host: no connected host takes launches (see TAKES)".into();
    }
    if j.placements > 0 {
        // The pool's newest refusal says why, in the host's own word.
        let last = pool
            .hosts
            .iter()
            .filter_map(|h| {
                Some((
                    h.last_refusal_at?,
                    h.name.as_str(),
                    h.last_refusal.as_deref()?,
                ))
            })
            .max();
        let why = last.map_or(String::new(), |(_, host, why)| {
            format!(", the last by {host}: {why}")
        });
        return format!(
            "again after {} offer(s) refused or let expire{why} (see REFUSED); a host \
             that refused is passed over for a minute",
            j.placements
        );
    }
    format!("for a host with a profile for [{labels}] and room")
}

/// The Pool pane's own state: which job row is selected, the filter and the hosts'
/// order.
#[derive(Debug, Clone, Default)]
pub struct PoolView {
    pub index: usize,
    pub filter: String,
    /// Typing into the filter.
    pub editing: bool,
    /// Which of `view::HOST_SORTS` orders the hosts.
    pub sort: usize,
}

/// The Pool pane's own keys (`/`, which starts its filter here, is the app's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Sort,
    ClearFilter,
}

const KEYS: &[Binding<Cmd>] = &[
    Binding {
        keys: &[KeyCode::Char('s')],
        cmd: Cmd::Sort,
        help: "sort hosts: name state version free leases started refusals seen",
    },
    Binding {
        keys: &[KeyCode::Esc],
        cmd: Cmd::ClearFilter,
        help: "clear the filter",
    },
];

impl PoolView {
    pub fn start_filter(&mut self) {
        self.editing = true;
    }

    /// The hosts shown: those the filter takes, in the chosen order.
    pub fn hosts(&self, pool: &PoolSnapshot) -> Vec<CoordHostRow> {
        let by = &view::HOST_SORTS[self.sort % view::HOST_SORTS.len()];
        view::hosts_shown(&pool.hosts, by, self.filter.trim())
    }

    /// The jobs shown: leases, then runners, then the waiting, those the filter takes.
    pub fn jobs<'a>(&self, pool: &'a PoolSnapshot) -> Vec<&'a CoordJobRow> {
        let filter = self.filter.trim();
        pool.jobs()
            .filter(|j| view::job_matches(j, filter))
            .collect()
    }
}

impl Component for PoolView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        let len = snap.pool.as_ref().map_or(0, |p| self.jobs(p).len());
        if self.editing {
            type_filter(&mut self.filter, &mut self.editing, key);
            let len = snap.pool.as_ref().map_or(0, |p| self.jobs(p).len());
            self.index = self.index.min(len.saturating_sub(1));
            return Handled::Yes;
        }
        if let Some(by) = movement(&key, 10) {
            self.index = step_index(self.index, by, len);
            return Handled::Yes;
        }
        match keys::find(KEYS, &key) {
            Some(Cmd::Sort) => {
                self.sort = (self.sort + 1) % view::HOST_SORTS.len();
                Handled::Yes
            }
            Some(Cmd::ClearFilter) => {
                self.filter.clear();
                Handled::Yes
            }
            None => Handled::No,
        }
    }

    fn keys(&self) -> Vec<(String, &'static str)> {
        keys::help_lines(KEYS)
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let Some(pool) = cx.snap.pool.as_ref() else {
            return;
        };
        let hosts = self.hosts(pool);
        let jobs = self.jobs(pool);
        // The hosts table takes what it needs up to half the pane; the jobs the rest
        // but the selected job's story, in full below them.
        let want = hosts.len() as u16 + 3;
        let [top, bottom, story] = Layout::vertical([
            Constraint::Length(want.min(area.height / 2).max(4)),
            Constraint::Fill(1),
            Constraint::Length(4),
        ])
        .areas(area);
        self.draw_hosts(f, top, cx, pool, &hosts);
        self.draw_jobs(f, bottom, cx, pool, &jobs);
        self.draw_story(f, story, cx, pool, &jobs);
    }
}

impl PoolView {
    /// The hosts' title: the pool's summary line, and what the filter and the order
    /// make of it.
    fn hosts_title(&self, pool: &PoolSnapshot, shown: usize) -> String {
        let all: Vec<CoordJobRow> = pool.jobs().cloned().collect();
        let mut title = format!(
            " Pool: {}",
            view::Summary::of(&pool.hosts, &all).hosts_line()
        );
        let by = view::HOST_SORTS[self.sort % view::HOST_SORTS.len()].word;
        if by != "name" {
            title.push_str(&format!(" · by {by}"));
        }
        if self.editing || !self.filter.is_empty() {
            let cursor = if self.editing { "▏" } else { "" };
            title.push_str(&format!(
                " · /{}{cursor} {shown} of {}",
                self.filter,
                pool.hosts.len()
            ));
        }
        title.push(' ');
        title
    }

    fn draw_hosts(
        &self,
        f: &mut Frame,
        area: Rect,
        cx: &Ctx,
        pool: &PoolSnapshot,
        hosts: &[CoordHostRow],
    ) {
        let th = &cx.theme;
        let wide = area.width >= 120;
        let mut cols = vec![
            Col::shrink("HOST", 4).keep(2),
            Col::fixed("CONNECTED"),
            Col::fixed("FREE"),
            Col::fixed("LEASES"),
            Col::fixed("RUNNERS"),
            Col::fixed("RSS"),
            Col::fixed("CPU%"),
            Col::grow("TAKES", 4),
        ];
        if wide {
            cols.last_mut().unwrap().grow = false;
            cols.extend([
                Col::fixed("VERSION"),
                Col::fixed("PROTO"),
                Col::fixed("STARTED"),
                Col::fixed("FINISHED"),
                Col::fixed("REFUSED"),
                Col::grow("PROFILES", 8),
                Col::fixed("LAST SEEN"),
            ]);
        }
        let rows: Vec<Vec<Span>> = hosts
            .iter()
            .map(|h| {
                let conn = if h.connected {
                    Span::styled("yes", th.good())
                } else {
                    Span::styled("no", th.quiet())
                };
                let free = match (h.free, h.capacity) {
                    (Some(f), Some(c)) => format!("{f}/{c}"),
                    (f, _) => fmt::or_dash(f, |f| f.to_string()),
                };
                // What it last reported of its runners; nothing for a host away.
                let m = h.connected.then(|| {
                    h.meters.values().fold((0u32, 0u64, 0u32), |(n, r, c), m| {
                        (n + m.runners, r + m.rss_bytes, c + m.cpu_percent)
                    })
                });
                let takes_style = match refuses(h) {
                    None => th.good(),
                    Some(_) if !h.connected => th.quiet(),
                    Some(_) if h.draining || h.free == Some(0) => th.waiting(),
                    Some(_) => th.bad(),
                };
                let mut cells = vec![
                    Span::raw(h.name.clone()),
                    conn,
                    Span::raw(free),
                    Span::raw(h.open_leases.to_string()),
                    Span::raw(fmt::or_dash(m, |m| m.0.to_string())),
                    Span::raw(fmt::or_dash(m, |m| fmt::bytes(m.1))),
                    Span::raw(fmt::or_dash(m, |m| format!("{}%", m.2))),
                    Span::styled(takes(h), takes_style),
                ];
                if wide {
                    cells.extend([
                        Span::raw(h.binary_version.clone().unwrap_or_else(|| "-".into())),
                        Span::raw(fmt::or_dash(h.version, |v| v.to_string())),
                        Span::raw(h.started.to_string()),
                        Span::raw(h.finished.to_string()),
                        Span::raw(refused(h, cx.snap.now)),
                        Span::raw(h.profiles.join(",")),
                        Span::raw(fmt::or_dash(h.last_seen_at, |t| {
                            format!("{} ago", fmt::age(cx.snap.now - t))
                        })),
                    ]);
                }
                cells
            })
            .collect();
        let (header, body, widths) = columns::table(&cols, rows, area.width.saturating_sub(2));
        let title = self.hosts_title(pool, hosts.len());
        f.render_widget(
            Table::new(body, widths)
                .header(header.style(th.header()))
                .block(Block::bordered().title(title)),
            area,
        );
    }

    /// Which host holds or runs which job, and the jobs waiting for one.
    fn draw_jobs(
        &self,
        f: &mut Frame,
        area: Rect,
        cx: &Ctx,
        pool: &PoolSnapshot,
        jobs: &[&CoordJobRow],
    ) {
        let (th, now) = (&cx.theme, cx.snap.now);
        let wide = area.width >= 120;
        let mut cols = vec![
            Col::fixed("JOB"),
            Col::shrink("HOST", 4).keep(2),
            Col::shrink("PROFILE", 7),
            Col::fixed("AGE"),
            Col::fixed("PHASE"),
        ];
        if wide {
            cols.extend([
                Col::fixed("EXPIRES IN"),
                Col::fixed("TRIES"),
                Col::shrink("LEASE/RUNNER", 8),
                Col::grow("NAME", 8),
            ]);
        } else {
            cols.last_mut().unwrap().grow = true;
        }
        let rows: Vec<Vec<Span>> = jobs
            .iter()
            .map(|j| {
                let phase = match j.phase.known() {
                    Some(Phase::Accepted | Phase::Started) => th.good(),
                    _ => th.waiting(),
                };
                let mut cells = vec![
                    Span::raw(j.job_key.clone()),
                    Span::raw(j.host.clone().unwrap_or_else(|| "-".into())),
                    Span::raw(j.profile.clone().unwrap_or_else(|| "-".into())),
                    Span::raw(fmt::age(now - j.queued_at)),
                    Span::styled(j.phase.to_string(), phase),
                ];
                if wide {
                    cells.extend([
                        Span::raw(fmt::or_dash(j.expires_at, |e| fmt::age(e - now))),
                        Span::raw(j.placements.to_string()),
                        Span::raw(
                            j.lease_id
                                .clone()
                                .or_else(|| j.runner_name.clone())
                                .unwrap_or_else(|| "-".into()),
                        ),
                        Span::raw(format!("{} {}", j.repo, j.name)),
                    ]);
                }
                cells
            })
            .collect();
        let len = rows.len();
        let (header, body, widths) = columns::table(&cols, rows, area.width.saturating_sub(2));
        let title = format!(
            " Jobs: {} leased · {} running · {} waiting ",
            pool.leases.len(),
            pool.started,
            pool.waiting
        );
        let table = Table::new(body, widths)
            .header(header.style(th.header()))
            .row_highlight_style(th.selected())
            .block(Block::bordered().title(title));
        let selected = (len > 0).then(|| self.index.min(len - 1));
        let mut state = TableState::default().with_selected(selected);
        f.render_stateful_widget(table, area, &mut state);
    }

    fn draw_story(
        &self,
        f: &mut Frame,
        area: Rect,
        cx: &Ctx,
        pool: &PoolSnapshot,
        jobs: &[&CoordJobRow],
    ) {
        let th = &cx.theme;
        let text = match jobs.get(self.index) {
            Some(j) => Line::raw(story(pool, j, cx.snap.now)),
            None => Line::styled("no job queued in the pool", th.quiet()),
        };
        f.render_widget(
            Paragraph::new(text)
                .wrap(Wrap { trim: true })
                .block(Block::bordered().title(" Selected job ")),
            area,
        );
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
