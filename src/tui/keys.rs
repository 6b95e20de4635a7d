//! Each view's keys, declared once (gitui's `commands()`): a table of bindings that the
//! view's dispatch reads ([`find`], then a `match` on the view's own command enum) and
//! the help overlay lists ([`help_lines`]), so a key cannot be shown without being
//! handled, nor handled without being shown. Text typed into an editor (the attempts
//! filter, a setting's value) is not a key binding and is not listed.

use crossterm::event::{KeyCode, KeyEvent};

/// Keys that do one command, and what the help says of them.
pub struct Binding<C: 'static> {
    pub keys: &'static [KeyCode],
    pub cmd: C,
    pub help: &'static str,
}

/// The command `key` is bound to in `table`.
pub fn find<C: Copy>(table: &[Binding<C>], key: &KeyEvent) -> Option<C> {
    table
        .iter()
        .find(|b| b.keys.contains(&key.code))
        .map(|b| b.cmd)
}

/// Whether `table` binds `key` to anything.
pub fn binds<C>(table: &[Binding<C>], code: KeyCode) -> bool {
    table.iter().any(|b| b.keys.contains(&code))
}

/// A key as the help writes it.
pub fn key_name(code: KeyCode) -> String {
    match code {
        KeyCode::Char(' ') => "Space".into(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Enter => "Enter".into(),
        KeyCode::Esc => "Esc".into(),
        KeyCode::Tab => "Tab".into(),
        KeyCode::BackTab => "S-Tab".into(),
        KeyCode::Backspace => "Bksp".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::Home => "Home".into(),
        KeyCode::End => "End".into(),
        KeyCode::PageUp => "PgUp".into(),
        KeyCode::PageDown => "PgDn".into(),
        KeyCode::F(n) => format!("F{n}"),
        other => format!("{other:?}"),
    }
}

/// The keys of one binding as the help writes them; a run of three or more digits in
/// a row is `1 … 8`.
fn keys_label(keys: &[KeyCode]) -> String {
    let digit = |k: &KeyCode| match k {
        KeyCode::Char(c) if c.is_ascii_digit() => Some(*c),
        _ => None,
    };
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < keys.len() {
        let mut j = i;
        while let (Some(a), Some(b)) =
            (keys.get(j).and_then(digit), keys.get(j + 1).and_then(digit))
            && b as u32 == a as u32 + 1
        {
            j += 1;
        }
        if j >= i + 2 {
            out.push(format!("{} … {}", key_name(keys[i]), key_name(keys[j])));
        } else {
            out.extend(keys[i..=j].iter().map(|k| key_name(*k)));
        }
        i = j + 1;
    }
    out.join(" ")
}

/// The help's lines for `table`: each binding's keys and what they do, bindings with
/// the same words on one line (`j ↓ k ↑  move the selection`).
pub fn help_lines<C>(table: &[Binding<C>]) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    for b in table {
        let keys = keys_label(b.keys);
        match out.iter_mut().find(|(_, help)| *help == b.help) {
            Some((k, _)) => {
                k.push(' ');
                k.push_str(&keys);
            }
            None => out.push((keys, b.help)),
        }
    }
    out
}

/// The keys that move a list's selection or scroll a view, the same in every view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    Down,
    Up,
    PageDown,
    PageUp,
    First,
    Last,
}

pub const MOVES: &[Binding<Move>] = &[
    Binding {
        keys: &[KeyCode::Char('j'), KeyCode::Down],
        cmd: Move::Down,
        help: "move the selection / scroll (or the wheel)",
    },
    Binding {
        keys: &[KeyCode::Char('k'), KeyCode::Up],
        cmd: Move::Up,
        help: "move the selection / scroll (or the wheel)",
    },
    Binding {
        keys: &[KeyCode::PageDown],
        cmd: Move::PageDown,
        help: "move by a page",
    },
    Binding {
        keys: &[KeyCode::PageUp],
        cmd: Move::PageUp,
        help: "move by a page",
    },
    Binding {
        keys: &[KeyCode::Char('g'), KeyCode::Home],
        cmd: Move::First,
        help: "first / last (log: top / follow)",
    },
    Binding {
        keys: &[KeyCode::Char('G'), KeyCode::End],
        cmd: Move::Last,
        help: "first / last (log: top / follow)",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_join_keys_and_lines_join_bindings_of_the_same_words() {
        let digits: Vec<KeyCode> = ('1'..='8').map(KeyCode::Char).collect();
        assert_eq!(keys_label(&digits), "1 … 8");
        assert_eq!(
            keys_label(&[KeyCode::Char('p'), KeyCode::Char(' ')]),
            "p Space"
        );
        assert_eq!(keys_label(&[KeyCode::Char('1'), KeyCode::Char('2')]), "1 2");
        assert_eq!(
            help_lines(MOVES),
            vec![
                (
                    "j ↓ k ↑".to_string(),
                    "move the selection / scroll (or the wheel)"
                ),
                ("PgDn PgUp".to_string(), "move by a page"),
                (
                    "g Home G End".to_string(),
                    "first / last (log: top / follow)"
                ),
            ]
        );
        let down = KeyEvent::from(KeyCode::Down);
        assert_eq!(find(MOVES, &down), Some(Move::Down));
        assert_eq!(find(MOVES, &KeyEvent::from(KeyCode::Char('x'))), None);
    }
}
