//! Native solve times of the join's proof of work (docs/bots.md, BENCHMARKS.md
//! "Issue 16"): for each difficulty, fresh challenges solved with the reference solver
//! (`vestibule_shared::bots::solve`) on one core. Mean seconds per solve = the CPU-seconds a
//! bot farm pays per place at that difficulty.
//!
//! `cargo run --release -p vestibule-shared --example pow_solve [FROM TO SECONDS_PER_STEP]`

use std::time::{Duration, Instant};

use vestibule_shared::bots::solve;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers"))
        .collect();
    let (from, to, budget) = match args.as_slice() {
        [from, to, secs] => (*from, *to, *secs),
        _ => (8, 22, 20),
    };
    println!("| bits | solves | mean ms | p50 ms | p90 ms | max ms | MH/s |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for bits in (from..=to).step_by(2) {
        let bits = u8::try_from(bits).expect("bits ≤ 255");
        let started = Instant::now();
        let mut times = Vec::new();
        let mut hashes = 0u64;
        let mut i = 0u64;
        while (started.elapsed() < Duration::from_secs(budget) || times.len() < 5)
            && times.len() < 2_000
        {
            // Shaped like a real challenge: room, expiry, bits, id, MAC.
            let challenge = format!(
                "main.1767225600000.{bits}.{i:022}.mac0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
            );
            let solve_started = Instant::now();
            let nonce = solve(&challenge, bits);
            times.push(solve_started.elapsed().as_secs_f64() * 1000.0);
            hashes += nonce + 1;
            i += 1;
        }
        let total: f64 = times.iter().sum();
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
        println!(
            "| {bits} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            times.len(),
            total / times.len() as f64,
            at(0.5),
            at(0.9),
            at(1.0),
            hashes as f64 / total / 1000.0
        );
    }
}
