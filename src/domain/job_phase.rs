//! Where a queued job stands in a coordinator's placement, as the store keeps it and
//! `coordinator jobs`, `coordinator status` and `top`'s Pool pane show it: its
//! [`Phase`]. The coordinator's own book (`coordinator::placement::JobState`) carries
//! each phase's data; this is its word, written as text only at the store's edge.

use std::fmt;
use std::str::FromStr;

/// A pool job's phase: `Waiting` (no lease) → `Offered` (a launch sent to a host) →
/// `Accepted` (the host took it) → `Started` (its runner started) → `Held` (that runner
/// finished while the job still looked queued).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    #[default]
    Waiting,
    Offered,
    Accepted,
    Started,
    Held,
}

/// Every phase, in the order a job goes through them.
pub const PHASES: [Phase; 5] = [
    Phase::Waiting,
    Phase::Offered,
    Phase::Accepted,
    Phase::Started,
    Phase::Held,
];

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting",
            Phase::Offered => "offered",
            Phase::Accepted => "accepted",
            Phase::Started => "started",
            Phase::Held => "held",
        }
    }

    /// A lease is open: offered or accepted.
    pub fn is_leased(self) -> bool {
        matches!(self, Phase::Offered | Phase::Accepted)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The word no phase is written as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPhase(pub String);

impl FromStr for Phase {
    type Err = UnknownPhase;

    fn from_str(s: &str) -> Result<Phase, UnknownPhase> {
        PHASES
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPhase(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_writes_its_word_and_reads_back() {
        for p in PHASES {
            assert_eq!(p.to_string().parse(), Ok(p));
        }
        assert_eq!(
            "parked".parse::<Phase>(),
            Err(UnknownPhase("parked".into()))
        );
        let leased: Vec<Phase> = PHASES.into_iter().filter(|p| p.is_leased()).collect();
        assert_eq!(leased, [Phase::Offered, Phase::Accepted]);
    }
}
