//! Leg orders from a seed that stay the same across crate upgrades: ChaCha8 is
//! fixed by its specification, the seed is laid into the key by us (not by a
//! library's seed expander), and the coin is ours.
//!
//! Rounds come in blocks of two, ABBA or BAAB (a coin per block): each leg
//! runs first once and second once per block, so an effect of position (the
//! first leg of a round after a settle, a cache warmed by the other leg)
//! cancels over a block instead of adding noise.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Yields, round after round, whether the applied leg runs first.
pub struct LegOrder {
    rng: ChaCha8Rng,
    /// The first round of the current block put the applied leg first.
    block: Option<bool>,
}

impl LegOrder {
    pub fn new(seed: u64) -> LegOrder {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        LegOrder {
            rng: ChaCha8Rng::from_seed(key),
            block: None,
        }
    }

    pub fn applied_first(&mut self) -> bool {
        match self.block.take() {
            Some(first) => !first,
            None => {
                let first = self.rng.next_u32() & 1 == 1;
                self.block = Some(first);
                first
            }
        }
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
        // Pinned: a change here breaks every recorded seed's reproduction
        // (the ABBA blocks changed the orders of seeds recorded before them).
        assert_eq!(got, "ABABABABABABABBA");
        // Balanced in every block: each leg first exactly once per two rounds.
        let mut o = LegOrder::new(1);
        let firsts: Vec<bool> = (0..1000).map(|_| o.applied_first()).collect();
        assert!(firsts.chunks(2).all(|b| b[0] != b[1]));
        let blocks_ab = firsts.chunks(2).filter(|b| b[0]).count();
        assert!((200..300).contains(&blocks_ab), "{blocks_ab}");
    }
}
