//! An install directory laid out like an unpacked actions-runner release whose
//! `bin/Runner.Listener` and `bin/Runner.Worker` are our own binary (dispatched on
//! argv[0]), so the daemon cannot tell it from the real thing.

use std::io;
use std::path::Path;

use super::control::RUNNER_VERSION;

/// Lays out `dir` (created if missing) with links to `binary`. Hard links first (cheap,
/// and argv[0] keeps the link's name), then a copy, then a symlink.
pub fn lay_out(dir: &Path, binary: &Path) -> io::Result<()> {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    for name in ["Runner.Listener", "Runner.Worker"] {
        let target = bin.join(name);
        if target.exists() {
            std::fs::remove_file(&target)?;
        }
        if std::fs::hard_link(binary, &target).is_err() && std::fs::copy(binary, &target).is_err() {
            std::os::unix::fs::symlink(binary, &target)?;
        }
    }
    for (name, text) in SCRIPTS {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::write(bin.join("runnerversion"), RUNNER_VERSION)?;
    std::fs::create_dir_all(dir.join("externals"))?;
    for stale in [".runner", ".credentials", ".credentials_rsaparams"] {
        let _ = std::fs::remove_file(dir.join(stale));
    }
    Ok(())
}

/// The top-level scripts of a runner release, as the simulated install has them.
pub const SCRIPTS: [(&str, &str); 3] = [
    (
        "run.sh",
        "#!/bin/bash\n# Simulated actions-runner: run.sh restarts on exit code 2 like the real one.\nDIR=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\nwhile true; do\n  \"$DIR/bin/Runner.Listener\" run \"$@\"\n  code=$?\n  if [ $code -ne 2 ]; then\n    if [ $code -eq 1 ]; then exit 1; fi\n    exit 0\n  fi\ndone\n",
    ),
    (
        "config.sh",
        "#!/bin/bash\necho \"The simulated runner is configured with a JIT config (ACTIONS_RUNNER_INPUT_JITCONFIG); config.sh does nothing\" >&2\nexit 1\n",
    ),
    (
        "env.sh",
        "#!/bin/bash\n# Writes .env and .path like the real env.sh.\nDIR=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\necho \"LANG=${LANG:-C.UTF-8}\" > \"$DIR/.env\"\necho \"$PATH\" > \"$DIR/.path\"\n",
    ),
];
