//! An arrival-ordered queue with O(log N) rank, O(log N) removal and amortized O(1) pop.
//!
//! Entries are keyed by their arrival sequence (strictly increasing, as `INCR` gives). A Fenwick
//! tree over "slot is occupied" answers "how many occupied slots up to this one" — the 1-based
//! position — in O(log N). Slots of popped or removed entries are reclaimed by compaction once the
//! dead prefix is at least half of the array, so memory stays proportional to the live queue.
//!
//! An entry removed earlier can be put back at its own sequence ([`OrderIndex::restore`]: a
//! skipped ticket that kept its place). If its slot was compacted away, every live entry is
//! behind it, so it waits in a small ordered `front` ahead of the slots.

use std::collections::BTreeMap;

/// FIFO queue of `T` by arrival sequence with order statistics.
#[derive(Debug, Clone)]
pub struct OrderIndex<T> {
    /// Sequence of `slots[0]`.
    base: u64,
    /// One slot per sequence from `base`; `None` once popped or removed.
    slots: Vec<Option<T>>,
    /// Fenwick tree over occupancy, 1-based (`tree[0]` unused).
    tree: Vec<u32>,
    /// Index of the first slot that may be occupied.
    head: usize,
    /// Occupied slots.
    len: usize,
    /// Restored entries whose sequence is below `base`: ahead of every slot.
    front: BTreeMap<u64, T>,
}

impl<T> Default for OrderIndex<T> {
    fn default() -> Self {
        Self {
            base: 1,
            slots: Vec::new(),
            tree: vec![0],
            head: 0,
            len: 0,
            front: BTreeMap::new(),
        }
    }
}

fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

impl<T> OrderIndex<T> {
    /// Entries in the queue.
    pub fn len(&self) -> usize {
        self.len + self.front.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Puts back an entry removed earlier, at its own sequence `seq` (not above any sequence
    /// pushed so far); false (and nothing changes) if an entry with `seq` is queued.
    pub fn restore(&mut self, seq: u64, value: T) -> bool {
        if seq < self.base {
            if self.front.contains_key(&seq) {
                return false;
            }
            self.front.insert(seq, value);
            return true;
        }
        let Some(index) = self.index_of(seq) else {
            return false;
        };
        if self.slots[index].is_some() {
            return false;
        }
        self.slots[index] = Some(value);
        let mut i = index + 1;
        while i < self.tree.len() {
            self.tree[i] += 1;
            i += lowbit(i);
        }
        self.len += 1;
        self.head = self.head.min(index);
        true
    }

    /// Appends `value` with arrival sequence `seq`.
    ///
    /// # Panics
    /// If `seq` is not larger than every sequence pushed before (the caller's counter is
    /// monotonic; a violation is a bug, not input).
    pub fn push(&mut self, seq: u64, value: T) {
        if self.slots.is_empty() && self.len == 0 && self.front.is_empty() {
            self.base = seq;
            self.head = 0;
        }
        let next = self.base + self.slots.len() as u64;
        assert!(seq >= next, "arrival sequence must increase");
        // Skipped sequences (joins into another room's counter, never here) stay empty slots.
        while self.base + (self.slots.len() as u64) < seq {
            self.push_slot(None);
        }
        self.push_slot(Some(value));
        self.len += 1;
    }

    fn push_slot(&mut self, value: Option<T>) {
        let occupied = u32::from(value.is_some());
        self.slots.push(value);
        let i = self.slots.len(); // 1-based index of the new slot
                                  // tree[i] covers (i - lowbit(i), i]: the new slot plus the earlier slots in that range.
        let covered = self.prefix(i - 1) - self.prefix(i - lowbit(i));
        self.tree.push(covered + occupied);
    }

    /// Occupied slots among the first `i` (1-based prefix).
    fn prefix(&self, mut i: usize) -> u32 {
        let mut sum = 0;
        while i > 0 {
            sum += self.tree[i];
            i -= lowbit(i);
        }
        sum
    }

    fn clear_slot(&mut self, index: usize) {
        let mut i = index + 1;
        while i < self.tree.len() {
            self.tree[i] -= 1;
            i += lowbit(i);
        }
    }

    fn index_of(&self, seq: u64) -> Option<usize> {
        let offset = seq.checked_sub(self.base)? as usize;
        (offset < self.slots.len()).then_some(offset)
    }

    /// 1-based position of the entry with sequence `seq`, if it is queued.
    pub fn position(&self, seq: u64) -> Option<u64> {
        if seq < self.base {
            self.front.get(&seq)?;
            return Some(self.front.range(..=seq).count() as u64);
        }
        let index = self.index_of(seq)?;
        self.slots[index].as_ref()?;
        Some(self.front.len() as u64 + u64::from(self.prefix(index + 1)))
    }

    /// Replaces the value of the queued entry with sequence `seq` (its place is unchanged),
    /// returning the old one; `None` (nothing changes) if no entry has `seq`. The draw of a
    /// scheduled opening hands the pre-queue's seqs out again this way.
    pub fn replace(&mut self, seq: u64, value: T) -> Option<T> {
        if seq < self.base {
            let slot = self.front.get_mut(&seq)?;
            return Some(std::mem::replace(slot, value));
        }
        let index = self.index_of(seq)?;
        let slot = self.slots[index].as_mut()?;
        Some(std::mem::replace(slot, value))
    }

    /// Removes the entry with sequence `seq`, returning it.
    pub fn remove(&mut self, seq: u64) -> Option<T> {
        if seq < self.base {
            return self.front.remove(&seq);
        }
        let index = self.index_of(seq)?;
        let value = self.slots[index].take()?;
        self.clear_slot(index);
        self.len -= 1;
        self.advance_head();
        Some(value)
    }

    /// Removes and returns the earliest entry with its sequence.
    pub fn pop_front(&mut self) -> Option<(u64, T)> {
        if let Some(first) = self.front.pop_first() {
            return Some(first);
        }
        self.advance_head();
        let index = self.head;
        let value = self.slots.get_mut(index)?.take()?;
        self.clear_slot(index);
        self.len -= 1;
        let seq = self.base + index as u64;
        self.advance_head();
        Some((seq, value))
    }

    fn advance_head(&mut self) {
        while self.head < self.slots.len() && self.slots[self.head].is_none() {
            self.head += 1;
        }
        if self.len == 0 {
            self.base += self.slots.len() as u64;
            self.slots.clear();
            self.tree.truncate(1);
            self.head = 0;
        } else if self.head >= 1024 && self.head * 2 >= self.slots.len() {
            self.compact();
        }
    }

    /// Drops the dead prefix and rebuilds the tree in O(n).
    fn compact(&mut self) {
        self.slots.drain(..self.head);
        self.base += self.head as u64;
        self.head = 0;
        self.tree.clear();
        self.tree.push(0);
        self.tree
            .extend(self.slots.iter().map(|slot| u32::from(slot.is_some())));
        for i in 1..self.tree.len() {
            let parent = i + lowbit(i);
            if parent < self.tree.len() {
                self.tree[parent] += self.tree[i];
            }
        }
    }

    /// The entries in arrival order with their sequences.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        let front = self.front.iter().map(|(seq, value)| (*seq, value));
        front.chain(
            self.slots
                .iter()
                .enumerate()
                .skip(self.head)
                .filter_map(|(i, slot)| slot.as_ref().map(|value| (self.base + i as u64, value))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn positions_follow_arrival_and_close_gaps_on_removal() {
        let mut queue = OrderIndex::default();
        for seq in 1..=5 {
            queue.push(seq, seq * 10);
        }
        assert_eq!(queue.position(3), Some(3));
        assert_eq!(queue.remove(2), Some(20));
        assert_eq!(queue.position(3), Some(2));
        assert_eq!(queue.pop_front(), Some((1, 10)));
        assert_eq!(queue.position(5), Some(3));
        assert_eq!(queue.position(1), None);
        assert_eq!(queue.len(), 3);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push,
        Pop,
        Remove(usize),
        Restore(usize),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![
                4 => Just(Op::Push),
                2 => Just(Op::Pop),
                1 => any::<usize>().prop_map(Op::Remove),
                1 => any::<usize>().prop_map(Op::Restore),
            ],
            0..3000,
        )
    }

    proptest! {
        // Against a plain Vec model: positions are a permutation of 1..=N in FIFO order, pops come
        // out in arrival order, and each entry leaves at most once.
        #[test]
        fn matches_a_vector_model_under_any_mix_of_operations(ops in ops()) {
            let mut queue = OrderIndex::default();
            let mut model: Vec<u64> = Vec::new();
            let mut seq = 0u64;
            let mut gone: Vec<u64> = Vec::new();
            for op in ops {
                match op {
                    Op::Push => {
                        seq += 1;
                        queue.push(seq, seq);
                        model.push(seq);
                    }
                    Op::Pop => {
                        let expected = (!model.is_empty()).then(|| model.remove(0));
                        prop_assert_eq!(queue.pop_front().map(|(s, _)| s), expected);
                    }
                    Op::Remove(pick) => {
                        if !model.is_empty() {
                            let victim = model.remove(pick % model.len());
                            prop_assert_eq!(queue.remove(victim), Some(victim));
                            prop_assert_eq!(queue.remove(victim), None);
                            gone.push(victim);
                        }
                    }
                    Op::Restore(pick) => {
                        if !gone.is_empty() {
                            let back = gone.swap_remove(pick % gone.len());
                            prop_assert!(queue.restore(back, back));
                            prop_assert!(!queue.restore(back, back));
                            let at = model.partition_point(|s| *s < back);
                            model.insert(at, back);
                        }
                    }
                }
                prop_assert_eq!(queue.len(), model.len());
            }
            for (rank, s) in model.iter().enumerate() {
                prop_assert_eq!(queue.position(*s), Some(rank as u64 + 1));
            }
            let order: Vec<u64> = queue.iter().map(|(s, _)| s).collect();
            prop_assert_eq!(order, model);
        }
    }
}
