//! Proof of work on the page (docs/bots.md): when a join is refused for want of
//! one, get a challenge, solve it without freezing the page, join with the solution.
//!
//! The solver runs on the main thread in slices of [`SLICE_MS`]: between slices it yields to the
//! event loop through a `MessageChannel` message (no 4 ms timer clamp), so input, animation
//! frames and the view keep running. Meanwhile the view says "Checking your browser…"
//! ([`crate::connection::QueueView::checking`]).
//!
//! The hashing is [`Puzzle`]'s own small SHA-256 (a loop over the rounds, the challenge's full
//! blocks hashed once), checked against `vestibule_shared::bots` in the tests: the `sha2` crate's
//! unrolled rounds were 3.5 KB of the page's WASM.

use leptos::prelude::*;
use vestibule_shared::TicketStatus;
use wasm_bindgen::{JsCast, JsValue};

use crate::api::{self, ApiError};

/// Longest the solver holds the main thread at a time, ms.
const SLICE_MS: f64 = 10.0;
/// Nonces tried between two looks at the clock.
const BATCH: u64 = 1024;
/// Challenges tried per join when the server refuses a solution (expired while solving, …).
const ATTEMPTS: usize = 3;

/// Whether `error` is a refusal of the join's proof of work (get a challenge and solve it).
pub fn needed(error: &ApiError) -> bool {
    error
        .code()
        .is_some_and(|code| code.starts_with("proof_of_work_"))
}

/// Joins `room` with a solved challenge, showing `checking` while solving; gets a new challenge
/// when the server refuses a solution (at most [`ATTEMPTS`] times).
///
/// # Errors
/// As [`api::join`] and [`api::challenge`].
pub async fn join(
    room: &str,
    idempotency_key: &str,
    checking: RwSignal<bool>,
) -> Result<TicketStatus, ApiError> {
    let mut refused = None;
    for _ in 0..ATTEMPTS {
        let challenge = api::challenge(room).await?;
        let proof = if challenge.difficulty == 0 {
            None
        } else {
            checking.set(true);
            let nonce = solve(&challenge.challenge, challenge.difficulty).await;
            checking.set(false);
            Some(format!("{}:{nonce}", challenge.challenge))
        };
        match api::join(room, idempotency_key, proof.as_deref()).await {
            Err(error) if needed(&error) => refused = Some(error),
            answer => return answer,
        }
    }
    Err(refused.unwrap_or(ApiError::Decode))
}

/// Finds a nonce for `challenge` at `difficulty` bits, yielding every [`SLICE_MS`].
async fn solve(challenge: &str, difficulty: u8) -> u64 {
    let mut puzzle = Puzzle::new(challenge);
    let mut start = 0u64;
    loop {
        let began = js_sys::Date::now();
        while js_sys::Date::now() - began < SLICE_MS {
            if let Some(nonce) = puzzle.solve_range(difficulty, start, BATCH) {
                return nonce;
            }
            start += BATCH;
        }
        yield_to_page().await;
    }
}

/// SHA-256's round constants.
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256's initial hash value.
const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// One SHA-256 block (64 bytes) into `state`.
fn compress(state: &mut [u32; 8], block: &[u8]) {
    let mut w = [0u32; 64];
    for (i, word) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    }
    for i in 16..64 {
        let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
        let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16]
            .wrapping_add(s0)
            .wrapping_add(w[i - 7])
            .wrapping_add(s1);
    }
    let mut v = *state;
    for i in 0..64 {
        let [a, b, c, d, e, f, g, h] = v;
        let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
        let choice = (e & f) ^ (!e & g);
        let t1 = h
            .wrapping_add(s1)
            .wrapping_add(choice)
            .wrapping_add(K[i])
            .wrapping_add(w[i]);
        let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
        let majority = (a & b) ^ (a & c) ^ (b & c);
        let t2 = s0.wrapping_add(majority);
        v = [t1.wrapping_add(t2), a, b, c, d.wrapping_add(t1), e, f, g];
    }
    for (s, x) in state.iter_mut().zip(v) {
        *s = s.wrapping_add(x);
    }
}

/// The puzzle of one challenge: `SHA-256(challenge ‖ nonce as 8 bytes big-endian)` with at
/// least `difficulty` leading zero bits (`vestibule_shared::bots`). The challenge's full blocks
/// are hashed once; each nonce hashes only the last one or two blocks.
struct Puzzle {
    /// The state after the challenge's full 64-byte blocks.
    prefix: [u32; 8],
    /// The rest of the message, padded: the challenge's last bytes, the nonce, the padding.
    tail: Vec<u8>,
    /// Where the nonce's 8 bytes are in `tail`.
    nonce_at: usize,
}

impl Puzzle {
    fn new(challenge: &str) -> Self {
        let bytes = challenge.as_bytes();
        let full = bytes.len() / 64 * 64;
        let mut prefix = H0;
        for block in bytes[..full].chunks_exact(64) {
            compress(&mut prefix, block);
        }
        let mut tail = bytes[full..].to_vec();
        let nonce_at = tail.len();
        tail.extend_from_slice(&[0; 8]);
        tail.push(0x80);
        while tail.len() % 64 != 56 {
            tail.push(0);
        }
        let bits = (bytes.len() as u64 + 8) * 8;
        tail.extend_from_slice(&bits.to_be_bytes());
        Self {
            prefix,
            tail,
            nonce_at,
        }
    }

    /// The leading zero bits of the hash with `nonce`.
    fn bits(&mut self, nonce: u64) -> u32 {
        self.tail[self.nonce_at..self.nonce_at + 8].copy_from_slice(&nonce.to_be_bytes());
        let mut state = self.prefix;
        for block in self.tail.chunks_exact(64) {
            compress(&mut state, block);
        }
        let mut bits = 0;
        for word in state {
            if word != 0 {
                return bits + word.leading_zeros();
            }
            bits += 32;
        }
        bits
    }

    /// The first nonce in `start..start + count` that solves the puzzle at `difficulty`.
    fn solve_range(&mut self, difficulty: u8, start: u64, count: u64) -> Option<u64> {
        (start..start.saturating_add(count))
            .find(|&nonce| self.bits(nonce) >= u32::from(difficulty))
    }
}

/// Lets the browser run what is waiting (input, frames, timers) before going on.
async fn yield_to_page() {
    let Ok(channel) = web_sys::MessageChannel::new() else {
        return;
    };
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        channel.port1().set_onmessage(Some(resolve.unchecked_ref()));
        let _ = channel.port2().post_message(&JsValue::NULL);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use vestibule_shared::bots;

    #[test]
    fn the_puzzle_hashes_as_the_server_checks() {
        // Challenges of every length around the block boundaries (55/56 and 64 bytes).
        for len in 0..140 {
            let challenge: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let mut puzzle = Puzzle::new(&challenge);
            for nonce in [0, 1, 255, 256, 1 << 40, u64::MAX] {
                assert_eq!(
                    puzzle.bits(nonce),
                    bots::solution_bits(&challenge, nonce),
                    "{len} {nonce}"
                );
            }
        }
    }

    #[test]
    fn the_puzzle_finds_the_reference_solution() {
        let challenge = "v1.main.1700000000000.Zb3n0W6m1q8VqL2pX9cT4A.signature-of-the-server";
        for difficulty in [0, 4, 10] {
            let mut puzzle = Puzzle::new(challenge);
            let nonce = puzzle.solve_range(difficulty, 0, u64::MAX).unwrap();
            assert_eq!(nonce, bots::solve(challenge, difficulty));
            assert!(bots::solves(challenge, nonce, difficulty));
        }
    }
}
