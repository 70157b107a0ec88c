use super::*;

const TICK: Duration = Duration::from_millis(100);

#[test]
fn quota_carries_fractions_so_175_per_second_is_exact_over_a_second() {
    let mut quota = Quota::default();
    let per_tick: Vec<u64> = (0..10).map(|_| quota.take(175.0, TICK, TICK)).collect();
    assert_eq!(per_tick.iter().sum::<u64>(), 175);
    assert!(
        per_tick.iter().all(|n| *n == 17 || *n == 18),
        "{per_tick:?}"
    );
}

#[test]
fn a_stalled_tick_admits_one_tick_and_the_rate_resumes_without_catching_up() {
    let mut quota = Quota::default();
    // A tick that ran 500 ms late may not admit 5 ticks' worth at once.
    let late = quota.take(100.0, Duration::from_millis(600), TICK);
    assert_eq!(late, 10);
    // Nor later: every tick after it admits exactly the rate's share.
    for _ in 0..60 {
        assert_eq!(quota.take(100.0, TICK, TICK), 10);
    }
}

#[test]
fn grid_jitter_is_paid_by_the_next_tick_so_every_second_admits_the_rate() {
    let mut quota = Quota::default();
    // On a grid a tick 7 ms late is followed by one 7 ms early.
    let elapsed = [107, 93].map(Duration::from_millis);
    let per_tick: Vec<u64> = (0..40)
        .map(|i| quota.take(100.0, elapsed[i % 2], TICK))
        .collect();
    assert!(per_tick.iter().all(|n| *n <= 10), "{per_tick:?}");
    for second in per_tick.chunks(10) {
        let admitted: u64 = second.iter().sum();
        assert!((99..=100).contains(&admitted), "{per_tick:?}");
    }
    assert!(per_tick.iter().sum::<u64>() >= 399, "{per_tick:?}");
}

#[test]
fn an_empty_queue_banks_no_capacity() {
    let mut quota = Quota::default();
    let granted = quota.take(175.0, TICK, TICK);
    quota.settle_short(granted, 0);
    assert!(quota.take(175.0, TICK, TICK) <= 18);
}

#[test]
fn the_first_tick_after_taking_the_lease_is_owed_one_tick_so_the_rate_holds_from_the_start() {
    let taken_at = Instant::now();
    let mut leadership = Leadership::taken(7, taken_at);
    let mut quota = Quota::default();
    let first = leadership.owed_since_last_tick(taken_at + TICK);
    assert_eq!(first, TICK);
    // The first second as leader, with a backlog: exactly the rate, 17 or 18 a tick.
    let mut per_tick = vec![quota.take(175.0, first, TICK)];
    for n in 2..=10 {
        let elapsed = leadership.owed_since_last_tick(taken_at + TICK * n);
        per_tick.push(quota.take(175.0, elapsed, TICK));
    }
    assert_eq!(per_tick.iter().sum::<u64>(), 175, "{per_tick:?}");
}

#[test]
fn a_slow_rate_admits_one_every_few_ticks() {
    let mut quota = Quota::default();
    let total: u64 = (0..100).map(|_| quota.take(2.5, TICK, TICK)).sum();
    assert_eq!(total, 25);
}
