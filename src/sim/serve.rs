//! `runner-manager sim github`: the simulated GitHub as a process of its own, for the
//! demo, benchmarks and tests that drive the real daemon binary.

use std::net::SocketAddr;

use super::handle::SimGitHub;
use super::state::SimConfig;

const USAGE: &str = "usage: runner-manager sim github [--listen ADDR] [--seed N] [--rate-limit N] \
[--latency DURATION] [--jit-latency DURATION] [--jitter PERCENT] \
[--secondary-limits on|off] [--org LOGIN]... [--repo OWNER/NAME[:public]]... [--pat-file PATH]... \
[--webhook URL --webhook-secret-file PATH]";

/// Runs the sim until SIGTERM or SIGINT. Prints its URL on stdout (one line) once it
/// accepts connections. Returns the exit code.
pub fn serve_main(args: &[String]) -> i32 {
    match serve(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sim github: {e}");
            2
        }
    }
}

fn serve(args: &[String]) -> Result<(), String> {
    let mut cfg = SimConfig::default();
    let (mut orgs, mut repos, mut pats) = (Vec::new(), Vec::new(), Vec::new());
    let (mut hook_url, mut hook_secret) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or(format!("{name} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--listen" => {
                cfg.listen = value("--listen")?
                    .parse::<SocketAddr>()
                    .map_err(|e| format!("--listen: {e}"))?;
            }
            "--seed" => {
                cfg.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--rate-limit" => {
                cfg.rate_limit = value("--rate-limit")?
                    .parse()
                    .map_err(|e| format!("--rate-limit: {e}"))?
            }
            "--latency" => {
                cfg.latency.request = super::latency::parse_duration(&value("--latency")?)
                    .map_err(|e| format!("--latency: {e}"))?
            }
            "--jit-latency" => {
                cfg.latency.jit = super::latency::parse_duration(&value("--jit-latency")?)
                    .map_err(|e| format!("--jit-latency: {e}"))?
            }
            "--jitter" => {
                cfg.latency.jitter = super::latency::parse_jitter(&value("--jitter")?)
                    .map_err(|e| format!("--jitter: {e}"))?
            }
            "--secondary-limits" => {
                cfg.secondary.enabled = match value("--secondary-limits")?.as_str() {
                    "on" => true,
                    "off" => false,
                    other => return Err(format!("--secondary-limits: {other:?}: give on or off")),
                }
            }
            "--org" => orgs.push(value("--org")?),
            "--repo" => repos.push(value("--repo")?),
            // PATs come from files so they never show on a command line.
            "--pat-file" => {
                let path = value("--pat-file")?;
                let t = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {path} ({e})"))?;
                pats.push(t.trim().to_string());
            }
            // Where `workflow_job` deliveries go, signed with the secret in the file
            // (as a repository's webhook settings say on GitHub).
            "--webhook" => hook_url = Some(value("--webhook")?),
            "--webhook-secret-file" => {
                let path = value("--webhook-secret-file")?;
                let t = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {path} ({e})"))?;
                hook_secret = Some(t.trim().to_string());
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unexpected argument {other}\n{USAGE}")),
        }
    }
    let hook = match (hook_url, hook_secret) {
        (None, None) => None,
        (Some(url), Some(secret)) if url.starts_with("http://") && !secret.is_empty() => {
            Some((url, secret))
        }
        (Some(url), Some(_)) if !url.starts_with("http://") => {
            return Err(format!("--webhook {url}: give an http:// URL"));
        }
        (Some(_), Some(_)) => return Err("--webhook-secret-file: the file is empty".into()),
        _ => {
            return Err(format!(
                "--webhook and --webhook-secret-file go together\n{USAGE}"
            ));
        }
    };
    let mut handle = SimGitHub::start(cfg).map_err(|e| format!("cannot listen ({e})"))?;
    if let Some((url, secret)) = &hook {
        handle.set_webhook(Some((url, secret)));
    }
    for o in &orgs {
        handle.add_org(o);
    }
    for r in &repos {
        let (name, public) = r
            .strip_suffix(":public")
            .map_or((r.as_str(), false), |n| (n, true));
        if name.split('/').count() != 2 {
            return Err(format!("--repo {r}: give OWNER/NAME"));
        }
        handle.add_repo(name, !public);
    }
    for p in &pats {
        handle.add_pat(p);
    }
    let signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ]);
    let mut signals = signals.map_err(|e| format!("cannot watch signals ({e})"))?;
    println!("{}", handle.url());
    signals.forever().next();
    handle.shutdown();
    Ok(())
}
