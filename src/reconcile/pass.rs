//! One target's pass as a pure state machine (ntpd-rs's `source.rs` shape): a
//! [`TargetState`] holds everything the loop decides from between passes (the read
//! schedule and its pace, GitHub's holds, the profiles' start holds, the guard's
//! facts, the attempts on workers, what the last plan left), and one function,
//! [`TargetState::on_event`], turns what happened into [`Effect`]s for the loop to
//! carry out. No clock, no I/O, no randomness: `now` and every fact come in as
//! arguments, so each rule here is tested without threads (see `pass_tests.rs`).
//!
//! The loop (`daemon::target_loop`) gathers, feeds events, carries effects out and
//! joins the workers' results back in as [`Event::Done`].

pub use super::target_error::{Cause, REFUSED_PREFIX, TargetError, refused_text};
use crate::domain::RegisteredRunner;
use crate::reconcile::budget::{self, Budget, Pace, Polling};
use crate::reconcile::hold::{Holds, Refusal, StartHold, TargetHold};
use crate::reconcile::plan::{OBSERVE_EVERY, StartsSeen};
use crate::reconcile::reads::Reads;
use crate::timefmt::Millis;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// How often GitHub's runner list is read to cross-check and to find orphans.
pub const RUNNER_LIST_EVERY: Millis = 60_000;
/// How often the public-repository guard's facts are read again (GitHub's visibility
/// and runner group settings change rarely).
pub const GUARD_EVERY: Millis = 3_600_000;
/// How soon a guard read that failed is tried again (its facts keep their last word).
pub const GUARD_RETRY: Millis = 30_000;
/// At most how often the lost jobs waiting are looked at (each row keeps its own next
/// time: `reconcile::rerun`).
pub const RERUNS_EVERY: Millis = 5_000;

/// A read the loop hands to a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// GitHub's runner list.
    Runners,
    /// The queued jobs: at most `new_runs` runs never read before, `known_runs` again,
    /// and the runs in progress too when `in_progress` (`budget::IN_PROGRESS_EVERY`).
    Demand {
        new_runs: usize,
        known_runs: usize,
        in_progress: bool,
    },
    /// The guard's facts: a repository's visibility, or the scale set profiles'
    /// runner groups.
    Guard(GuardRead),
    /// The host's runner install check, if no other loop holds it.
    RunnerRelease,
    /// The lost jobs whose time has come (`reconcile::rerun`).
    Reruns,
}

/// Which of the guard's facts a read fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardRead {
    Visibility,
    Groups,
}

/// What the loop logs, typed so a test can see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    TargetError(String),
    TargetRecovered,
    PollingPaced {
        every: Millis,
        remaining: u64,
    },
    StartsHeld {
        profile: String,
        hold: StartHold,
    },
    /// The credential changed (its file written, the target's reference edited): the
    /// client is built again, and a refusal's hold lifted.
    CredentialChanged,
    InstallUnusable {
        profile: String,
        why: String,
    },
    InstallUsable {
        profile: String,
    },
}

/// What the loop carries out. None may be dropped: each is a decision the state
/// already counts as made (a read in flight, a hold recorded).
#[must_use = "an effect the loop does not carry out is a decision lost"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Build the target's GitHub client (its credentials, the kept hold and ETags).
    BuildClient,
    /// Drop the client (a reload re-reads the credentials).
    DropClient,
    Send(Read),
    /// The target reads no REST queue of its own: its queue is empty as of now.
    QueueEmpty,
    /// Record the target's hold in the store, so a restarted daemon keeps it (GitHub's
    /// rate limits only: a backoff of ours, a refused credential's, is not kept).
    PersistHold(Millis),
    /// GitHub refused the credential (401): read it again now, and report a change
    /// (the next [`Event::Client`]'s [`ClientFit::CredentialChanged`]) rather than wait
    /// out a backoff with a token already fixed.
    RecheckCredential,
    /// A profile's starts are held until then: the starts of it still queued on
    /// workers (`withdraw`) end `not_started` when a worker takes them up.
    HoldStarts {
        profile: String,
        until: Millis,
        withdraw: Vec<i64>,
    },
    /// A profile's hold ended (a start went through, or its time passed).
    StartsResumed {
        profile: String,
    },
    /// Start the recorded intent on a worker.
    Start(i64),
    /// Delete these registrations on GitHub (a worker's): no attempt explains them.
    DeleteOrphans(Vec<RegisteredRunner>),
    /// End the recorded intent `not-started`: nothing can start it now.
    EndNotStarted {
        attempt: i64,
        why: &'static str,
    },
    Log(Line),
}

/// Whether the loop's client fits the target as it is set now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFit {
    /// Built for the target's API and scope.
    Fits,
    /// None, or built for another API URL or scope.
    Missing,
    /// Built for the target, but its credential changed since: the token or key file
    /// was written (or replaced, or its contents differ after a 401), or the target's
    /// credential reference was edited.
    CredentialChanged,
}

/// What a pass begins from: the facts of the target gathered this pass.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The target's `poll_interval`, in milliseconds.
    pub poll_every: Millis,
    /// The target reads a REST queue of its own (not all directed, and some profile
    /// polls).
    pub reads_queue: bool,
    /// The credential's budget as GitHub last stated it.
    pub budget: Option<Budget>,
    /// How many runners the polling profiles may run at once.
    pub polled_max: u64,
    /// Jobs the queue holds now.
    pub queued: u64,
    /// Runs the last read left unread.
    pub unread_runs: u32,
    /// When the queue was last read.
    pub queue_read_at: Millis,
    /// The guard's read for this target's scope, or `None` when it has nothing to
    /// read (an organization with no scale set profile).
    pub guard: Option<GuardRead>,
    /// When the first lost job of the target waiting for a re-run is due, as the
    /// store last said (`None`: none waits).
    pub reruns_first_due: Option<Millis>,
    /// How many JIT configs GitHub's secondary limit leaves room for now, as the
    /// credential's points book says (`None`: not known, or no limit).
    pub jit_room: Option<u32>,
    /// Webhook deliveries of the target's runs come, and none was seen lost
    /// (`HookBook::steady`): the run lists are the backstop, read at
    /// [`budget::HOOKED_POLL_EVERY`] when `poll_every` is shorter.
    pub hooks_steady: bool,
}

/// How a start a worker carried ended, as the pass cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartEnd {
    Spawned,
    GitHub(TargetError),
    Host(String),
    Skipped,
}

/// What the guard's read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardFound {
    /// A repository target is public (or not).
    Visibility(bool),
    /// Per scale set profile, whether its runner group admits public repositories
    /// (`None`: not known, the group was not found).
    Groups(BTreeMap<String, Option<bool>>),
}

/// A worker's result, as the pass cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Started {
        attempt: i64,
        profile: String,
        end: StartEnd,
    },
    Applied {
        attempt: i64,
    },
    Demand {
        /// Rate-limit units the read spent, how many of them went on the run lists,
        /// and how many were new runs' first reads (part of serving them, not of
        /// polling).
        units: u64,
        list_units: u64,
        first_reads: u64,
        result: Result<(), TargetError>,
    },
    Runners {
        result: Result<(), TargetError>,
    },
    Guard {
        result: Result<GuardFound, TargetError>,
    },
    /// The lost jobs were carried; `Err` for a rate limit only.
    Reruns {
        result: Result<(), TargetError>,
    },
    RunnerRelease,
    RunnersDeleted,
    Failed {
        attempt: Option<i64>,
    },
}

/// What the plan left for later passes.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    pub surplus: HashSet<i64>,
    /// The plan had room beyond the jobs known for a profile that polls.
    pub room_left: bool,
    pub uids_used_up: Option<String>,
    /// How many more runners the polling profiles that may start could start after
    /// this plan's starts (their ceilings and the host's); `None` when none may start
    /// (paused, monitor-only, unfit, draining): the reads then keep the whole view.
    pub free_slots: Option<u32>,
    /// The polling profiles' live runners and this plan's starts: each holds, or will
    /// take, one job of one run.
    pub serving: u32,
    /// Runners that crashed at start this pass, and profiles one of whose runners
    /// listened.
    pub starts_seen: StartsSeen,
    /// The profiles' runner installs as this pass checked them.
    pub installs: Installs,
    /// The first profile a required check of the host stopped this pass, and why
    /// (`None`: none).
    pub host_unfit: Option<String>,
    /// Registrations of this host's runners no attempt explains (`Plan::orphans`).
    pub orphans: Vec<RegisteredRunner>,
}

/// Each profile's broken runner install (by name), among the target's profiles.
#[derive(Debug, Clone, Default)]
pub struct Installs {
    pub errors: BTreeMap<String, String>,
    pub profiles: Vec<String>,
}

/// What happened.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// A pass begins: first the client (is one there, fitting the target?).
    Client {
        fit: ClientFit,
        poll_every: Millis,
    },
    /// The client was built; a hold recorded before a restart comes with it, and when
    /// the runner list and the in-progress run lists were last read (by this daemon or
    /// the last).
    ClientBuilt {
        kept_hold: Option<Millis>,
        runners_read_at: Option<Millis>,
        in_progress_read_at: Option<Millis>,
    },
    /// The client could not be built.
    ClientFailed {
        error: String,
        poll_every: Millis,
    },
    /// The pass's facts: what to read now.
    Tick(&'a Facts),
    /// The pass planned (and checked the runner installs and the host).
    Planned(Planned),
    /// The pass acted: the attempts whose GitHub or disk actions it handed to a
    /// worker, and the intents it recorded (each with its profile, and whether that
    /// profile is still there), to start or end.
    Acted {
        handed: &'a [i64],
        intents: &'a [(i64, &'a str, bool)],
    },
    /// The pass ends: the credential's own hold as the client knows it.
    PassEnd {
        credential_hold: Millis,
    },
    /// The store holds the target's hold up to this time.
    HoldKept(Millis),
    Done(Outcome),
    /// SIGHUP: credentials, listeners, holds and the guard's facts are read again.
    Reload,
}

/// One target's state between passes, in parts: the reads' schedule, the budget's
/// polling, the holds, what the last plan left.
#[derive(Debug, Default)]
pub struct TargetState {
    has_client: bool,
    reads: Reads,
    budget: Polling,
    holds: Holds,
    /// What the last plan left (its `starts_seen` already taken in).
    last_plan: Planned,
    /// A repository target's visibility; `None` until read.
    public_repo: Option<bool>,
    /// Per scale set profile: its runner group admits public repositories.
    group_public: BTreeMap<String, bool>,
    in_flight: BTreeSet<i64>,
    error: Option<TargetError>,
    /// Each profile's broken install as last logged.
    install_logged: BTreeMap<String, String>,
    /// The last pass's first profile a required check of the host stopped, and why.
    host_unfit: Option<String>,
}

impl TargetState {
    /// Everything that happens to the target goes through here; what comes back is
    /// carried out, all of it.
    #[must_use = "the effects are the pass's decisions: carry them out"]
    pub fn on_event(&mut self, event: Event, now: Millis) -> Vec<Effect> {
        let mut out = Vec::new();
        match event {
            Event::Client { fit, .. } => self.client(fit, now, &mut out),
            Event::ClientBuilt {
                kept_hold,
                runners_read_at,
                in_progress_read_at,
            } => {
                self.has_client = true;
                // The list keeps its minute across a restart: a daemon restarted
                // a few times a minute would read it at each start, a unit each
                // (issue 37). What a SIGKILL left (a registration of ours with no
                // attempt) is found within the minute, as any other.
                if let Some(at) = runners_read_at {
                    let next = (at + RUNNER_LIST_EVERY).min(now + RUNNER_LIST_EVERY);
                    self.reads.runners.not_before(next);
                }
                // So do the in-progress lists their 10 s: the queued list, read at
                // once, already drops a run whose job was taken while no daemon ran,
                // and what they name (whose job a runner ran) waits that long at most.
                if let Some(at) = in_progress_read_at {
                    let every = budget::IN_PROGRESS_EVERY;
                    let next = (at + every).min(now + every);
                    self.reads.run_lists.in_progress_next =
                        self.reads.run_lists.in_progress_next.max(next);
                }
                if let Some(t) = kept_hold.filter(|t| *t > now) {
                    self.holds.target = self.holds.target.at_least(t);
                    self.reads.queue.not_before(t);
                    self.holds.persisted = t;
                }
            }
            Event::ClientFailed { error, poll_every } => {
                self.has_client = false;
                self.set_error(TargetError::Credentials(error), &mut out);
                self.reads.queue.put_off(now + poll_every);
            }
            Event::Tick(facts) => self.tick(facts, now, &mut out),
            Event::Planned(mut p) => {
                let installs = std::mem::take(&mut p.installs);
                self.installs(&installs.errors, &installs.profiles, &mut out);
                self.host_unfit = p.host_unfit.take();
                let orphans = std::mem::take(&mut p.orphans);
                if !orphans.is_empty() && self.has_client {
                    out.push(Effect::DeleteOrphans(orphans));
                }
                let seen = std::mem::take(&mut p.starts_seen);
                self.last_plan = p;
                self.starts_seen(seen, now, &mut out);
            }
            Event::Acted { handed, intents } => {
                self.in_flight.extend(handed);
                for &(attempt, profile, has_policy) in intents {
                    self.intent(attempt, profile, has_policy, &mut out);
                }
            }
            Event::PassEnd { credential_hold } => {
                let until = credential_hold.max(self.holds.target.rate_until);
                if until > now && until != self.holds.persisted {
                    out.push(Effect::PersistHold(until));
                }
                self.expire_holds(now, &mut out);
            }
            Event::HoldKept(until) => self.holds.persisted = until,
            Event::Done(o) => self.done(o, now, &mut out),
            Event::Reload => {
                self.has_client = false;
                // The settings read again, GitHub's too: the queue and the guard's
                // facts (a repository made public is seen now, not within the hour).
                self.reads.queue.due_now();
                self.reads.guard.due_now();
                self.reads.run_lists.backstop_next = 0;
                self.holds.target = TargetHold::default();
                out.push(Effect::DropClient);
            }
        }
        out
    }

    /// A recorded intent: started, or ended (no policy or no client).
    fn intent(&mut self, attempt: i64, profile: &str, has_policy: bool, out: &mut Vec<Effect>) {
        if has_policy && self.has_client {
            self.in_flight.insert(attempt);
            self.holds.starts_out.insert(attempt, profile.to_string());
            out.push(Effect::Start(attempt));
        } else {
            let why = if has_policy {
                "no GitHub client"
            } else {
                "its profile is gone"
            };
            out.push(Effect::EndNotStarted { attempt, why });
        }
    }

    /// Builds the client unless one fits, or the last try failed and the next poll
    /// (when it is tried again) has not come.
    fn client(&mut self, fit: ClientFit, now: Millis, out: &mut Vec<Effect>) {
        if fit == ClientFit::Fits && self.has_client {
            return;
        }
        if fit == ClientFit::CredentialChanged {
            // A fixed token serves at once: no backoff of the old one's refusals, the
            // queue and the guard's facts read at the next tick.
            self.holds.target = self.holds.target.credential_changed();
            self.reads.queue.due_now();
            self.reads.run_lists.backstop_next = 0;
            self.reads.guard.due_now();
            self.has_client = false;
            out.push(Effect::Log(Line::CredentialChanged));
            out.push(Effect::BuildClient);
            return;
        }
        self.has_client = false;
        if !self.reads.queue.time_come(now) && self.error.is_some() {
            return;
        }
        out.push(Effect::BuildClient);
    }

    /// Sends the reads that are due, one at a time: when GitHub answers one with a
    /// rate limit, no other is already on its way. The guard's facts first (starts
    /// wait for a visibility not yet known), then the queue, then the runner list;
    /// and the runner install check, if due, beside them.
    fn tick(&mut self, f: &Facts, now: Millis, out: &mut Vec<Effect>) {
        if !self.has_client || self.holds.target.holds(now) {
            return;
        }
        out.push(Effect::Send(Read::RunnerRelease));
        // Beside the reads: a lost job waits on GitHub's verdict, not on the queue.
        let reruns_due = f.reruns_first_due.is_some_and(|at| at <= now);
        if reruns_due && self.reads.reruns.due(now) {
            self.reads.reruns.send(now + RERUNS_EVERY);
            out.push(Effect::Send(Read::Reruns));
        }
        if self.reads.one_out() {
            return;
        }
        if self.reads.guard.time_come(now) {
            let next = now + GUARD_EVERY;
            match f.guard {
                Some(g) => {
                    self.reads.guard.send(next);
                    out.push(Effect::Send(Read::Guard(g)));
                    return;
                }
                None => {
                    self.reads.guard.put_off(next);
                    self.group_public.clear()
                }
            }
        }
        if self.demand_due(f, now) {
            self.read_demand(f, now, out);
            if self.reads.queue.in_flight() {
                return;
            }
        }
        if self.reads.runners.time_come(now) {
            self.reads.runners.send(now + RUNNER_LIST_EVERY);
            out.push(Effect::Send(Read::Runners));
        }
    }

    /// The queue is due at its pace, and while the webhooks come steadily no sooner
    /// than the backstop's (judged at each pass: a daemon that just started reads at
    /// once, and waits once a delivery shows they come); runs a deep queue's last read
    /// left unread are read as soon as there is room for their jobs, at most once per
    /// poll interval, unless the pace is stretched: what that costs is their first
    /// read, which serving them needs anyway, and the run lists again.
    fn demand_due(&self, f: &Facts, now: Millis) -> bool {
        let paced = self.budget.pace.is_some_and(|p| p.stretched);
        let more_room = f.unread_runs > 0
            && self.last_plan.room_left
            && !paced
            && now >= f.queue_read_at + f.poll_every;
        let backstop = !f.hooks_steady || now >= self.reads.run_lists.backstop_next;
        (self.reads.queue.time_come(now) && backstop) || more_room
    }

    /// A coordinated target whose profiles are all directed reads no demand of its
    /// own, and one whose profiles all use scale sets reads no REST queue (a long poll
    /// costs no units): neither is paced. Otherwise the read is paced so the budget
    /// lasts to its reset, keeping back what serving the queue needs.
    fn read_demand(&mut self, f: &Facts, now: Millis, out: &mut Vec<Effect>) {
        if !f.reads_queue {
            self.budget.pace = None;
            self.reads.queue.put_off(now + f.poll_every);
            out.push(Effect::QueueEmpty);
            return;
        }
        let reserve = f
            .budget
            .map_or(0, |b| budget::reserve(f.polled_max, f.queued, b.limit));
        let credit = self.budget.credit.refill(f.budget, reserve, now);
        let pace = budget::pace(
            f.poll_every,
            f.budget,
            reserve,
            self.budget.read_cost,
            credit,
            now,
        );
        if pace.stretched && !self.budget.pace.is_some_and(|p| p.stretched) {
            let remaining = f.budget.map_or(0, |b| b.remaining);
            out.push(Effect::Log(Line::PollingPaced {
                every: pace.every,
                remaining,
            }));
        }
        self.budget.pace = Some(pace);
        self.reads.queue.send(now + pace.every);
        self.reads.run_lists.backstop_next = now + budget::HOOKED_POLL_EVERY;
        let in_progress = now >= self.reads.run_lists.in_progress_next;
        if in_progress {
            self.reads.run_lists.in_progress_next = now + budget::IN_PROGRESS_EVERY;
        }
        self.reads.run_lists.in_progress_sent = in_progress;
        out.push(Effect::Send(Read::Demand {
            new_runs: budget::new_runs_per_read(f.polled_max),
            known_runs: self.known_runs(f),
            in_progress,
        }));
    }

    /// How many runners could start now: the last plan's free slots, within the JIT
    /// configs GitHub's secondary limit has room for (`None`: no plan yet, or no
    /// polling profile may start).
    pub fn start_room(&self, f: &Facts) -> Option<u32> {
        let free = self.last_plan.free_slots?;
        Some(f.jit_room.map_or(free, |jit| free.min(jit)))
    }

    /// How many runs read before a read reads again. While no start can go (no free
    /// slot, or the minute's JIT points spent) only the runs being served, oldest
    /// first, and a few more (`budget::rereads_without_room`): they are where jobs
    /// are taken (the re-read finds a job gone and names the runner that took it),
    /// while a deep queue's waiting runs would answer 304s that change no decision.
    /// Every 304 still costs a round trip and a request slot: a 300-run burst's reads
    /// took 2 to 4.5 s while its starts waited a minute for points (issue 37). With
    /// room, every known run as before: the read is whole again, and attempts that
    /// ended since stop counting against the queue (`daemon::rest_queue`).
    fn known_runs(&self, f: &Facts) -> usize {
        let all = budget::known_runs_per_read(f.polled_max);
        match self.start_room(f) {
            Some(0) => all.min(budget::rereads_without_room(self.last_plan.serving)),
            _ => all,
        }
    }

    fn done(&mut self, o: Outcome, now: Millis, out: &mut Vec<Effect>) {
        match o {
            Outcome::Started {
                attempt,
                profile,
                end,
            } => {
                self.in_flight.remove(&attempt);
                self.holds.starts_out.remove(&attempt);
                match end {
                    StartEnd::Spawned => {
                        self.budget.spawned_since_read += 1;
                        self.holds.target = self.holds.target.credential_accepted();
                        // A spawn ends a host failure's streak; runners that crashed
                        // at start had spawned too, so theirs ends only on a listen.
                        if self.holds.starts.get(&profile).is_some_and(|h| !h.crashes) {
                            self.holds.starts.remove(&profile);
                            out.push(Effect::StartsResumed { profile });
                        }
                    }
                    StartEnd::GitHub(e) => self.refused(e, now, out),
                    StartEnd::Host(why) => self.hold_profile(profile, why, now, out),
                    StartEnd::Skipped => {}
                }
            }
            Outcome::Applied { attempt } => {
                self.in_flight.remove(&attempt);
            }
            Outcome::Failed { attempt } => {
                if let Some(id) = attempt {
                    self.in_flight.remove(&id);
                    self.holds.starts_out.remove(&id);
                }
            }
            Outcome::Demand {
                units,
                list_units,
                first_reads,
                result,
            } => {
                self.reads.queue.answered();
                self.budget.read_back(units, list_units, first_reads);
                match result {
                    Ok(()) => {
                        self.holds.target = self.holds.target.recovered();
                        if self.error.take().is_some() {
                            out.push(Effect::Log(Line::TargetRecovered));
                        }
                    }
                    Err(e) => {
                        if self.reads.run_lists.in_progress_sent {
                            self.reads.run_lists.in_progress_next = 0;
                        }
                        self.refused(e, now, out)
                    }
                }
            }
            Outcome::Runners { result } => {
                self.reads.runners.answered();
                match result {
                    Ok(()) => self.holds.target = self.holds.target.credential_accepted(),
                    Err(e) => self.refused(e, now, out),
                }
            }
            Outcome::Guard { result } => {
                self.reads.guard.answered();
                if result.is_ok() {
                    self.holds.target = self.holds.target.credential_accepted();
                }
                match result {
                    Ok(GuardFound::Visibility(public)) => self.public_repo = Some(public),
                    Ok(GuardFound::Groups(groups)) => {
                        self.group_public = groups
                            .into_iter()
                            .filter_map(|(p, public)| Some((p, public?)))
                            .collect();
                    }
                    Err(e) => {
                        // What was known stays known; tried again soon, not at
                        // every pass (a transient error holds nothing).
                        self.reads.guard.put_off(now + GUARD_RETRY);
                        self.refused(e, now, out);
                    }
                }
            }
            Outcome::Reruns { result } => {
                self.reads.reruns.answered();
                if let Err(e) = result {
                    self.refused(e, now, out);
                }
            }
            Outcome::RunnerRelease | Outcome::RunnersDeleted => {}
        }
    }

    /// GitHub refused a call: the target is held as the refusal says (a rate limit
    /// until its time, recorded at once so a kill now does not forget it; a
    /// deterministic error with backoff; a transient one not at all).
    fn refused(&mut self, mut e: TargetError, now: Millis, out: &mut Vec<Effect>) {
        if let TargetError::GitHub { refusal, text, .. } = &mut e {
            self.holds.target = self.holds.target.after(*refusal, now);
            match *refusal {
                Refusal::RateLimitedUntil(until) => {
                    self.reads.queue.not_before(until);
                    if until != self.holds.persisted {
                        out.push(Effect::PersistHold(until));
                    }
                }
                Refusal::CredentialsRefused => {
                    let since = self.holds.target.refused_since.unwrap_or(now);
                    *text = refused_text(since, text);
                    out.push(Effect::RecheckCredential);
                }
                Refusal::Deterministic | Refusal::Transient => {}
            }
        }
        self.set_error(e, out);
    }

    fn set_error(&mut self, e: TargetError, out: &mut Vec<Effect>) {
        if self.error.as_ref() != Some(&e) {
            out.push(Effect::Log(Line::TargetError(e.to_string())));
        }
        self.error = Some(e);
    }

    /// Logs a profile's runner install breaking and being whole again, once each,
    /// however many passes see it.
    fn installs(
        &mut self,
        errors: &BTreeMap<String, String>,
        profiles: &[String],
        out: &mut Vec<Effect>,
    ) {
        for (profile, why) in errors {
            if self.install_logged.get(profile) != Some(why) {
                out.push(Effect::Log(Line::InstallUnusable {
                    profile: profile.clone(),
                    why: why.clone(),
                }));
            }
        }
        for profile in self.install_logged.keys() {
            if !errors.contains_key(profile) && profiles.contains(profile) {
                out.push(Effect::Log(Line::InstallUsable {
                    profile: profile.clone(),
                }));
            }
        }
        self.install_logged = errors.clone();
    }

    /// When the loop wakes for the next pass, unless a message or a worker's result
    /// comes first: the first read or hold due after `now`, and at most
    /// [`OBSERVE_EVERY`] on (its runners are watched that often).
    pub fn wake_at(&self, now: Millis) -> Millis {
        [self.reads.due_after(now), self.holds.ends_after(now)]
            .into_iter()
            .flatten()
            .fold(now + OBSERVE_EVERY, Millis::min)
    }

    /// Starts may be tried now: a client, and no hold on the target.
    pub fn can_start(&self, now: Millis) -> bool {
        self.has_client && !self.holds.target.holds(now)
    }

    /// Until when GitHub's rate limit (or a `retry-after`) holds the target, if it
    /// does now: the credential's own hold, or the target's when no deterministic
    /// error made it.
    pub fn rate_limited_until(&self, credential_hold: Millis, now: Millis) -> Option<Millis> {
        let until = credential_hold.max(self.holds.target.rate_until);
        (until > now).then_some(until)
    }

    /// Since when GitHub refuses the credential (401), while it does: until a call
    /// goes through or the credential changes.
    pub fn credentials_refused_since(&self) -> Option<Millis> {
        self.holds.target.refused_since
    }

    /// What `status` shows as a profile's last error, the first that applies: the
    /// target's own, the uids used up, what visibility left out, the profile's scale
    /// set listener's, why the profile is unfit.
    pub fn status_error(
        &self,
        visibility: Option<&str>,
        scaleset: Option<String>,
        unfit: Option<String>,
    ) -> Option<String> {
        self.error
            .as_ref()
            .map(ToString::to_string)
            .or_else(|| self.last_plan.uids_used_up.clone())
            .or_else(|| visibility.map(str::to_string))
            .or(scaleset)
            .or(unfit)
    }

    /// The target's error, if its last call ended with one.
    pub fn error(&self) -> Option<&TargetError> {
        self.error.as_ref()
    }

    /// Takes the target's error (`daemon --once` fails with it): GitHub's, else a
    /// required check of the host that stopped a profile in the last pass.
    pub fn take_error(&mut self) -> Option<TargetError> {
        self.error
            .take()
            .or_else(|| self.host_unfit.take().map(TargetError::HostUnfit))
    }

    pub fn has_client(&self) -> bool {
        self.has_client
    }

    pub fn in_flight(&self) -> &BTreeSet<i64> {
        &self.in_flight
    }

    pub fn surplus(&self) -> &HashSet<i64> {
        &self.last_plan.surplus
    }

    pub fn holds(&self) -> &BTreeMap<String, StartHold> {
        &self.holds.starts
    }

    pub fn pace(&self) -> Option<Pace> {
        self.budget.pace
    }

    pub fn public_repo(&self) -> Option<bool> {
        self.public_repo
    }

    pub fn group_public(&self) -> &BTreeMap<String, bool> {
        &self.group_public
    }
}

#[path = "pass_holds.rs"]
mod holds;

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
