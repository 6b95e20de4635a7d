//! Every `runner-manager …` command the README and docs/ show is one the binary takes:
//! its words name a command (the binary's own `--help` for it says so), each option is
//! one of that command's and has its value, it has as many arguments as the command
//! takes, and each `KEY=` a `set` command gives is a key that command knows. As the man
//! page test holds the man page to `--help`, this holds the documentation to the binary.
//!
//! A command is shown in a fenced block (a line starting with `runner-manager`, after
//! `sudo` or `$ `, continued over `\` line ends, up to a comment or a pipe) or in
//! inline code that starts with `runner-manager`. Inline synopses that name a
//! placeholder command (`COMMAND`, `WORDS...`) or alternatives (`[...]`, `a|b`) are
//! grammar, not commands, and are left out.
//!
//! And every link between the pages leads to a file, and to a heading in it.

use crate::support::Dir;
use runner_manager::cli::spec::{self, Command, GLOBAL};
use std::path::{Path, PathBuf};

/// The documentation files: README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("a docs/ directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// One command as shown: where, and its words after `runner-manager`.
#[derive(Debug)]
struct Shown {
    at: String,
    words: Vec<String>,
}

/// Splits a shell line into words: quotes group, backslashes escape.
fn shell_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut any = false;
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The command in a shell line, if it runs runner-manager: cut at a comment, at what
/// the shell does with its output or at a trailing `&`, `sudo` and a prompt taken off.
fn command_of(line: &str) -> Option<Vec<String>> {
    let line = line.trim_start().trim_start_matches("$ ");
    let line = line.strip_prefix("sudo ").unwrap_or(line).trim_start();
    let rest = line.strip_prefix("runner-manager ")?;
    // A command put in the background ends at its `&`.
    let rest = rest.trim_end().strip_suffix(" &").unwrap_or(rest);
    let mut end = rest.len();
    for cut in [" #", " |", " &&", " ||", " >", ";"] {
        if let Some(i) = rest.find(cut) {
            end = end.min(i);
        }
    }
    Some(shell_words(&rest[..end]))
}

/// Every command shown in one page.
fn shown_in(path: &Path) -> Vec<Shown> {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut out = Vec::new();
    let mut fenced = false;
    let mut prose = String::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            prose.push('\n');
            continue;
        }
        if !fenced {
            prose.push_str(line);
            prose.push('\n');
            continue;
        }
        prose.push('\n');
        // A fenced line, joined with the ones its trailing `\` continues onto.
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(line);
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, format!("{head} ")));
            continue;
        }
        if let Some(words) = command_of(&joined) {
            out.push(Shown {
                at: format!("{name}:{start}"),
                words,
            });
        }
    }
    // Inline code in the prose: `runner-manager ...`, possibly across a line break.
    let mut line_no = 1;
    for (n, part) in prose.split('`').enumerate() {
        let at = line_no;
        line_no += part.matches('\n').count();
        if n % 2 == 0 {
            continue;
        }
        let span = part.replace('\n', " ");
        let grammar = ["COMMAND", "WORDS", "<TAB>", "[", "|"].iter().any(|g| {
            // A pipe after a space is the shell's (cut below); inside a word it is
            // alternatives (`bash|zsh|fish`), which is grammar.
            if *g == "|" {
                span.split_whitespace().any(|w| w.contains('|') && w != "|")
            } else {
                span.contains(g)
            }
        });
        if grammar {
            continue;
        }
        if let Some(words) = command_of(&span) {
            out.push(Shown {
                at: format!("{name}:{at}"),
                words,
            });
        }
    }
    out
}

/// What `command` answers for `--version` or `--help` before any command: no command,
/// and a line the binary takes (the test runs it).
const VERSION_OR_HELP: &str = "(version or help)";

/// The command the words name as the parser finds it (global options skipped, the
/// shortest run of words that is a command), and the words after it.
fn command(words: &[String]) -> Result<(&'static Command, Vec<String>), String> {
    let mut path = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if w == "--state-dir" {
            i += 1;
            continue;
        }
        if w.starts_with("--") {
            if (w == "--version" || w == "--help") && path.is_empty() {
                return Err(VERSION_OR_HELP.into());
            }
            if GLOBAL.iter().any(|g| g.name == w) {
                continue;
            }
            return Err(format!("option {w} before any command"));
        }
        path.push(w.clone());
        if let Some(c) = spec::find(&path) {
            return Ok((c, words[i..].to_vec()));
        }
        if !spec::is_prefix(&path) {
            return Err(format!("'{}' is not a command", path.join(" ")));
        }
    }
    Err(format!("'{}' names no whole command", path.join(" ")))
}

/// The options a command's synopsis requires: each entry is a choice of alternatives,
/// each alternative the options it needs together. `--a X (--b Y | --c Z --d W)
/// [--e V]` requires `[[--a]]` and `[[--b], [--c, --d]]`; what is in brackets is
/// optional.
fn required_options(synopsis: &str) -> Vec<Vec<Vec<String>>> {
    /// The scanner's state: what is required so far, how deep in brackets, the
    /// alternatives of the open group, the word being read.
    #[derive(Default)]
    struct Scan {
        out: Vec<Vec<Vec<String>>>,
        optional: usize,
        group: Option<Vec<Vec<String>>>,
        word: String,
    }
    impl Scan {
        fn take(&mut self) {
            let w = std::mem::take(&mut self.word);
            if self.optional > 0 || !w.starts_with("--") {
                return;
            }
            match &mut self.group {
                Some(g) => g.last_mut().unwrap().push(w),
                None => self.out.push(vec![vec![w]]),
            }
        }
    }
    let mut s = Scan::default();
    for ch in synopsis.chars() {
        match ch {
            '[' => {
                s.take();
                s.optional += 1;
            }
            ']' => {
                s.take();
                s.optional = s.optional.saturating_sub(1);
            }
            '(' if s.optional == 0 => s.group = Some(vec![Vec::new()]),
            ')' if s.optional == 0 => {
                s.take();
                if let Some(g) = s.group.take() {
                    s.out.push(g);
                }
            }
            '|' if s.optional == 0 => {
                s.take();
                if let Some(g) = s.group.as_mut() {
                    g.push(Vec::new());
                }
            }
            c if c.is_whitespace() => s.take(),
            c => s.word.push(c),
        }
    }
    s.take();
    s.out
}

/// Checks one shown command against the spec; returns what is wrong with it.
fn check(c: &Command, rest: &[String]) -> Result<(), String> {
    let mut positionals = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let w = &rest[i];
        i += 1;
        if w == "--" {
            positionals.extend(rest[i..].iter().cloned());
            break;
        }
        let Some(flag) = w.strip_prefix("--").map(|_| w.as_str()) else {
            positionals.push(w.clone());
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (flag, None),
        };
        if name == "--state-dir" {
            if inline.is_none() {
                i += 1;
            }
            continue;
        }
        if GLOBAL.iter().any(|g| g.name == name) {
            continue;
        }
        let Some(o) = c.option(name) else {
            return Err(format!("{name} is not an option of '{}'", c.name()));
        };
        match (o.value, inline) {
            (Some(_), None) if i >= rest.len() => {
                return Err(format!("{name} needs a value"));
            }
            (Some(_), None) => i += 1,
            (None, Some(_)) => return Err(format!("{name} takes no value")),
            _ => {}
        }
    }
    if rest.iter().any(|w| w == "--help") {
        // The binary prints the command's help whatever else the line holds.
        return Ok(());
    }
    let given: Vec<&str> = rest
        .iter()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.split('=').next().unwrap_or(w))
        .collect();
    for alternatives in required_options(c.args) {
        if !alternatives
            .iter()
            .any(|all| all.iter().all(|o| given.contains(&o.as_str())))
        {
            let says: Vec<String> = alternatives.iter().map(|a| a.join(" ")).collect();
            return Err(format!("'{}' needs {}", c.name(), says.join(" or ")));
        }
    }
    let (lo, hi) = c.positionals;
    if positionals.len() < lo || hi.is_some_and(|hi| positionals.len() > hi) {
        return Err(format!(
            "'{}' takes {lo} to {hi:?} arguments, not {} ({positionals:?})",
            c.name(),
            positionals.len()
        ));
    }
    let keys: Option<(&[&str], usize)> = match c.path {
        ["target", "set"] => Some((runner_manager::domain::target::SETTABLE_KEYS, 1)),
        ["profile", "set"] => Some((runner_manager::domain::profile::SETTABLE_KEYS, 1)),
        ["host", "set"] => Some((runner_manager::domain::host::SETTABLE_KEYS, 0)),
        _ => None,
    };
    if let Some((keys, names)) = keys {
        for kv in &positionals[names..] {
            let Some((key, _)) = kv.split_once('=') else {
                return Err(format!("'{kv}' is not KEY=VALUE"));
            };
            let known = keys.contains(&key)
                || key
                    .strip_prefix("env.")
                    .is_some_and(|n| keys.contains(&"env.NAME") && !n.is_empty());
            if !known {
                return Err(format!("'{}' has no setting {key}", c.name()));
            }
        }
    }
    Ok(())
}

#[test]
fn a_command_is_found_in_blocks_and_inline_code_and_grammar_is_left_out() {
    let d = Dir::new("docs-extract");
    let page = d.path("page.md");
    std::fs::write(
        &page,
        "Run `runner-manager status` or `runner-manager COMMAND --help`, and\n\
         `runner-manager completions bash|zsh|fish`; `runner-manager profile set\n\
         linux max=8`.\n\
         ```sh\n\
         sudo runner-manager host set capacity=6   # a comment\n\
         runner-manager profile add a --target t \\\n    --labels x --max 2\n\
         runner-manager --json profile show linux | jq .revision\n\
         echo runner-manager status\n\
         ```\n",
    )
    .unwrap();
    let got: Vec<String> = shown_in(&page)
        .into_iter()
        .map(|s| format!("{} {}", s.at, s.words.join(" ")))
        .collect();
    assert_eq!(
        got,
        [
            "page.md:5 host set capacity=6",
            "page.md:6 profile add a --target t --labels x --max 2",
            "page.md:8 --json profile show linux",
            "page.md:1 status",
            "page.md:2 profile set linux max=8",
        ]
    );
    // And the check refuses what the binary would refuse.
    let bad = [
        "profile add a --target t",
        "profile add a --labels x --nope 1",
        "profile set linux maxx=8",
        "target check",
        "target check a b",
        "stats",
        "host set capacity",
    ];
    for b in bad {
        let words = shell_words(b);
        let verdict = command(&words).and_then(|(c, rest)| check(c, &rest));
        assert!(verdict.is_err(), "{b} passed");
    }
    assert_eq!(
        required_options(
            "NAME (--repo R | --org O) [--api-url U] (--token-file P | --app-id I --app-key K [--installation-id N])"
        ),
        [
            vec![vec!["--repo".to_string()], vec!["--org".to_string()]],
            vec![
                vec!["--token-file".to_string()],
                vec!["--app-id".to_string(), "--app-key".to_string()]
            ],
        ]
    );
    let words = shell_words("target add t --org acme --app-id 1 --app-key k");
    let (c, rest) = command(&words).unwrap();
    assert_eq!(check(c, &rest), Ok(()));
    let words = shell_words("profile set linux env.FOO=1 max=2 --revision 3");
    let (c, rest) = command(&words).unwrap();
    assert_eq!(check(c, &rest), Ok(()));
}

#[test]
fn every_command_the_docs_show_is_one_the_binary_takes() {
    let d = Dir::new("docs-commands");
    let mut shown = Vec::new();
    for page in pages() {
        shown.extend(shown_in(&page));
    }
    assert!(
        shown.len() > 50,
        "only {} commands found in the docs",
        shown.len()
    );
    let mut wrong = Vec::new();
    for s in &shown {
        if command(&s.words).err().as_deref() == Some(VERSION_OR_HELP) {
            let args: Vec<&str> = s.words.iter().map(String::as_str).collect();
            let r = d.run(&args);
            if r.code != 0 {
                wrong.push(format!("{}: {}: exit {}", s.at, s.words.join(" "), r.code));
            }
            continue;
        }
        let verdict = command(&s.words).and_then(|(c, rest)| {
            check(c, &rest)?;
            // The binary agrees: with --help after the whole line it parses every
            // option and prints the help of that very command (an unknown command
            // would print the overview, an unknown option exit 2).
            let mut args: Vec<&str> = s.words.iter().map(String::as_str).collect();
            args.push("--help");
            let r = d.run(&args);
            let usage = format!("[--json] {}", c.name());
            if r.code != 0 || !r.stdout.contains(&usage) {
                return Err(format!("the binary says (exit {}): {}", r.code, r.stderr));
            }
            Ok(())
        });
        if let Err(e) = verdict {
            wrong.push(format!(
                "{}: runner-manager {}: {e}",
                s.at,
                s.words.join(" ")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn every_link_between_the_pages_leads_somewhere() {
    assert_eq!(anchor("### 3 `credentials`"[4..].trim()), "3-credentials");
    assert_eq!(anchor("GitHub's rate limit"), "githubs-rate-limit");
    let mut wrong = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        // `](target)`: a Markdown link's target.
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let link = &rest[..end];
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, frag) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            let name = page.file_name().unwrap().to_string_lossy();
            if !target.exists() {
                wrong.push(format!("{name}: {link}: no such file"));
                continue;
            }
            if frag.is_empty() {
                continue;
            }
            let headings: Vec<String> = std::fs::read_to_string(&target)
                .unwrap()
                .lines()
                .filter(|l| l.starts_with('#'))
                .map(|l| anchor(l.trim_start_matches('#')))
                .collect();
            if !headings.iter().any(|h| h == frag) {
                wrong.push(format!("{name}: {link}: no such heading"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
