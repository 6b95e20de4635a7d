//! The coordinator's commands through the real binary.

use crate::support::wait_until;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rm-coord-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rm(d: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN)
        .arg("--state-dir")
        .arg(d.join("state"))
        .args(args)
        .env_remove("RUNNER_MANAGER_STATE_DIR")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// Starts `coordinator serve ARGS` on `d`'s state and returns it with the first line it
/// prints (where it listens), read once it listens.
fn serve(d: &Path, args: &[&str], stderr: Stdio) -> (std::process::Child, String) {
    let mut child = Command::new(BIN)
        .arg("--state-dir")
        .arg(d.join("state"))
        .args(["coordinator", "serve"])
        .args(args)
        .env_remove("RUNNER_MANAGER_STATE_DIR")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

#[test]
fn host_add_prints_the_token_once_and_serve_admits_only_it() {
    let d = dir("cli");
    let (code, token, _) = rm(&d, &["coordinator", "host", "add", "h1"]);
    assert_eq!(code, 0);
    let token = token.trim().to_string();
    assert_eq!(token.len(), 64);
    let (code, _, err) = rm(&d, &["coordinator", "host", "add", "h1"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = rm(&d, &["coordinator", "host", "add", "bad name!"]);
    assert_eq!(code, 2);
    // Only the hash is stored.
    let db = std::fs::read(d.join("state/state.db")).unwrap();
    assert!(!db.windows(64).any(|w| w == token.as_bytes()));

    let (mut child, line) = serve(&d, &["--listen", "127.0.0.1:0"], Stdio::null());
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    let addr: std::net::SocketAddr = url.trim_start_matches("ws://").parse().unwrap();
    assert!(matches!(
        crate::support::dial(addr, Some("wrong")),
        crate::support::Connect::Refused(401)
    ));
    let crate::support::Connect::Ok(mut h) = crate::support::dial(addr, Some(&token)) else {
        panic!("the printed token is refused")
    };
    h.send(&runner_manager::coordinator::protocol::HostMsg::Hello(
        crate::support::hello("h1", 3, 2),
    ));
    assert!(h.next(5).is_some(), "hello_ack");
    wait_until(10, "the view shows h1 connected", || {
        let (_, out, _) = rm(&d, &["--json", "coordinator", "hosts"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v[0]["name"] == "h1" && v[0]["connected"] == true && v[0]["version"] == 3
    });
    let (code, out, _) = rm(&d, &["coordinator", "status"]);
    assert_eq!(code, 0);
    assert!(out.contains("serving on ws://127.0.0.1:"), "{out}");
    assert!(out.contains("1 connected of 1"), "{out}");
    let (code, out, _) = rm(&d, &["--json", "coordinator", "leases"]);
    assert_eq!((code, out.trim()), (0, "[]"));
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    let (_, out, _) = rm(&d, &["coordinator", "status"]);
    assert!(out.contains("not serving"), "{out}");
    let (code, _, _) = rm(&d, &["coordinator", "host", "rm", "h1"]);
    assert_eq!(code, 0);
    let (code, _, _) = rm(&d, &["coordinator", "host", "rm", "h1"]);
    assert_eq!(code, 2);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn host_add_token_out_writes_the_token_0600_and_never_over_a_file() {
    use std::os::unix::fs::PermissionsExt;
    let d = dir("tokout");
    let file = d.join("h1.token");
    let f = file.to_str().unwrap();
    let (code, out, err) = rm(&d, &["coordinator", "host", "add", "h1", "--token-out", f]);
    assert_eq!(code, 0, "{err}");
    let token = std::fs::read_to_string(&file).unwrap();
    let token = token.trim();
    assert_eq!(token.len(), 64);
    assert!(
        !out.contains(token) && !err.contains(token),
        "the token was printed"
    );
    assert!(out.contains(f), "says where: {out}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    // The file holds the token the store knows.
    let store = runner_manager::store::SqliteStore::open(&d.join("state")).unwrap();
    let hashes = store.coord_token_hashes().unwrap();
    let secret = runner_manager::secret::Secret::new(token);
    assert_eq!(
        runner_manager::coordinator::auth::find_in(&hashes, &secret).as_deref(),
        Some("h1")
    );
    // An existing file is never overwritten, and then no host is added.
    let (code, _, err) = rm(&d, &["coordinator", "host", "add", "h2", "--token-out", f]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--token-out") && err.contains("already exists"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    assert!(store.coord_host("h2").unwrap().is_none());
    // A relative path is bad input too.
    let (code, _, err) = rm(
        &d,
        &["coordinator", "host", "add", "h3", "--token-out", "x"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(store.coord_host("h3").unwrap().is_none());
}

/// A 0600 token file in `d`, as `host set coordinator_token_file=` wants it.
fn token_file(d: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let f = d.join("coord.token");
    std::fs::write(&f, "a".repeat(64)).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    f.to_str().unwrap().to_string()
}

fn host_json(d: &Path) -> serde_json::Value {
    let (code, out, err) = rm(d, &["--json", "host", "show"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// Issue 17, item 4: plain ws:// off loopback carries the host's token in the clear,
/// so both ends refuse it (exit 2, nothing written) unless the owner opts in, and an
/// opted-in coordinator warns when it starts.
#[test]
fn plain_ws_off_loopback_needs_an_explicit_opt_in_on_both_ends() {
    let d = dir("insecure");
    let tf = token_file(&d);
    let tok = format!("coordinator_token_file={tf}");
    let (code, _, _) = rm(&d, &["host", "set", "capacity=2"]);
    assert_eq!(code, 0);
    let before = host_json(&d);
    for url in [
        "ws://8.8.8.8:7700",
        "ws://10.0.0.5:7700",
        "ws://coord.example",
    ] {
        let c = format!("coordinator={url}");
        let (code, _, err) = rm(&d, &["host", "set", &c, &tok]);
        assert_eq!(code, 2, "{url}: {err}");
        assert!(
            err.contains("coordinator") && err.contains("coordinator_insecure=true"),
            "{url}: names the argument and the opt-in: {err}"
        );
        assert_eq!(host_json(&d), before, "{url}: nothing written");
    }
    // Loopback needs no opt-in; wss:// never does.
    for url in [
        "ws://127.0.0.1:7700",
        "ws://[::1]:7700",
        "wss://8.8.8.8:7700",
    ] {
        let (code, _, err) = rm(&d, &["host", "set", &format!("coordinator={url}"), &tok]);
        assert_eq!(code, 0, "{url}: {err}");
    }
    // The opt-in, in the same command.
    let (code, _, err) = rm(
        &d,
        &[
            "host",
            "set",
            "coordinator=ws://8.8.8.8:7700",
            "coordinator_insecure=true",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(host_json(&d)["coordinator_insecure"], true);
    // Taking the opt-in back while the URL needs it is refused too.
    let (code, _, err) = rm(&d, &["host", "set", "coordinator_insecure=false"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(host_json(&d)["coordinator_insecure"], true);

    // The coordinator: a non-loopback --listen without TLS is refused ...
    let (code, _, err) = rm(&d, &["coordinator", "serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--listen") && err.contains("--insecure"),
        "{err}"
    );
    // ... and with --insecure it serves and warns.
    let (child, line) = serve(&d, &["--listen", "0.0.0.0:0", "--insecure"], Stdio::piped());
    assert!(line.contains("listening on ws://0.0.0.0:"), "{line}");
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("coordinator_plain_text") && err.contains("unencrypted"),
        "warns at start: {err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 17, item 4: `coordinator_ca_file` must hold PEM certificates; anything else
/// is refused when it is named (exit 2, the argument named, the store untouched).
#[test]
fn a_coordinator_ca_file_is_refused_unless_it_holds_pem_certificates() {
    let d = dir("cafile");
    let (code, _, _) = rm(&d, &["host", "set", "capacity=2"]);
    assert_eq!(code, 0);
    let db = d.join("state/state.db");
    let junk = d.join("junk.pem");
    std::fs::write(&junk, "-----BEGIN NOTHING-----\nnot a certificate\n").unwrap();
    let empty = d.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    for bad in [
        d.join("missing.pem"),
        junk,
        empty,
        d.clone(),
        PathBuf::from("relative/ca.pem"),
    ] {
        let before = std::fs::read(&db).unwrap();
        let arg = format!("coordinator_ca_file={}", bad.display());
        let (code, _, err) = rm(&d, &["host", "set", &arg]);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(err.contains("coordinator_ca_file"), "{bad:?}: {err}");
        assert_eq!(
            std::fs::read(&db).unwrap(),
            before,
            "{bad:?}: store untouched"
        );
    }
    let ca = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/coord_tls/ca.pem");
    let arg = format!("coordinator_ca_file={}", ca.display());
    let (code, out, err) = rm(&d, &["host", "set", &arg]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("coordinator_ca_file"), "{out}");
    assert_eq!(
        host_json(&d)["coordinator_ca_file"],
        ca.display().to_string()
    );
    let (code, _, _) = rm(&d, &["host", "set", "coordinator_ca_file="]);
    assert_eq!(code, 0);
    assert!(host_json(&d)["coordinator_ca_file"].is_null());
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 50, item 3: `coordinator hosts` and `leases` at fifty hosts: a line that sums
/// up the pool over the table, `--sort FIELD` and `--filter TEXT`, each host's binary
/// version beside its protocol's; a field that is not one exits 2 naming every field,
/// and changes nothing.
#[test]
fn fifty_hosts_are_summed_up_sorted_and_filtered() {
    use runner_manager::domain::job_phase::Phase;
    use runner_manager::store::{CoordHostRow, CoordJobRow, SqliteStore};
    let d = dir("fifty");
    let store = SqliteStore::open(&d.join("state")).unwrap();
    let mut up = Vec::new();
    for i in 0..50u32 {
        let name = format!("node-{i:02}");
        store.coord_add_host(&name, &[i as u8; 32], 1).unwrap();
        if i % 10 == 9 {
            continue; // down
        }
        up.push(CoordHostRow {
            name,
            connected: true,
            version: Some(3),
            binary_version: Some(if i < 3 { "1.1.0" } else { "1.0.0" }.into()),
            capacity: Some(4),
            free: Some(i % 5),
            draining: i == 4,
            started: u64::from(i),
            ..CoordHostRow::default()
        });
    }
    let job = |key: &str, phase: Phase, host: Option<&str>, at: i64| CoordJobRow {
        job_key: key.into(),
        target: "pool".into(),
        repo: "acme/app".into(),
        name: format!("build {key}"),
        queued_at: at,
        phase: phase.into(),
        host: host.map(String::from),
        lease_id: host.map(|h| format!("lease-{h}")),
        ..CoordJobRow::default()
    };
    let jobs = [
        job("3003", Phase::Waiting, None, 30),
        job("3001", Phase::Accepted, Some("node-01"), 10),
        job("3002", Phase::Started, Some("node-07"), 20),
    ];
    store.coord_put_view(&up, &jobs).unwrap();
    drop(store);

    let (code, out, err) = rm(&d, &["coordinator", "hosts"]);
    assert_eq!(code, 0, "{err}");
    let first = out.lines().next().unwrap();
    // 45 up, each 4 runners of capacity less its free (i % 5).
    let runners: u32 = (0..50u32).filter(|i| i % 10 != 9).map(|i| 4 - i % 5).sum();
    assert_eq!(
        first,
        format!(
            "hosts 45 up, 5 down, 1 draining · runners {runners}/180 · leases 1 open · \
             jobs 1 waiting, 1 started"
        )
    );
    assert!(out.contains("VERSION") && out.contains("PROTO"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("node-")).count(), 50);

    let (code, out, _) = rm(&d, &["coordinator", "hosts", "--filter", "1.1.0"]);
    assert_eq!(code, 0);
    let names: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("node-"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["node-00", "node-01", "node-02"], "{out}");
    assert!(out.contains("showing 3 of 50"), "{out}");
    let (_, out, _) = rm(&d, &["coordinator", "hosts", "--filter", "down"]);
    assert_eq!(out.lines().filter(|l| l.starts_with("node-")).count(), 5);

    let (_, out, _) = rm(&d, &["--json", "coordinator", "hosts", "--sort", "started"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["name"], "node-48", "most started first");
    assert_eq!(v[0]["binary_version"], "1.0.0");
    assert_eq!(v[0]["version"], 3);

    let (_, out, _) = rm(&d, &["--json", "coordinator", "leases", "--sort", "queued"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["job_key"], "3001");
    let (_, out, _) = rm(&d, &["coordinator", "leases", "--filter", "node-07"]);
    assert!(out.starts_with("hosts 45 up"), "{out}");
    assert!(out.contains("3002") && !out.contains("3001"), "{out}");

    let before = std::fs::read(d.join("state/state.db")).unwrap();
    for cmd in ["hosts", "leases"] {
        let (code, out, err) = rm(&d, &["coordinator", cmd, "--sort", "speed"]);
        assert_eq!((code, out.as_str()), (2, ""), "{err}");
        assert!(
            err.contains("--sort") && err.contains("unknown field \"speed\": sort by one of"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(d.join("state/state.db")).unwrap(), before);
}
