//! The Pictures pane: per profile, queued jobs against live runners over the last
//! minutes (two sparklines, each on its own scale, its peak written beside it), and
//! queue-to-start latency across profiles.

use super::app::{Component, Ctx, Handled, movement, step_index};
use super::fmt;
use super::model::{PICTURE_WINDOW_MS, Snapshot};
use crate::timefmt::Millis;
use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Sparkline};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PicturesView {
    /// The first profile shown, when they do not all fit.
    pub offset: usize,
}

/// Rows one profile's picture takes.
const PROFILE_ROWS: u16 = 3;

/// How long a queue sample stands for its profile: the daemon writes one every pass,
/// seconds apart, so an empty slice shortly after a sample is the same value, and a
/// longer silence (the daemon was down) shows as a gap.
pub const SAMPLE_HOLD_MS: Millis = 60_000;

/// The largest value per bucket of `width` equal slices of the window ending at `now`.
/// A slice with no sample repeats the last one if it is at most `hold` old, else is
/// `None`, so gaps show as gaps. `points` are oldest first.
pub fn buckets(
    points: &[(Millis, u64)],
    now: Millis,
    width: usize,
    hold: Millis,
) -> Vec<Option<u64>> {
    let mut out = vec![None; width];
    if width == 0 {
        return out;
    }
    let start = now - PICTURE_WINDOW_MS;
    let slice_start =
        |i: usize| start + (PICTURE_WINDOW_MS as i128 * i as i128 / width as i128) as Millis;
    let mut last: Option<(Millis, u64)> = None;
    let mut k = 0;
    for (i, slot) in out.iter_mut().enumerate() {
        let (b0, b1) = (slice_start(i), slice_start(i + 1));
        let end = if i + 1 == width { now + 1 } else { b1 };
        while k < points.len() && points[k].0 < end {
            let (at, v) = points[k];
            if at >= b0 {
                *slot = Some(slot.map_or(v, |o: u64| o.max(v)));
            }
            last = Some((at, v));
            k += 1;
        }
        if slot.is_none() {
            *slot = last.filter(|(at, _)| b0 - at <= hold).map(|(_, v)| v);
        }
    }
    out
}

/// Values over time, oldest first.
pub type Series = Vec<(Millis, u64)>;

/// A profile's queued jobs and live runners over the window, as (time, value) series,
/// oldest first: what the Pictures pane and the Overview's chart draw.
pub fn series(snap: &Snapshot, profile: &str) -> (Series, Series) {
    snap.queue
        .iter()
        .filter(|s| s.profile == profile)
        .map(|s| ((s.at, u64::from(s.queued)), (s.at, u64::from(s.live))))
        .unzip()
}

/// The top of one series' sparkline: its own peak, never below 1. Queued and live
/// each get their own, because on a shared scale a few live runners against a queue
/// of dozens draw nothing at all (issue 16, item 4).
pub fn scale(data: &[Option<u64>]) -> u64 {
    data.iter().flatten().copied().max().unwrap_or(0).max(1)
}

/// The `p`-th percentile (0..=100) of sorted values, nearest rank.
pub fn percentile(sorted: &[i64], p: usize) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    Some(sorted[rank.min(sorted.len()) - 1])
}

impl Component for PicturesView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        match movement(&key, 3) {
            Some(by) => {
                self.offset = step_index(self.offset, by, snap.profiles.len());
                Handled::Yes
            }
            None => Handled::No,
        }
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let [queues, latency] =
            Layout::vertical([Constraint::Fill(1), Constraint::Length(6)]).areas(area);
        self.draw_queues(f, queues, cx);
        draw_latency(f, latency, cx);
    }
}

impl PicturesView {
    fn draw_queues(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let (snap, th) = (cx.snap, &cx.theme);
        let block = Block::bordered().title(Line::from(vec![
            Span::raw(format!(" Last {} min: ", PICTURE_WINDOW_MS / 60_000)),
            Span::styled("queued jobs", th.series_a()),
            Span::raw(" vs "),
            Span::styled("live runners", th.series_b()),
            Span::raw(", each to its own peak "),
        ]));
        let inner = block.inner(area);
        f.render_widget(block, area);
        if snap.profiles.is_empty() {
            f.render_widget(Paragraph::new("no profiles"), inner);
            return;
        }
        let fits = (inner.height / PROFILE_ROWS).max(1) as usize;
        let first = self.offset.min(snap.profiles.len().saturating_sub(fits));
        for (k, row) in snap.profiles.iter().skip(first).take(fits).enumerate() {
            let y = inner.y + k as u16 * PROFILE_ROWS;
            if y + PROFILE_ROWS > inner.y + inner.height {
                break;
            }
            let name = &row.policy.name;
            let (queued, live) = series(snap, name);
            let peak = |v: &[(Millis, u64)]| v.iter().map(|p| p.1).max();
            let last = |v: &[(Millis, u64)]| v.last().map(|p| p.1);
            let mut lat: Vec<i64> = snap
                .latency
                .iter()
                .filter(|s| &s.profile == name)
                .map(|s| s.latency_ms)
                .collect();
            lat.sort_unstable();
            let num = |v: Option<u64>| fmt::or_dash(v, |n| n.to_string());
            let title = Line::from(vec![
                Span::styled(format!("{name} "), th.title()),
                Span::styled(
                    format!(
                        "queued {} (peak {})",
                        num(last(&queued)),
                        num(peak(&queued))
                    ),
                    th.series_a(),
                ),
                Span::raw("  "),
                Span::styled(
                    format!("live {} (peak {})", num(last(&live)), num(peak(&live))),
                    th.series_b(),
                ),
                Span::raw(format!(
                    "  max {}  wait p50 {}",
                    row.policy.max_capacity,
                    fmt::or_dash(percentile(&lat, 50), fmt::age)
                )),
            ]);
            f.render_widget(Paragraph::new(title), Rect::new(inner.x, y, inner.width, 1));
            let label_w = 7u16.min(inner.width);
            let spark_w = inner.width.saturating_sub(label_w);
            for (i, (label, points, style)) in [
                ("queued", &queued, th.series_a()),
                ("live", &live, th.series_b()),
            ]
            .into_iter()
            .enumerate()
            {
                let ly = y + 1 + i as u16;
                let data = buckets(points, snap.now, spark_w as usize, SAMPLE_HOLD_MS);
                // Each series on its own scale: the top of each row is its own peak,
                // which the title line gives.
                let top = scale(&data);
                f.render_widget(
                    Paragraph::new(Span::styled(label, th.quiet())),
                    Rect::new(inner.x, ly, label_w, 1),
                );
                f.render_widget(
                    Sparkline::default().data(&data).max(top).style(style),
                    Rect::new(inner.x + label_w, ly, spark_w, 1),
                );
            }
        }
    }
}

fn draw_latency(f: &mut Frame, area: Rect, cx: &Ctx) {
    let (snap, th) = (cx.snap, &cx.theme);
    let mut all: Vec<i64> = snap.latency.iter().map(|s| s.latency_ms).collect();
    all.sort_unstable();
    let stat = |p| fmt::or_dash(percentile(&all, p), fmt::age);
    let block = Block::bordered().title(format!(
        " Queue to start: {} jobs · p50 {} · p90 {} · max {} ",
        all.len(),
        stat(50),
        stat(90),
        stat(100)
    ));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let points: Vec<(Millis, u64)> = snap
        .latency
        .iter()
        .map(|s| (s.at, (s.latency_ms.max(0) / 1000) as u64))
        .collect();
    let data = buckets(&points, snap.now, inner.width as usize, 0);
    f.render_widget(Sparkline::default().data(&data).style(th.waiting()), inner);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_the_largest_and_leave_gaps() {
        let now = 1_000_000;
        let start = now - PICTURE_WINDOW_MS;
        let pts = [(start - 1, 99), (start, 3), (start + 1, 5), (now, 2)];
        let b = buckets(&pts, now, 4, 0);
        assert_eq!(b, vec![Some(5), None, None, Some(2)]);
        assert!(buckets(&pts, now, 0, 0).is_empty());
        // Held for a minute: the second slice (2.5 min in) is too far from the first.
        let b = buckets(&pts, now, 4, 60_000);
        assert_eq!(b, vec![Some(5), None, None, Some(2)]);
        let b = buckets(&pts, now, 40, 60_000);
        assert_eq!(
            &b[..5],
            &[Some(5); 5],
            "15 s slices repeat the sample for a minute"
        );
        assert_eq!(b[5], None);
    }

    #[test]
    fn each_series_has_its_own_scale() {
        // Issue 16, item 4: live 3 against a queue peak of 33 drew nothing.
        let queued = [Some(33), Some(20), None];
        let live = [Some(3), Some(1), None];
        assert_eq!(scale(&queued), 33);
        assert_eq!(scale(&live), 3, "live is drawn against its own peak");
        assert_eq!(
            scale(&[None, Some(0)]),
            1,
            "an empty series still has a top"
        );
        assert_eq!(scale(&[]), 1);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(percentile(&v, 50), Some(5));
        assert_eq!(percentile(&v, 90), Some(9));
        assert_eq!(percentile(&v, 100), Some(10));
        assert_eq!(percentile(&[], 50), None);
    }
}
