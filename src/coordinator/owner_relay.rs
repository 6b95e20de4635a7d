//! Which host learns whose job its runners took (pure): the owners the coordinator's
//! queue read found, by runner name, each routed to the connected host whose id the
//! name carries (`rm-<short id>-<attempt>`) if that host's `hello` names the `owners`
//! feature, packed into bounded `owners` frames. A queue read sees a running job's
//! owner at every poll; each connection is sent a runner's owner once, and again only
//! if it changed (a fuller source), so the frames cost what the runners do, not what
//! the polls do.

use super::placement::{ConnId, HostView};
use super::protocol::{FEATURE_OWNERS, OwnerReport, Owners};
use crate::domain::host::parse_runner_name;
use crate::domain::job_owner::JobOwner;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// The runners remembered as sent, per connection; past it, the oldest is forgotten
/// (and would be sent again if a read still named it).
pub const MAX_SENT: usize = 4_096;

/// The hosts that take `owners` frames: their connection and host id.
pub fn recipients(hosts: &BTreeMap<ConnId, HostView>) -> Vec<(ConnId, &str)> {
    hosts
        .iter()
        .filter(|(_, h)| h.hello.understands(FEATURE_OWNERS))
        .map(|(c, h)| (*c, h.hello.host.id.as_str()))
        .collect()
}

/// Each owner's row under the connections whose host the runner's name belongs to,
/// in the order given. A runner no recipient names is nobody's here (another
/// manager's, or a host that does not take owners).
pub fn route(
    recipients: &[(ConnId, &str)],
    owners: &[(String, JobOwner)],
) -> BTreeMap<ConnId, Vec<OwnerReport>> {
    let mut out: BTreeMap<ConnId, Vec<OwnerReport>> = BTreeMap::new();
    for (runner, owner) in owners {
        let to = recipients
            .iter()
            .filter(|(_, id)| parse_runner_name(id, runner).is_some());
        for (conn, _) in to {
            if let Some(r) = OwnerReport::bounded(runner, owner) {
                out.entry(*conn).or_default().push(r);
            }
        }
    }
    out
}

/// What one connection was sent, bounded.
#[derive(Debug, Default)]
struct Sent {
    by_runner: HashMap<String, OwnerReport>,
    order: VecDeque<String>,
}

impl Sent {
    /// Whether `r` is news to this connection; if so it is remembered as sent.
    fn news(&mut self, r: &OwnerReport) -> bool {
        match self.by_runner.get_mut(&r.runner_name) {
            Some(old) if old == r => false,
            Some(old) => {
                *old = r.clone();
                true
            }
            None => {
                self.by_runner.insert(r.runner_name.clone(), r.clone());
                self.order.push_back(r.runner_name.clone());
                while self.order.len() > MAX_SENT {
                    if let Some(gone) = self.order.pop_front() {
                        self.by_runner.remove(&gone);
                    }
                }
                true
            }
        }
    }
}

/// The coordinator's memory of what each connection was sent.
#[derive(Debug, Default)]
pub struct OwnerRelay {
    sent: BTreeMap<ConnId, Sent>,
}

impl OwnerRelay {
    /// The frames to send for one queue read's `owners`: each recipient's new or
    /// changed rows, packed (`Owners::pack`).
    pub fn frames(
        &mut self,
        recipients: &[(ConnId, &str)],
        owners: &[(String, JobOwner)],
    ) -> Vec<(ConnId, Owners)> {
        let mut out = Vec::new();
        for (conn, rows) in route(recipients, owners) {
            let sent = self.sent.entry(conn).or_default();
            let news: Vec<OwnerReport> = rows.into_iter().filter(|r| sent.news(r)).collect();
            out.extend(Owners::pack(news).into_iter().map(|f| (conn, f)));
        }
        out
    }

    /// The connection closed: a host that comes back is sent what a read still names.
    pub fn forget(&mut self, conn: ConnId) {
        self.sent.remove(&conn);
    }

    /// Runners remembered as sent to `conn`.
    pub fn remembered(&self, conn: ConnId) -> usize {
        self.sent.get(&conn).map_or(0, |s| s.by_runner.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::protocol::{Hello, MAX_OWNERS};
    use crate::domain::job_owner::OwnerSource;

    const A: &str = "0123abcd-aaaa";
    const B: &str = "89efcdab-bbbb";

    fn owner(repo: &str, workflow: Option<&str>) -> JobOwner {
        JobOwner {
            repo: repo.into(),
            workflow: workflow.map(Into::into),
            job_name: "build".into(),
            run_id: 7,
            run_attempt: Some(1),
            job_id: Some(70),
            queued_at: None,
            source: OwnerSource::Rest,
        }
    }

    fn read(names: &[(&str, &str)]) -> Vec<(String, JobOwner)> {
        names
            .iter()
            .map(|(n, repo)| (n.to_string(), owner(repo, Some("CI"))))
            .collect()
    }

    #[test]
    fn each_runner_goes_to_the_host_its_name_carries() {
        let to = [(1, A), (2, B)];
        let got = route(
            &to,
            &read(&[
                ("rm-0123abcd-1", "o/one"),
                ("rm-89efcdab-2", "o/two"),
                ("rm-0123abcd-3", "o/three"),
                ("someone-else", "o/four"),
                ("rm-ffffffff-5", "o/five"),
                ("rm-0123abcd-", "o/six"),
            ]),
        );
        let repos = |c| got[&c].iter().map(|r| r.repo.as_str()).collect::<Vec<_>>();
        assert_eq!(repos(1), ["o/one", "o/three"]);
        assert_eq!(repos(2), ["o/two"]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[&1][0].runner_name, "rm-0123abcd-1");
    }

    #[test]
    fn only_hosts_that_named_the_feature_are_recipients() {
        let view = |id: &str, features: &[&str]| {
            let mut hello = Hello::fixture(id, "h", 3, 2, &[]);
            hello.features = features.iter().map(|f| f.to_string()).collect();
            HostView {
                name: "h".into(),
                hello,
                version: 3,
                covered: BTreeMap::new(),
                free: 2,
                draining: false,
                unfit: Default::default(),
                meters: BTreeMap::new(),
                connected_at: 0,
                started: 0,
                finished: 0,
                refusals: 0,
                last_refusal: None,
            }
        };
        let hosts = BTreeMap::from([
            (1, view(A, &["owners"])),
            (2, view(B, &[])),
            (3, view("deadbeef", &["something-else", "owners"])),
        ]);
        assert_eq!(recipients(&hosts), [(1, A), (3, "deadbeef")]);
    }

    #[test]
    fn a_connection_is_sent_each_owner_once_until_it_changes_or_reconnects() {
        let mut relay = OwnerRelay::default();
        let to = [(1, A), (2, B)];
        let first = read(&[("rm-0123abcd-1", "o/one"), ("rm-89efcdab-2", "o/two")]);
        let frames = relay.frames(&to, &first);
        assert_eq!(frames.len(), 2);
        // The next poll reads the same runs: nothing new.
        assert!(relay.frames(&to, &first).is_empty());
        // A changed word (the workflow now known) is sent again.
        let mut fuller = first.clone();
        fuller[0].1.workflow = Some("Release".into());
        let again = relay.frames(&to, &fuller);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].0, 1);
        assert_eq!(again[0].1.owners[0].workflow.as_deref(), Some("Release"));
        // Reconnected (a new connection for the same host): sent again.
        relay.forget(1);
        let back = relay.frames(&[(3, A), (2, B)], &fuller);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].0, 3);
    }

    #[test]
    fn many_owners_go_in_bounded_frames_and_the_memory_is_bounded() {
        let mut relay = OwnerRelay::default();
        let names: Vec<String> = (1..=MAX_SENT + 10)
            .map(|i| format!("rm-0123abcd-{i}"))
            .collect();
        let owners: Vec<(String, JobOwner)> = names
            .iter()
            .map(|n| (n.clone(), owner("o/app", Some("CI"))))
            .collect();
        let frames = relay.frames(&[(1, A)], &owners);
        assert!(frames.iter().all(|(_, f)| f.owners.len() <= MAX_OWNERS));
        let rows: usize = frames.iter().map(|(_, f)| f.owners.len()).sum();
        assert_eq!(rows, owners.len());
        assert_eq!(relay.remembered(1), MAX_SENT);
    }
}
