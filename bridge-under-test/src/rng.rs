//! A small deterministic random source (SplitMix64). Components take one from their caller,
//! seeded from the scenario: nothing here ever reads OS entropy.

/// SplitMix64: tiny, fast, and good enough for ids, keys, jitter and fault draws.
#[derive(Debug, Clone)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// A value in `0..n` (`n` > 0). The modulo bias is irrelevant at these sizes.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// `len` lowercase hex digits, for ids and keys.
    pub fn hex(&mut self, len: usize) -> String {
        let mut out = String::with_capacity(len);
        while out.len() < len {
            out.push_str(&format!("{:016x}", self.next_u64()));
        }
        out.truncate(len);
        out
    }
}

/// The SplitMix64 finaliser: a bijective scramble of 64 bits.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_different_seeds_differ() {
        let (mut a, mut b, mut c) = (SimRng::new(7), SimRng::new(7), SimRng::new(8));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        assert_eq!(SimRng::new(1).hex(20).len(), 20);
        assert!(SimRng::new(1).below(3) < 3);
    }
}
