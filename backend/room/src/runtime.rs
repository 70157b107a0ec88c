//! One room's in-process view, shared by its handlers, its scheduler and its SSE hub.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;

use std::sync::Arc;

use crate::counters::RoomCounters;
use crate::ticket_watch::SseHub;
use crate::tokens::TokenService;
use vestibule_store::{Pace, RoomId, Settings, VersionedSettings};

/// One room's in-process view: one generation of it (`store::room_doc`), its settings as last
/// read from the store, and its SSE hub. A room deleted and created again gets a new runtime.
pub struct RoomRuntime {
    /// Room slug.
    pub name: String,
    /// The generation this runtime serves; every store call names it.
    pub generation: u64,
    /// Shared, so a read is a reference count, not a copy of the settings' strings (every poll and
    /// every published SSE status reads them).
    settings: RwLock<Arc<VersionedSettings>>,
    /// Fan-out of ticket updates to this process's SSE streams.
    pub hub: SseHub,
    /// Running totals here and the leadership (read by the admin event stream).
    pub counters: RoomCounters,
    /// Active users as of this process's last scheduler tick (for the ETA under a cap).
    active_users: AtomicU64,
    /// Signs the entry tokens of this room's tickets.
    pub tokens: Arc<TokenService>,
    /// What the room's leader last measured (this process's, or published through the store).
    pace: RwLock<Pace>,
    /// The origin's signals for the closed loop (docs/DESIGN.md "Closed-loop admission").
    pub origin: crate::auto_rate::window::OriginState,
    /// The closed loop's last step and move while this process leads it (for the figures).
    pub auto_loop: crate::auto_rate::shown::LoopShown,
    /// The health URL this process polls for the loop while it leads (`autoRate.healthUrl`).
    pub health: crate::auto_rate::health::HealthPoll,
    /// The room's draw seed is known to exist (`room::opening`).
    seeded: AtomicBool,
    /// The room's draw is known to be made (it never changes after).
    drawn: AtomicBool,
    /// Flips to `true` when the room is deleted here: its scheduler, hub and streams end.
    retired: tokio::sync::watch::Sender<bool>,
    /// The room's per-poll Prometheus counters, registered at the first poll.
    poll_metrics: std::sync::OnceLock<PollMetrics>,
    /// The room's per-join Prometheus counters (`new`, `existing`), each registered at the
    /// first join it counts.
    join_metrics: [std::sync::OnceLock<metrics::Counter>; 2],
}

/// Handles of a room's per-poll counters: registered once, so a poll increments an atomic
/// instead of building and looking up a labelled key (4% of a poll).
#[derive(Debug)]
pub struct PollMetrics {
    /// `vestibule_polls_total{room}`.
    pub polls: metrics::Counter,
    /// `vestibule_polls_from_memory_total{room}`.
    pub from_memory: metrics::Counter,
}

impl RoomRuntime {
    /// A room at the generation of its settings in force, signing entry tokens with `tokens`.
    pub fn new(name: String, settings: VersionedSettings, tokens: Arc<TokenService>) -> Self {
        Self {
            tokens,
            name,
            generation: settings.generation,
            settings: RwLock::new(Arc::new(settings)),
            hub: SseHub::default(),
            counters: RoomCounters::default(),
            active_users: AtomicU64::new(0),
            pace: RwLock::new(Pace::default()),
            origin: Default::default(),
            auto_loop: Default::default(),
            health: Default::default(),
            seeded: AtomicBool::new(false),
            drawn: AtomicBool::new(false),
            retired: tokio::sync::watch::Sender::new(false),
            poll_metrics: std::sync::OnceLock::new(),
            join_metrics: [std::sync::OnceLock::new(), std::sync::OnceLock::new()],
        }
    }

    /// The room and generation, as store calls name them.
    pub fn id(&self) -> RoomId<'_> {
        RoomId::new(&self.name, self.generation)
    }

    /// Stops the room's tasks here (it was deleted).
    pub fn retire(&self) {
        self.retired.send_replace(true);
    }

    /// Resolves once the room is retired ([`RoomRuntime::retire`]).
    pub async fn retired(&self) {
        let mut retired = self.retired.subscribe();
        let _ = retired.wait_for(|gone| *gone).await;
    }

    /// The room's per-poll counters. Registered on first use, from a request, so with the
    /// process's recorder (`telemetry::metrics_handle`, installed before anything is served).
    pub fn poll_metrics(&self) -> &PollMetrics {
        self.poll_metrics.get_or_init(|| PollMetrics {
            polls: metrics::counter!("vestibule_polls_total", "room" => self.name.clone()),
            from_memory: metrics::counter!(
                "vestibule_polls_from_memory_total",
                "room" => self.name.clone()
            ),
        })
    }

    /// Counts one join in `vestibule_joins_total{room, outcome}`: `new` when it made a ticket,
    /// `existing` when it found one. Each series is registered once, at the first join it counts
    /// (as [`RoomRuntime::poll_metrics`]; a labelled key built and looked up per join was ~2% of
    /// a join's instructions), so a series appears with its first count.
    pub fn count_join(&self, created: bool) {
        let (slot, outcome) = if created {
            (&self.join_metrics[0], "new")
        } else {
            (&self.join_metrics[1], "existing")
        };
        slot.get_or_init(|| {
            metrics::counter!(
                "vestibule_joins_total",
                "room" => self.name.clone(),
                "outcome" => outcome
            )
        })
        .increment(1);
    }

    /// Whether this process knows the room's draw seed exists.
    pub fn seeded(&self) -> bool {
        self.seeded.load(Ordering::Relaxed)
    }

    /// Records that the room's draw seed exists.
    pub fn set_seeded(&self) {
        self.seeded.store(true, Ordering::Relaxed);
    }

    /// Whether this process knows the room's draw was made.
    pub fn drawn(&self) -> bool {
        self.drawn.load(Ordering::Relaxed)
    }

    /// Records that the room's draw was made.
    pub fn set_drawn(&self) {
        self.drawn.store(true, Ordering::Relaxed);
    }

    /// The leader's measured pace as last seen (docs/DESIGN.md "ETA and poll hints").
    pub fn pace(&self) -> Pace {
        *self
            .pace
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records the leader's measured pace.
    pub fn set_pace(&self, pace: Pace) {
        *self
            .pace
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = pace;
    }

    /// The settings last read from the store (refreshed every scheduler tick).
    pub fn settings(&self) -> Settings {
        self.versioned_settings().settings
    }

    /// The settings last read from the store, with their version.
    pub fn versioned_settings(&self) -> VersionedSettings {
        (*self.shared_settings()).clone()
    }

    /// [`RoomRuntime::versioned_settings`] without a copy: the settings in force when called
    /// (a later change replaces them, it does not alter these).
    pub fn shared_settings(&self) -> Arc<VersionedSettings> {
        self.settings
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Active users as of the last scheduler tick.
    pub fn active_users(&self) -> u64 {
        self.active_users.load(Ordering::Relaxed)
    }

    /// Records the active users a scheduler tick saw.
    pub fn set_active_users(&self, active: u64) {
        self.active_users.store(active, Ordering::Relaxed);
    }

    /// Replaces the cached settings, unless they are of another generation or older than the
    /// ones held: a scheduler tick that read the store before an admin change must not undo it
    /// here when it answers after.
    pub fn set_settings(&self, settings: VersionedSettings) {
        let mut held = self
            .settings
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if settings.generation == self.generation && settings.version >= held.version {
            // The sold-out mark is never cleared in the store; an older read of the same version
            // (a tick that started before the last order) must not take it back here either.
            let sold_out = held.settings.sale.sold_out;
            let mut settings = settings;
            settings.settings.sale.sold_out |= sold_out;
            *held = Arc::new(settings);
        }
    }

    /// Replaces the cached settings with those the store holds after it lost the room and a
    /// replica wrote it back (`Catalog::write_back_room`): the first replica's copy wins, whatever
    /// version this one held.
    pub fn take_restored(&self, settings: VersionedSettings) {
        if settings.generation == self.generation {
            *self
                .settings
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(settings);
        }
    }
}
