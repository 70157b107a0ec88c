//! The server's cost of checking a join's proof of work (BENCHMARKS.md "Issue 16"): the time of
//! `ChallengeKey::verify` (HMAC of the challenge + one SHA-256 of the solution) on one core, and
//! of issuing a challenge. The store write that marks it used is measured by the join benchmark.
//!
//! `cargo run --release -p vestibule --example pow_verify`

use std::hint::black_box;
use std::time::Instant;

use vestibule::bots::ChallengeKey;
use vestibule_shared::bots::solve;

fn main() {
    let key = ChallengeKey::new([7; 32]);
    let expires = u64::MAX / 2;
    let challenge = key.issue("main", 16, "q1Zb3n0W6m1q8VqL2pX9cT", expires);
    let header = format!("{challenge}:{}", solve(&challenge, 16));
    let rounds = 1_000_000u32;
    let started = Instant::now();
    for _ in 0..rounds {
        black_box(
            key.verify(black_box("main"), black_box(&header), 1, 16)
                .is_ok(),
        );
    }
    let verify_ns = started.elapsed().as_nanos() as f64 / f64::from(rounds);
    let started = Instant::now();
    for i in 0..rounds {
        black_box(key.issue("main", 16, "q1Zb3n0W6m1q8VqL2pX9cT", u64::from(i)));
    }
    let issue_ns = started.elapsed().as_nanos() as f64 / f64::from(rounds);
    println!("verify: {verify_ns:.0} ns per join; issue: {issue_ns:.0} ns per challenge");
}
