//! Whether the store may lose queue state: Redis's eviction and persistence settings, read at
//! start (warned of, refused with `--require-safe-redis`) and watched while running.

use std::time::Duration;

use anyhow::Context as _;

use crate::state::AppState;
use crate::store::{Store, StoreSafety};

/// Reads how the store is set up where that can lose queue state; warns of each risk, and with
/// `require_safe` refuses a Redis that may evict keys.
///
/// # Errors
/// The store's settings could not be read, or `require_safe` and Redis may evict keys.
pub(super) async fn check_store_safety(
    store: &dyn Store,
    require_safe: bool,
) -> anyhow::Result<Option<StoreSafety>> {
    let Some(safety) = store
        .safety()
        .await
        .context("reading Redis's eviction and persistence settings")?
    else {
        return Ok(None);
    };
    if require_safe && safety.may_evict() {
        anyhow::bail!(
            "Redis maxmemory-policy is {:?}, which may evict tickets and entry tokens; set it to \
             noeviction (or start without --require-safe-redis)",
            safety.maxmemory_policy
        );
    }
    for warning in safety.warnings() {
        tracing::warn!("{warning}");
    }
    record_safety_metrics(&safety);
    Ok(Some(safety))
}

fn record_safety_metrics(safety: &StoreSafety) {
    metrics::gauge!("vestibule_store_may_evict").set(f64::from(u8::from(safety.may_evict())));
    // Not set while unknown (no AOF, snapshot schedule hidden): absent, not a false 0.
    if let Some(persists) = safety.persists() {
        metrics::gauge!("vestibule_store_persistent").set(f64::from(u8::from(persists)));
    }
}

/// Re-reads Redis's eviction and persistence settings every `--redis-safety-check-secs` (an
/// operator may change them at run time); warns when they turn unsafe. Ends on shutdown.
pub(super) async fn watch_store_safety(state: AppState, period: Duration) {
    let mut shutdown = state.shutdown.clone();
    loop {
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
        let Ok(Some(safety)) = state.store.safety().await else {
            continue;
        };
        record_safety_metrics(&safety);
        let mut last = state
            .store_safety
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.as_ref() != Some(&safety) {
            for warning in safety.warnings() {
                tracing::warn!("{warning}");
            }
            *last = Some(safety);
        }
    }
}
