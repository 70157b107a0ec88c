//! The random order of a room that admits by lottery (docs/DESIGN.md "Random queueing"), as the
//! embedded engine keeps it: a sorted set of keys with O(log N + N / B) rank, insertion and
//! removal (B = [`BLOCK`]).
//!
//! A key is `hex(HMAC-SHA256(seed, tag)) .. tag .. id` — the Redis store's `lottery` member, so
//! both stores order tickets alike: by MAC, ties by tag, then by id. Keys are uniformly random,
//! so a sorted list cut into blocks of about [`BLOCK`] keys stays balanced without rotations:
//! a rank is the sizes of the blocks before the key's own plus a binary search in it.

/// Keys per block before a block is split in two.
const BLOCK: usize = 1024;

/// A sorted set of distinct keys with ranks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LotteryIndex {
    /// Non-empty sorted blocks, every key of a block below every key of the next.
    blocks: Vec<Vec<String>>,
    len: usize,
}

impl LotteryIndex {
    /// Keys in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block `key` belongs in: the last whose first key is ≤ `key` (0 when none is).
    fn block_of(&self, key: &str) -> usize {
        self.blocks
            .partition_point(|block| block[0].as_str() <= key)
            .saturating_sub(1)
    }

    /// Adds `key`; false (nothing changes) if it is there already.
    pub fn insert(&mut self, key: String) -> bool {
        if self.blocks.is_empty() {
            self.blocks.push(vec![key]);
            self.len = 1;
            return true;
        }
        let b = self.block_of(&key);
        let block = &mut self.blocks[b];
        let Err(at) = block.binary_search(&key) else {
            return false;
        };
        block.insert(at, key);
        if block.len() > 2 * BLOCK {
            let upper = block.split_off(BLOCK);
            self.blocks.insert(b + 1, upper);
        }
        self.len += 1;
        true
    }

    /// Removes `key`; false if it was not there.
    pub fn remove(&mut self, key: &str) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let b = self.block_of(key);
        let block = &mut self.blocks[b];
        let Ok(at) = block.binary_search_by(|probe| probe.as_str().cmp(key)) else {
            return false;
        };
        block.remove(at);
        if block.is_empty() {
            self.blocks.remove(b);
        }
        self.len -= 1;
        true
    }

    /// The 0-based rank of `key` (how many keys are smaller), if it is in the set.
    pub fn rank(&self, key: &str) -> Option<usize> {
        if self.blocks.is_empty() {
            return None;
        }
        let b = self.block_of(key);
        let at = self.blocks[b]
            .binary_search_by(|probe| probe.as_str().cmp(key))
            .ok()?;
        Some(self.blocks[..b].iter().map(Vec::len).sum::<usize>() + at)
    }

    /// The smallest key.
    pub fn first(&self) -> Option<&str> {
        self.blocks.first().map(|block| block[0].as_str())
    }

    /// Takes the smallest key out.
    pub fn pop_first(&mut self) -> Option<String> {
        let block = self.blocks.first_mut()?;
        let key = block.remove(0);
        if block.is_empty() {
            self.blocks.remove(0);
        }
        self.len -= 1;
        Some(key)
    }

    /// Every key in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.blocks.iter().flatten().map(String::as_str)
    }
}

/// The ticket id at the end of a lottery key (after the 64 hex digits of the MAC and the
/// 12 of the tag).
pub fn id_of_key(key: &str) -> &str {
    key.get(LOTTERY_PREFIX_LEN..).unwrap_or_default()
}

/// Characters of a lottery key before the ticket id: 64 hex digits of MAC, 12 of tag.
pub const LOTTERY_PREFIX_LEN: usize = 76;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_the_sorted_order_through_inserts_and_removals() {
        let mut index = LotteryIndex::default();
        let mut model: Vec<String> = Vec::new();
        // A cheap deterministic scramble of 5,000 keys (enough to split blocks).
        let keys: Vec<String> = (0..5_000u64)
            .map(|i| format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect();
        for key in &keys {
            assert!(index.insert(key.clone()));
            model.push(key.clone());
        }
        assert!(!index.insert(keys[7].clone()), "no duplicates");
        for key in keys.iter().step_by(3) {
            assert!(index.remove(key));
            model.retain(|k| k != key);
        }
        assert!(!index.remove(&keys[0]));
        model.sort();
        assert_eq!(index.len(), model.len());
        assert_eq!(index.iter().collect::<Vec<_>>(), model);
        for (rank, key) in model.iter().enumerate().step_by(97) {
            assert_eq!(index.rank(key), Some(rank));
        }
        assert_eq!(index.rank(&keys[0]), None);
        assert_eq!(index.first(), Some(model[0].as_str()));
        assert_eq!(index.pop_first().as_deref(), Some(model[0].as_str()));
        assert_eq!(index.rank(&model[1]), Some(0));
    }

    #[test]
    fn the_id_is_what_follows_the_mac_and_the_tag() {
        let key = format!("{}{}{}", "a".repeat(64), "b".repeat(12), "ticket-id");
        assert_eq!(id_of_key(&key), "ticket-id");
    }
}
