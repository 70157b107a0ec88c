//! Unit tests of `flash_sale`.

use super::*;

#[test]
fn the_curve_ramps_then_holds_the_spike() {
    let plan = FlashSalePlan {
        room: "main".into(),
        ramp_secs: 2.0,
        spike_per_sec: 1000.0,
        spike_secs: 1.0,
        sse_share: 0.0,
        drain_timeout: Duration::from_secs(1),
        connections: 1,
        then: vec![(10.0, 2.0)],
        checkout: vec![
            (0.0, Duration::from_secs(3)),
            (60.0, Duration::from_secs(10)),
        ],
        unused_tokens: 0,
        keep_timeline: false,
    };
    assert_eq!(plan.shoppers(), 2020);
    // Then 10 /s for 2 s.
    assert!((plan.arrival_secs(2000) - 3.05).abs() < 1e-9);
    assert!((plan.arrival_secs(2019) - 4.95).abs() < 1e-9);
    assert!((plan.arrival_span_secs() - 5.0).abs() < 1e-9);
    assert_eq!(plan.checkout_delay(59.0), Duration::from_secs(3));
    assert_eq!(plan.checkout_delay(61.0), Duration::from_secs(10));
    // Half the ramp's shoppers arrive in its last 0.6 s (the rate grows linearly).
    assert!(plan.arrival_secs(0) < 0.1);
    assert!((plan.arrival_secs(499) - 1.414).abs() < 0.01);
    assert!((plan.arrival_secs(1999) - 3.0).abs() < 0.01);
    let arrivals: Vec<f64> = (0..2000).map(|n| plan.arrival_secs(n)).collect();
    assert!(arrivals.windows(2).all(|w| w[0] <= w[1]));
}
