//! Settings that are valid yet put runners or the host at risk: a preload into every
//! job's programs, a directory others can write on a runner's `PATH`, a `run_as` user
//! whose uid other services share. Pure decisions over facts the CLI gathers (who
//! owns a directory, its mode, a user's uid): a risk that can be worth taking is a
//! warning the change stands with; one nothing good can come of is refused.

use super::validate::Invalid;

/// What `stat` said about a directory on a `PATH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirFacts {
    pub uid: u32,
    /// The permission bits, with the sticky bit.
    pub mode: u32,
}

/// The variables that make the dynamic linker load code into every program a job
/// runs.
const LOADER_VARS: &[&str] = &["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"];

/// Checks `env.NAME=VALUE` (`key` is `env.NAME`) for risk: `Ok(warnings)`, or the
/// refusal of a `PATH` entry others can write (whoever writes there picks what a job
/// runs as `git` or `sh`: a sticky bit does not help, as the file is new). `me` is
/// the manager's uid; `stat` reads a directory (`None`: absent or unreadable, which
/// `doctor` and the tools check report).
pub fn env(
    key: &str,
    name: &str,
    value: &str,
    me: u32,
    stat: impl Fn(&str) -> Option<DirFacts>,
) -> Result<Vec<String>, Invalid> {
    let mut warnings = Vec::new();
    if value.is_empty() {
        return Ok(warnings);
    }
    let upper = name.to_ascii_uppercase();
    if LOADER_VARS.contains(&upper.as_str()) {
        warnings.push(format!(
            "{key}: every program of every job loads what it names ({value}), before its \
             own code: whoever can write those files runs code in every job; keep them \
             root's and unwritable by group and others"
        ));
    }
    if name == "PATH" {
        for dir in value.split(':') {
            let Some(f) = stat(dir) else { continue };
            if f.mode & 0o002 != 0 {
                return Err(Invalid::new(
                    key,
                    format!(
                        "{dir} is writable by anyone (mode {:04o}): whoever writes there \
                         chooses what a job runs as git, sh or any tool; list only \
                         directories that root or the manager alone can write",
                        f.mode
                    ),
                ));
            }
            if f.mode & 0o020 != 0 || (f.uid != 0 && f.uid != me) {
                warnings.push(format!(
                    "{key}: {dir} on a runner's PATH can be written by {} (uid {}, mode \
                     {:04o}): whoever writes there chooses what a job runs; chmod go-w \
                     and chown root: it, or leave it off PATH",
                    if f.mode & 0o020 != 0 {
                        "its group"
                    } else {
                        "another user"
                    },
                    f.uid,
                    f.mode
                ));
            }
        }
    }
    Ok(warnings)
}

/// The uids that name "nobody" on Linux distributions (65534; 65535 for the 16-bit
/// `nfsnobody` of older ones).
const NOBODY_UIDS: &[u32] = &[65534, 65535];

/// A warning for `run_as=USER` whose uid (`None`: not a user yet) other services
/// share: a job then runs as them, and can signal, trace and read their processes and
/// files, and they its.
pub fn run_as(key: &str, user: &str, uid: Option<u32>) -> Option<String> {
    let shared =
        matches!(user, "nobody" | "nfsnobody") || uid.is_some_and(|u| NOBODY_UIDS.contains(&u));
    shared.then(|| {
        format!(
            "{key}: {user} is a uid other services share (daemons that drop to it, NFS's \
             squashed files): a job running as {user} can signal, trace and read their \
             processes and files, and they its; create a user for runners alone \
             (useradd --system rm-runner)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 0;

    fn dirs(list: &'static [(&'static str, u32, u32)]) -> impl Fn(&str) -> Option<DirFacts> {
        move |d| {
            list.iter()
                .find(|(p, _, _)| *p == d)
                .map(|&(_, uid, mode)| DirFacts { uid, mode })
        }
    }

    const HOST: &[(&str, u32, u32)] = &[
        ("/usr/bin", 0, 0o755),
        ("/tmp", 0, 0o1777),
        ("/srv/shared", 0, 0o775),
        ("/home/alice/bin", 1000, 0o755),
    ];

    #[test]
    fn a_path_entry_anyone_can_write_is_refused_and_one_others_can_is_warned_of() {
        // Issue 33: env.PATH=/tmp:... was accepted silently.
        let e = env("env.PATH", "PATH", "/tmp:/usr/bin", ME, dirs(HOST)).unwrap_err();
        assert_eq!(e.arg, "env.PATH");
        assert!(e.reason.contains("/tmp is writable by anyone"), "{e}");
        let w = env("env.PATH", "PATH", "/srv/shared:/usr/bin", ME, dirs(HOST)).unwrap();
        assert!(w.len() == 1 && w[0].contains("its group"), "{w:?}");
        let w = env("env.PATH", "PATH", "/home/alice/bin", ME, dirs(HOST)).unwrap();
        assert!(w.len() == 1 && w[0].contains("uid 1000"), "{w:?}");
        // Root's own, or missing (the tools check reports that): nothing to say.
        assert!(
            env("env.PATH", "PATH", "/usr/bin:/opt/none", ME, dirs(HOST))
                .unwrap()
                .is_empty()
        );
        assert!(
            env("env.PATH", "PATH", "", ME, dirs(HOST))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_preload_is_warned_of_and_other_variables_pass() {
        for name in ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"] {
            let key = format!("env.{name}");
            let w = env(&key, name, "/usr/lib/libeatmydata.so", ME, dirs(HOST)).unwrap();
            assert!(
                w.len() == 1 && w[0].contains("every program of every job"),
                "{w:?}"
            );
        }
        assert!(
            env("env.FOO", "FOO", "/tmp", ME, dirs(HOST))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn nobody_is_a_shared_uid() {
        assert!(
            run_as("run_as", "nobody", Some(65534))
                .unwrap()
                .contains("share")
        );
        assert!(run_as("run_as", "nfsnobody", None).is_some());
        assert!(run_as("run_as", "squashed", Some(65534)).is_some());
        assert_eq!(run_as("run_as", "runner", Some(1001)), None);
        assert_eq!(run_as("run_as", "runner", None), None);
    }
}
