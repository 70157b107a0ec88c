//! Random queueing in the embedded engine (docs/DESIGN.md "Random queueing"): while a room's
//! `queueingMethod` is `random` and it has a seed, every waiting ticket (not a `PRE_QUEUE` one)
//! holds the key `hex(HMAC-SHA256(seed, tag)) .. tag .. id` in [`LotteryIndex`]; admission takes
//! the smallest key first and a position is the ticket's rank by key. The arrival-ordered queue
//! stays as it is (presence, the waiters list and arrival seqs keep working on it); the lottery
//! only decides who goes next and what a position says.
//!
//! The lottery is derived state: from the settings, the seed and the waiting tickets, so it is
//! not in the snapshot image and a replayed journal rebuilds it ([`Room::sync_lottery`]).

use std::sync::Arc;

use super::room::Room;
use crate::draw::{draw_key, seed_bytes};
use crate::lottery::{id_of_key, LotteryIndex};

/// A room's lottery: the seed's bytes and the keys of the waiting tickets.
#[derive(Debug, Clone)]
pub struct MemoryLottery {
    seed: Vec<u8>,
    order: LotteryIndex,
}

impl MemoryLottery {
    /// `id`'s key under this lottery's seed.
    fn key(&self, id: &str) -> String {
        let mut key = draw_key(&self.seed, id);
        key.push_str(id);
        key
    }
}

impl Room {
    /// Brings the lottery in line with the settings and the seed: built from every waiting
    /// ticket when the room is random and has a seed (a switch to random puts everyone in at
    /// once), dropped when it is FIFO again (arrival order is still the queue's own).
    pub(super) fn sync_lottery(&mut self) {
        let wanted = self.config.queueing_method.is_random();
        let seed = self.draw.as_ref().and_then(|draw| seed_bytes(&draw.seed));
        let running = self.lottery.is_some();
        match (wanted, seed, running) {
            (true, Some(seed), false) => {
                let mut lottery = MemoryLottery {
                    seed,
                    order: LotteryIndex::default(),
                };
                for (_, id) in self.queue.iter() {
                    if !self.prequeue.contains(id) {
                        lottery.order.insert(lottery.key(id));
                    }
                }
                self.lottery = Some(lottery);
            }
            (false, _, true) => self.lottery = None,
            _ => {}
        }
        if running != self.lottery.is_some() {
            // Positions change order: no SSE cursor from before can be followed (it would need
            // more leaves than are kept).
            self.left_count += super::room::LEFT_KEPT as u64 + 1;
        }
    }

    /// Whether waiting tickets are ordered by lottery key.
    pub fn lottery_running(&self) -> bool {
        self.lottery.is_some()
    }

    /// Puts a waiting ticket into the lottery (a join, a return, a drawn pre-queue ticket).
    pub(super) fn lottery_add(&mut self, id: &str) {
        if let Some(lottery) = self.lottery.as_mut() {
            let key = lottery.key(id);
            lottery.order.insert(key);
        }
    }

    /// Takes a ticket out of the lottery (a leave, a skip, a pre-queue join).
    pub(super) fn lottery_remove(&mut self, id: &str) {
        if let Some(lottery) = self.lottery.as_mut() {
            let key = lottery.key(id);
            lottery.order.remove(&key);
        }
    }

    /// A waiting ticket's 1-based rank by key; `None` when no lottery runs (or it is not in it).
    pub(super) fn lottery_position(&self, id: &str) -> Option<u64> {
        let lottery = self.lottery.as_ref()?;
        lottery
            .order
            .rank(&lottery.key(id))
            .map(|rank| rank as u64 + 1)
    }

    /// Takes the next shopper to admit out of the line: the smallest key while the lottery runs,
    /// else the head in arrival order. Returns the ticket and its arrival seq (still in
    /// `seq_of`: the caller settles it).
    pub(super) fn pop_next(&mut self) -> Option<(u64, Arc<str>)> {
        let Some(lottery) = self.lottery.as_mut() else {
            return self.queue.pop_front();
        };
        while let Some(key) = lottery.order.pop_first() {
            let id = id_of_key(&key);
            let Some(seq) = self.seq_of.get(id).copied() else {
                continue;
            };
            if let Some(id) = self.queue.remove(seq) {
                return Some((seq, id));
            }
        }
        None
    }

    /// The waiting tickets in admission order (lottery keys, or arrival), for tests and checks.
    pub fn admission_order(&self) -> Vec<String> {
        match &self.lottery {
            Some(lottery) => lottery
                .order
                .iter()
                .map(|key| id_of_key(key).to_owned())
                .collect(),
            None => self.queue.iter().map(|(_, id)| id.to_string()).collect(),
        }
    }
}
