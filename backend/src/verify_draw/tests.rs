//! Unit tests of `verify_draw`.

use super::*;
use crate::room::opening::draw_order;
use vestibule_shared::draw::{DrandRound, DrawBeacon, DRAW_ALGORITHM};

/// A published draw of `tags` (any order) under the mix, with `beacon` mixed in if given.
fn drawn_with(seed: &str, tags: Vec<String>, beacon: Option<DrawBeacon>) -> DrawInfo {
    let bytes = seed_bytes(seed).unwrap();
    let tags_hash = tags_sha256(&tags);
    let randomness = beacon.as_ref().and_then(|b| b.randomness.clone());
    let mixed = mixed_seed(&bytes, &tags_hash, randomness.as_deref()).unwrap();
    let ordered = draw_order(&mixed, tags, Clone::clone);
    DrawInfo {
        room: "main".into(),
        state: DrawState::Drawn,
        opens_at: None,
        prequeue_opens_at: None,
        seed_sha256: Some(seed_commitment(&bytes)),
        seed: Some(seed.into()),
        algorithm: DRAW_ALGORITHM.into(),
        tags_sha256: Some(tags_hash),
        beacon,
        draw_seed: Some(hex32(&mixed)),
        drawn_at: None,
        count: ordered.len() as u64,
        offset: 0,
        tags: ordered,
        next_offset: None,
    }
}

fn drawn(seed: &str, tags: Vec<String>) -> DrawInfo {
    drawn_with(seed, tags, None)
}

fn tags(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{i:012x}")).collect()
}

#[test]
fn a_true_draw_verifies_and_any_change_is_caught() {
    let seed = "ab".repeat(32);
    let good = drawn(&seed, tags(300));
    let ordered = good.tags.clone();
    let third = ordered[2].clone();
    assert_eq!(
        verify(std::slice::from_ref(&good), Some(&third)),
        Ok(Verified {
            count: 300,
            place: Some(3)
        })
    );
    let mut swapped = good.clone();
    swapped.tags.swap(0, 1);
    assert!(
        matches!(verify(&[swapped], None), Err(Refuted::Mismatch(why)) if why.contains("place 1"))
    );
    let mut other_seed = good.clone();
    other_seed.seed_sha256 = Some("00".repeat(32));
    assert!(
        matches!(verify(&[other_seed], None), Err(Refuted::Mismatch(why)) if why.contains("commitment"))
    );
    let mut short = good.clone();
    short.tags.pop();
    assert!(matches!(
        verify(&[short], None),
        Err(Refuted::Incomplete(_))
    ));
    // Two pages in any order verify as one.
    let mut head = good.clone();
    head.tags.truncate(100);
    head.next_offset = Some(100);
    let mut tail = good.clone();
    tail.tags = ordered[100..].to_vec();
    tail.offset = 100;
    assert!(verify(&[tail, head], None).is_ok());
}

/// Issue 42: an order keyed with the committed seed alone (one whoever wrote the store could
/// have chosen) is refused, however it is labelled; `--unmixed` checks a draw published
/// before the mix under its own algorithm.
#[test]
fn an_order_by_the_committed_seed_alone_is_refused() {
    let seed = "cd".repeat(32);
    let good = drawn(&seed, tags(200));
    let raw = draw_order(&seed_bytes(&seed).unwrap(), tags(200), Clone::clone);
    // The mixed draw's fields, the raw order: the place check catches it.
    let mut forged = good.clone();
    forged.tags = raw.clone();
    assert!(
        matches!(verify(&[forged], None), Err(Refuted::Mismatch(why)) if why.contains("place"))
    );
    // Published as a draw before the mix: refused unless asked, then it verifies.
    let mut old = good.clone();
    old.tags = raw;
    old.tags_sha256 = None;
    old.draw_seed = None;
    old.algorithm = DRAW_ALGORITHM_UNMIXED.into();
    assert!(
        matches!(verify(std::slice::from_ref(&old), None), Err(Refuted::Mismatch(why)) if why.contains("not mixed"))
    );
    assert!(verify_with(&[old], None, true).is_ok());
    // A published tags hash or draw seed that is not the recomputed one.
    let mut wrong_hash = good.clone();
    wrong_hash.tags_sha256 = Some("11".repeat(32));
    assert!(
        matches!(verify(&[wrong_hash], None), Err(Refuted::Mismatch(why)) if why.contains("tagsSha256"))
    );
    let mut wrong_seed = good;
    wrong_seed.draw_seed = Some("22".repeat(32));
    assert!(
        matches!(verify(&[wrong_seed], None), Err(Refuted::Mismatch(why)) if why.contains("drawSeed"))
    );
}

/// A beacon's value is mixed in: the draw verifies with it, not without it or with another;
/// its randomness must be SHA-256 of its signature; a beacon named without its value is
/// incomplete (exit 2).
#[test]
fn a_draw_with_a_beacon_verifies_only_with_its_value() {
    let seed = "ef".repeat(32);
    let signature = "a1".repeat(48);
    let randomness: String = Sha256::digest(hex_bytes(&signature))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let beacon = DrawBeacon {
        drand: DrandRound {
            chain_hash: "52db".repeat(16),
            round: 4711,
        },
        randomness: Some(randomness),
        signature: Some(signature),
    };
    let good = drawn_with(&seed, tags(150), Some(beacon.clone()));
    assert!(verify(std::slice::from_ref(&good), None).is_ok());
    // The same order without the beacon, or with another value, does not verify.
    let mut without = good.clone();
    without.beacon = None;
    without.draw_seed = None;
    assert!(matches!(
        verify(&[without], None),
        Err(Refuted::Mismatch(_))
    ));
    let mut other = good.clone();
    let mut other_beacon = beacon.clone();
    other_beacon.randomness = Some("33".repeat(32));
    other_beacon.signature = None;
    other.beacon = Some(other_beacon);
    other.draw_seed = None;
    assert!(matches!(verify(&[other], None), Err(Refuted::Mismatch(_))));
    // A randomness that is not its signature's hash.
    let mut unbound = good.clone();
    let mut unbound_beacon = beacon.clone();
    unbound_beacon.signature = Some("b2".repeat(48));
    unbound.beacon = Some(unbound_beacon);
    assert!(
        matches!(verify(&[unbound], None), Err(Refuted::Mismatch(why)) if why.contains("signature"))
    );
    // Named, its value not supplied: nothing can be said yet.
    let mut pending = good;
    pending.beacon = Some(DrawBeacon {
        randomness: None,
        signature: None,
        ..beacon
    });
    assert!(matches!(
        verify(&[pending], None),
        Err(Refuted::Incomplete(_))
    ));
}

fn hex_bytes(text: &str) -> Vec<u8> {
    crate::room::opening::hex_bytes(text).unwrap()
}
