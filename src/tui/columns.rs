//! Table columns sized to their content: each column as wide as its widest cell (or
//! header), the surplus to one growing column, and on a narrow screen the widest
//! shrinkable columns give way first, so a short word is never cut while a long one
//! has room to spare (issue 16: LIMITED BY cut to `not_reconcili` beside a roomy
//! PROFILE).

use ratatui::layout::Constraint;
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row};

/// One column: its header, how narrow it may get (`None`: never narrower than its
/// content, for numbers and short words), how long it keeps its width when the
/// screen is narrow (higher keeps longer), and whether it takes the room left over.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub header: &'static str,
    pub min: Option<u16>,
    pub keep: u8,
    pub grow: bool,
}

impl Col {
    /// Never cut: numbers, states, short words.
    pub const fn fixed(header: &'static str) -> Col {
        Col {
            header,
            min: None,
            keep: 0,
            grow: false,
        }
    }

    /// May be cut down to `min` when the screen is narrow.
    pub const fn shrink(header: &'static str, min: u16) -> Col {
        Col {
            header,
            min: Some(min),
            keep: 1,
            grow: false,
        }
    }

    /// May be cut down to `min`, and takes whatever room is left.
    pub const fn grow(header: &'static str, min: u16) -> Col {
        Col {
            header,
            min: Some(min),
            keep: 1,
            grow: true,
        }
    }

    /// Keeps its width longer than the others (`keep` above 1), or gives way first
    /// (0: text shown in full elsewhere).
    pub const fn keep(mut self, keep: u8) -> Col {
        self.keep = keep;
        self
    }
}

/// The gap ratatui's `Table` leaves between columns by default.
pub const SPACING: u16 = 1;

/// The widths of columns whose content is `natural` wide, fitted into `avail`
/// (spacing included): shrinkable columns give way one cell at a time, the lowest
/// `keep` first and the widest among those, down to their `min`; the room left over
/// goes to the first growing column.
pub fn fit(
    natural: &[u16],
    min: &[Option<u16>],
    keep: &[u8],
    grow: &[bool],
    avail: u16,
) -> Vec<u16> {
    let mut w = natural.to_vec();
    let gaps = SPACING * natural.len().saturating_sub(1) as u16;
    let total = |w: &[u16]| w.iter().map(|&x| u32::from(x)).sum::<u32>() + u32::from(gaps);
    let mut over = total(&w).saturating_sub(u32::from(avail));
    while over > 0 {
        let widest = (0..w.len())
            .filter(|&i| min[i].is_some_and(|m| w[i] > m))
            .max_by_key(|&i| (std::cmp::Reverse(keep[i]), w[i], std::cmp::Reverse(i)));
        let Some(i) = widest else { break };
        w[i] -= 1;
        over -= 1;
    }
    let spare = u32::from(avail).saturating_sub(total(&w));
    if let Some(i) = grow.iter().position(|g| *g) {
        w[i] = w[i].saturating_add(spare.min(u32::from(u16::MAX)) as u16);
    }
    w
}

/// A table's header row, body rows and widths from cells of text and style, sized to
/// fit `avail` columns.
pub fn table<'a>(
    cols: &[Col],
    rows: Vec<Vec<Span<'a>>>,
    avail: u16,
) -> (Row<'a>, Vec<Row<'a>>, Vec<Constraint>) {
    let mut natural: Vec<u16> = cols.iter().map(|c| c.header.len() as u16).collect();
    for r in &rows {
        for (i, s) in r.iter().enumerate().take(natural.len()) {
            natural[i] = natural[i].max(s.width() as u16);
        }
    }
    let min: Vec<Option<u16>> = cols.iter().map(|c| c.min).collect();
    let keep: Vec<u8> = cols.iter().map(|c| c.keep).collect();
    let grow: Vec<bool> = cols.iter().map(|c| c.grow).collect();
    let widths = fit(&natural, &min, &keep, &grow, avail)
        .into_iter()
        .map(Constraint::Length)
        .collect();
    let header = Row::new(cols.iter().map(|c| c.header));
    let body = rows
        .into_iter()
        .map(|r| Row::new(r.into_iter().map(Cell::from)))
        .collect();
    (header, body, widths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_fits_and_the_surplus_goes_to_the_growing_column() {
        // PROFILE 5, LIMITED BY 15, LAST ERROR 20, in 60: all fit, error takes the rest.
        let w = fit(
            &[5, 15, 20],
            &[Some(4), Some(10), Some(10)],
            &[1; 3],
            &[false, false, true],
            60,
        );
        assert_eq!(w, vec![5, 15, 38]);
        assert_eq!(w.iter().sum::<u16>() + 2, 60);
    }

    #[test]
    fn the_widest_shrinkable_column_gives_way_first() {
        // 22-wide PROFILE, 15-wide LIMITED BY, 3-wide number, in 36: PROFILE shrinks
        // to 16 before LIMITED BY loses a cell.
        let w = fit(
            &[22, 15, 3],
            &[Some(7), Some(10), None],
            &[1; 3],
            &[false; 3],
            36,
        );
        assert_eq!(w, vec![16, 15, 3]);
        // Tighter: both shrink, evenly from the top, never below their min.
        let w = fit(
            &[22, 15, 3],
            &[Some(7), Some(10), None],
            &[1; 3],
            &[false; 3],
            25,
        );
        assert_eq!(w, vec![10, 10, 3]);
        let w = fit(
            &[22, 15, 3],
            &[Some(7), Some(10), None],
            &[1; 3],
            &[false; 3],
            5,
        );
        assert_eq!(w, vec![7, 10, 3], "mins hold; the table is cut at the edge");
    }

    #[test]
    fn fixed_columns_never_shrink() {
        let w = fit(&[8, 8], &[None, None], &[0, 0], &[false, true], 10);
        assert_eq!(w, vec![8, 8]);
        assert!(fit(&[], &[], &[], &[], 10).is_empty());
    }

    #[test]
    fn a_column_shown_in_full_elsewhere_gives_way_before_one_that_is_not() {
        // PROFILE 22 (keep 1), LIMITED BY 26 (keep 2), LAST ERROR 40 (keep 0) in 60:
        // the error goes down to its min before anything else is cut.
        let min = [Some(7), Some(15), Some(10)];
        let w = fit(&[22, 26, 40], &min, &[1, 2, 0], &[false; 3], 60);
        assert_eq!(w, vec![22, 26, 10]);
        // Tighter: then PROFILE; LIMITED BY last.
        let w = fit(&[22, 26, 40], &min, &[1, 2, 0], &[false; 3], 50);
        assert_eq!(w, vec![12, 26, 10]);
        let w = fit(&[22, 26, 40], &min, &[1, 2, 0], &[false; 3], 40);
        assert_eq!(w, vec![7, 21, 10]);
    }
}
