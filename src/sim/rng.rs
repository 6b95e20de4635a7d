//! A tiny seeded pseudo-random generator (SplitMix64) for reproducible fault injection.
//!
//! Our own twenty lines instead of the `rand` crate: faults must replay exactly from a
//! seed, and nothing here needs cryptographic quality.

/// SplitMix64: one `u64` of state, good statistical quality for simulation.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float in `[0, 1)` from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p.clamp(0.0, 1.0)
    }

    /// `n` random bytes as lowercase hex (tokens the sim hands out).
    pub fn hex(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n * 2);
        while s.len() < n * 2 {
            s.push_str(&format!("{:016x}", self.next_u64()));
        }
        s.truncate(n * 2);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_fair_enough() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(SplitMix64::new(8).next_u64(), xs[0]);
        let hits = (0..10_000).filter(|_| a.chance(0.3)).count();
        assert!((2_500..3_500).contains(&hits), "{hits}");
        assert_eq!(a.hex(5).len(), 10);
    }
}
