//! Store calls in flight that hear tickets: any of them may bring a skipped ticket back ahead of
//! followed ones, so each is counted in the answers from memory until it answers.

use std::time::Instant;

use super::SseHub;

/// A store call hearing tickets, in flight (from [`SseHub::hearing`]). Say what it answered
/// with [`Hearing::answered`]; dropped unanswered (an error, a cancelled request), each ticket
/// that may have come back counts as a return until the next refresh.
#[must_use]
pub struct Hearing<'a> {
    hub: &'a SseHub,
    tokens: Vec<u64>,
    answered: bool,
}

impl Hearing<'_> {
    /// The call answered: `kept` holds, for each ticket it reported with a kept place, that
    /// ticket's arrival sequence when known. Each may have come back in this call.
    pub fn answered(mut self, kept: impl IntoIterator<Item = Option<u64>>) {
        self.answered = true;
        let now = Instant::now();
        let mut watchers = self.hub.lock();
        for token in &self.tokens {
            if let Some((_, possible)) = watchers.hearing.remove(token) {
                watchers.possible_returns -= u64::from(possible);
            }
        }
        watchers
            .returns
            .extend(kept.into_iter().map(|seq| (now, seq)));
    }
}

impl Drop for Hearing<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let now = Instant::now();
        let mut watchers = self.hub.lock();
        for token in &self.tokens {
            if let Some((_, true)) = watchers.hearing.remove(token) {
                watchers.possible_returns -= 1;
                watchers.returns.push((now, None));
            }
        }
    }
}

impl SseHub {
    /// Starts a store call that hears `ids` (a poll read from the store, a heartbeat, an SSE
    /// stream's first read or presence batch, a join that finds its ticket): any of them that
    /// is not followed as waiting may be a skipped ticket coming back, ahead of followed ones.
    /// Until the call answers, each such ticket is counted in every answer from memory; after,
    /// each kept place it reports is, until a refresh sent after it (see
    /// [`SseHub::answer_poll`]). A ticket followed as waiting needs no count: if it was skipped
    /// since the last refresh, that refresh's position still counts it, and a refresh that sees
    /// it leave while the call is in flight counts it from then on. Nor does any ticket while
    /// nobody has ever left the line (the cursor's leavers are 0): nobody can be held.
    pub fn hearing(&self, ids: &[String]) -> Hearing<'_> {
        let mut watchers = self.lock();
        // Nobody ever left the line (nor was skipped) as of the hub's last read: nobody was held
        // then, and one skipped since is still in the positions that read gave.
        let nobody_held = watchers.cursor.is_some_and(|cursor| cursor.left == 0);
        let mut tokens = Vec::with_capacity(ids.len());
        for id in ids {
            let possible = !nobody_held && !watchers.follows(id);
            let token = watchers.next_hearing;
            watchers.next_hearing += 1;
            watchers.hearing.insert(token, (id.clone(), possible));
            watchers.possible_returns += u64::from(possible);
            tokens.push(token);
        }
        Hearing {
            hub: self,
            tokens,
            answered: false,
        }
    }
}
