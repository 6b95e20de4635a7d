//! The Settings pane: the host's plain settings and every profile's, each editable in
//! place. Enter opens an editor on the selected value; Enter again sends it through
//! the CLI's own validated edit (`store::edit_host`, or `store::edit_profile` with the
//! revision shown); a refused value stays in the editor with the reason under it, and
//! nothing is written. Esc leaves the editor.

use super::actions::Action;
use super::app::{Component, Ctx, Effect, Handled, movement, step_index};
use super::columns::{self, Col};
use super::keys::{self, Binding};
use super::model::Snapshot;
use super::runners::{clicked, first_shown};
use crate::domain::{Host, ScalePolicy};
use crate::timefmt::duration;
use crate::units;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Table, TableState, Wrap};

/// Whose setting a row is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Host,
    /// A profile, at the revision shown: an edit made elsewhere meanwhile is refused.
    Profile {
        name: String,
        revision: u64,
    },
}

impl Scope {
    pub fn word(&self) -> String {
        match self {
            Scope::Host => "host".into(),
            Scope::Profile { name, .. } => format!("profile {name}"),
        }
    }
}

/// One setting as shown: whose, its key, its value as `set` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub scope: Scope,
    pub key: &'static str,
    pub value: String,
}

impl Setting {
    /// The edit that sets it to `value`.
    pub fn action(&self, value: &str) -> Action {
        match &self.scope {
            Scope::Host => Action::SetHost {
                key: self.key.to_string(),
                value: value.to_string(),
            },
            Scope::Profile { name, revision } => Action::SetProfile {
                profile: name.clone(),
                revision: *revision,
                setting: format!("{}={value}", self.key),
            },
        }
    }
}

fn yes(b: bool) -> String {
    b.to_string()
}

fn none_or<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "none".into())
}

/// CPUs from thousandths, as `cpu_max=` takes them (`1.5`, `2`).
fn cpus(m: u32) -> String {
    let s = format!("{}.{:03}", m / 1000, m % 1000);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The host's settings `top` edits (`domain::host::PLAIN_KEYS`).
pub fn host_settings(h: &Host) -> Vec<Setting> {
    crate::domain::host::PLAIN_KEYS
        .iter()
        .map(|&key| Setting {
            scope: Scope::Host,
            key,
            value: match key {
                "capacity" => h.capacity.to_string(),
                "coordinator_insecure" => yes(h.coordinator_insecure),
                "isolation" => h.isolation.as_str().to_string(),
                "retention" => duration(h.retention_secs),
                "logs_max" => units::bytes(h.logs_max_bytes),
                "disk_reserve" => units::bytes(h.disk_reserve_bytes),
                "cache_cap" => units::bytes(h.cache_cap_bytes),
                _ => String::new(),
            },
        })
        .collect()
}

/// A profile's settings as `profile set` takes them (target, runner_dir, run_as and
/// env are left to the CLI: they name things elsewhere).
pub fn profile_settings(p: &ScalePolicy, user_labels: &[String]) -> Vec<Setting> {
    let scope = Scope::Profile {
        name: p.name.clone(),
        revision: p.revision,
    };
    let rows: [(&'static str, String); 22] = [
        ("labels", user_labels.join(",")),
        ("default_labels", yes(p.default_labels)),
        ("min", p.min_capacity.to_string()),
        ("max", p.max_capacity.to_string()),
        ("active", yes(p.active)),
        ("mode", p.mode.as_str().to_string()),
        ("demand", p.demand.as_str().to_string()),
        ("idle_timeout", duration(p.idle_timeout_secs)),
        ("bootstrap_timeout", duration(p.bootstrap_timeout_secs)),
        ("job_timeout", none_or(p.job_timeout_secs, duration)),
        ("allow_public", yes(p.allow_public)),
        ("runner_group", p.runner_group.clone().unwrap_or_default()),
        ("memory_max", none_or(p.memory_max, units::bytes)),
        ("cpu_max", none_or(p.cpu_max, cpus)),
        ("pids_max", none_or(p.pids_max, |n| n.to_string())),
        ("limits", p.limits.as_str().to_string()),
        ("tools", p.tools.join(",")),
        ("execution", p.execution.as_str().to_string()),
        ("disk_max", none_or(p.disk_max, units::bytes)),
        (
            "caches",
            crate::domain::caches::show_setting(p.caches).to_string(),
        ),
        ("workspace", p.workspace.as_str().to_string()),
        (
            "rerun_lost",
            crate::domain::rerun::setting_text(p.rerun_lost),
        ),
    ];
    rows.into_iter()
        .map(|(key, value)| Setting {
            scope: scope.clone(),
            key,
            value,
        })
        .collect()
}

/// Every row: the host's, then each profile's.
pub fn settings(snap: &Snapshot) -> Vec<Setting> {
    let mut out = snap.host.as_ref().map(host_settings).unwrap_or_default();
    for p in &snap.profiles {
        out.extend(profile_settings(&p.policy, &p.user_labels));
    }
    out
}

/// The editor open on one setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Editor {
    pub setting: Setting,
    pub input: String,
    /// Why the last value was refused: shown under the input, which stays open.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingsView {
    pub index: usize,
    pub edit: Option<Editor>,
}

impl SettingsView {
    /// Selects the first row of `profile`.
    pub fn select_profile(&mut self, snap: &Snapshot, profile: &str) {
        if let Some(i) = settings(snap)
            .iter()
            .position(|s| matches!(&s.scope, Scope::Profile { name, .. } if name == profile))
        {
            self.index = i;
        }
    }

    /// The selected row's `set` argument, for `c`.
    pub fn copy_text(&self, snap: &Snapshot) -> Option<String> {
        let s = settings(snap).into_iter().nth(self.index)?;
        Some(match &s.scope {
            Scope::Host => format!("runner-manager host set {}={}", s.key, s.value),
            Scope::Profile { name, .. } => {
                format!("runner-manager profile set {name} {}={}", s.key, s.value)
            }
        })
    }

    pub fn click(&mut self, row: u16, height: u16, snap: &Snapshot) {
        if self.edit.is_some() {
            return;
        }
        if let Some(i) = clicked(row, height, self.index, settings(snap).len()) {
            self.index = i;
        }
    }

    /// After a reload, an open editor shows the setting as it is now ("was" and the
    /// revision): an edit refused because another was made meanwhile can then be sent
    /// again knowingly, over the value now shown.
    pub fn follow(&mut self, snap: &Snapshot) {
        let Some(e) = self.edit.as_mut() else { return };
        let same = |s: &Setting| {
            s.key == e.setting.key
                && match (&s.scope, &e.setting.scope) {
                    (Scope::Host, Scope::Host) => true,
                    (Scope::Profile { name: a, .. }, Scope::Profile { name: b, .. }) => a == b,
                    _ => false,
                }
        };
        match settings(snap).into_iter().find(same) {
            Some(now) => e.setting = now,
            // The profile was removed meanwhile: nothing left to edit.
            None => self.edit = None,
        }
    }

    /// What an edit came to: done closes the editor; refused keeps it, with why.
    pub fn answered(&mut self, refused: Option<String>) {
        match refused {
            Some(why) => {
                if let Some(e) = self.edit.as_mut() {
                    e.error = Some(why);
                }
            }
            None => self.edit = None,
        }
    }

    /// Keys while the editor is open: typing, Backspace, Ctrl-U clears (a shell's
    /// line kill), Enter sends, Esc cancels. No other Ctrl key types its letter.
    fn edit_key(&mut self, key: KeyEvent) -> Handled {
        let Some(e) = self.edit.as_mut() else {
            return Handled::No;
        };
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            if key.code == KeyCode::Char('u') {
                e.input.clear();
                e.error = None;
            }
            return Handled::Yes;
        }
        match key.code {
            KeyCode::Esc => {
                self.edit = None;
                Handled::Yes
            }
            KeyCode::Enter => Handled::Then(Effect::Act(e.setting.action(e.input.trim()))),
            KeyCode::Backspace => {
                e.input.pop();
                e.error = None;
                Handled::Yes
            }
            KeyCode::Char(c) if !c.is_control() => {
                e.input.push(c);
                e.error = None;
                Handled::Yes
            }
            _ => Handled::Yes,
        }
    }
}

/// The Settings pane's one key of its own (the editor it opens takes typed text:
/// Enter sets, Esc leaves, Ctrl-U clears).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Edit;

const KEYS: &[Binding<Edit>] = &[Binding {
    keys: &[KeyCode::Enter, KeyCode::Char('o')],
    cmd: Edit,
    help: "edit the setting (Enter sets, Esc leaves)",
}];

impl Component for SettingsView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        if self.edit.is_some() {
            return self.edit_key(key);
        }
        let rows = settings(snap);
        if let Some(by) = movement(&key, 10) {
            self.index = step_index(self.index, by, rows.len());
            return Handled::Yes;
        }
        match keys::find(KEYS, &key) {
            Some(Edit) => {
                if let Some(s) = rows.into_iter().nth(self.index) {
                    self.edit = Some(Editor {
                        input: s.value.clone(),
                        setting: s,
                        error: None,
                    });
                }
                Handled::Yes
            }
            None => Handled::No,
        }
    }

    fn keys(&self) -> Vec<(String, &'static str)> {
        keys::help_lines(KEYS)
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let (snap, th) = (cx.snap, &cx.theme);
        let rows = settings(snap);
        let index = self.index.min(rows.len().saturating_sub(1));
        let cols = [
            Col::shrink("OF", 8),
            Col::fixed("SETTING"),
            Col::grow("VALUE", 8),
        ];
        let height = area.height.saturating_sub(3) as usize;
        let first = first_shown(index, area.height);
        let cells: Vec<Vec<Span>> = rows
            .iter()
            .skip(first)
            .take(height)
            .map(|s| {
                vec![
                    Span::raw(s.scope.word()),
                    Span::styled(s.key, th.title()),
                    Span::raw(s.value.clone()),
                ]
            })
            .collect();
        let (header, body, widths) = columns::table(&cols, cells, area.width.saturating_sub(2));
        let table = Table::new(body, widths)
            .header(header.style(th.header()))
            .row_highlight_style(th.selected())
            .block(th.block().title(
                " Settings · Enter edits · checked as 'host set' and 'profile set' check them ",
            ));
        let selected = (!rows.is_empty()).then_some(index - first);
        let mut state = TableState::default().with_selected(selected);
        f.render_stateful_widget(table, area, &mut state);
        if let Some(e) = &self.edit {
            draw_editor(f, area, cx, e);
        }
    }
}

fn draw_editor(f: &mut Frame, area: Rect, cx: &Ctx, e: &Editor) {
    let th = &cx.theme;
    let r = area.centered(
        Constraint::Length(70.min(area.width)),
        Constraint::Length(7.min(area.height)),
    );
    let [_, inner] = Layout::vertical([Constraint::Length(0), Constraint::Fill(1)]).areas(r);
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("{}=", e.setting.key), th.title()),
            Span::raw(e.input.clone()),
            Span::styled("_", th.waiting()),
        ]),
        Line::styled(format!("was {}", e.setting.value), th.quiet()),
    ];
    match &e.error {
        Some(why) => lines.push(Line::styled(
            format!("refused, nothing written: {why}"),
            th.bad(),
        )),
        None => lines.push(Line::raw("Enter sets it · Esc leaves it as it was")),
    }
    f.render_widget(Clear, inner);
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            th.block()
                .title(format!(" Edit {} ", e.setting.scope.word())),
        ),
        inner,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_set_takes_them() {
        assert_eq!(cpus(1500), "1.5");
        assert_eq!(cpus(2000), "2");
        assert_eq!(cpus(10), "0.01");
        for (v, want) in [(1500, 1500), (2000, 2000), (10, 10)] {
            assert_eq!(
                crate::domain::isolation::cpu_max("cpu_max", &cpus(v)).unwrap(),
                Some(want)
            );
        }
        let b = units::bytes(3 << 29);
        assert_eq!(
            crate::domain::isolation::parse_bytes("logs_max", &b).unwrap(),
            3 << 29
        );
    }

    #[test]
    fn a_profile_setting_edits_from_the_revision_shown() {
        let mut p = ScalePolicy::new("linux", "octo", "h");
        p.revision = 4;
        let rows = profile_settings(&p, &[]);
        let max = rows.iter().find(|s| s.key == "max").unwrap();
        assert_eq!(
            max.action("9"),
            Action::SetProfile {
                profile: "linux".into(),
                revision: 4,
                setting: "max=9".into()
            }
        );
    }

    #[test]
    fn the_editor_types_sends_and_keeps_a_refused_value_with_why() {
        let key = |c| KeyEvent::new(c, KeyModifiers::NONE);
        let mut v = SettingsView {
            index: 0,
            edit: Some(Editor {
                setting: Setting {
                    scope: Scope::Host,
                    key: "capacity",
                    value: "8".into(),
                },
                input: "8".into(),
                error: None,
            }),
        };
        v.edit_key(key(KeyCode::Backspace));
        v.edit_key(key(KeyCode::Char('0')));
        let sent = v.edit_key(key(KeyCode::Enter));
        assert_eq!(
            sent,
            Handled::Then(Effect::Act(Action::SetHost {
                key: "capacity".into(),
                value: "0".into()
            }))
        );
        v.answered(Some("capacity: must be 1..1000".into()));
        let e = v
            .edit
            .as_ref()
            .expect("a refused value keeps the editor open");
        assert_eq!((e.input.as_str(), e.error.is_some()), ("0", true));
        v.edit_key(key(KeyCode::Backspace));
        assert_eq!(
            v.edit.as_ref().unwrap().error,
            None,
            "typing clears the reason"
        );
        v.answered(None);
        assert_eq!(v.edit, None);
        assert_eq!(v.edit_key(key(KeyCode::Esc)), Handled::No);
    }

    #[test]
    fn ctrl_u_clears_the_editor_and_no_ctrl_key_types_its_letter() {
        let mut v = SettingsView {
            index: 0,
            edit: Some(Editor {
                setting: Setting {
                    scope: Scope::Host,
                    key: "capacity",
                    value: "6".into(),
                },
                input: "6".into(),
                error: None,
            }),
        };
        let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        v.edit_key(ctrl('w'));
        assert_eq!(v.edit.as_ref().unwrap().input, "6");
        v.edit_key(ctrl('u'));
        v.edit_key(KeyEvent::new(KeyCode::Char('9'), KeyModifiers::NONE));
        assert_eq!(v.edit.as_ref().unwrap().input, "9");
    }
}
