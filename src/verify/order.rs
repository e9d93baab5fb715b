//! Leg orders from a seed that stay the same across crate upgrades: ChaCha8 is
//! fixed by its specification, the seed is laid into the key by us (not by a
//! library's seed expander), and the coin is ours.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Yields, round after round, whether the applied leg runs first.
pub struct LegOrder(ChaCha8Rng);

impl LegOrder {
    pub fn new(seed: u64) -> LegOrder {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        LegOrder(ChaCha8Rng::from_seed(key))
    }

    pub fn applied_first(&mut self) -> bool {
        self.0.next_u32() & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_orders_forever() {
        let mut o = LegOrder::new(20261130);
        let got: String = (0..16)
            .map(|_| if o.applied_first() { 'A' } else { 'B' })
            .collect();
        // Pinned: a change here breaks every recorded seed's reproduction.
        assert_eq!(got, "AAAAAAABBAAAAAAB");
        let mut o = LegOrder::new(1);
        let ones = (0..1000).filter(|_| o.applied_first()).count();
        assert!((450..550).contains(&ones), "{ones}");
    }
}
