//! Why a store call failed, and what a client may assume about its effect.

/// Why a store call failed.
///
/// The two outage kinds differ in what a client may assume (README "Retries"): after
/// [`StoreError::Unavailable`] the call surely did nothing; after [`StoreError::OutcomeUnknown`] a
/// change may have happened, so the client must re-read (or retry with its idempotency key)
/// before trying again. Reads never return `OutcomeUnknown`: a read that was not answered changed
/// nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The call never reached the store, or the store refused it (no connection, connection
    /// refused, an error reply): nothing was changed. Answered 503 `store_unavailable`.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The call was sent but not answered in time (or the connection broke under it): a change
    /// may have happened. Answered 504 `store_timeout`.
    #[error("store did not confirm the change: {0}")]
    OutcomeUnknown(String),
    /// The store answered something this code does not understand (a bug or a foreign key).
    #[error("store answered unexpectedly: {0}")]
    Corrupt(String),
    /// A join without a limit was refused because the room is sold out or closed (only from
    /// [`Store::join`](crate::store::Store::join); nothing changed). Answered 409.
    #[error("join refused: {0:?}")]
    Refused(crate::store::JoinRefusal),
    /// The embedded store has no such room (deleted while the call was on its way; issue 14).
    /// Answered 404 `room_not_found`.
    #[error("no room named {0:?}")]
    NoSuchRoom(String),
    /// The room was deleted through another replica and this one has not seen it yet (Redis: the
    /// room's tombstone `vestibule:{r}:gone` is there; nothing was changed). Answered 410
    /// `room_deleted`.
    #[error("room {0:?} was deleted")]
    RoomDeleted(String),
    /// The room's settings are missing without a tombstone: the store lost them (Redis restarted
    /// without persistence); the replicas running the room write them back as they hold them
    /// ([`Store::restore_room`](crate::store::Store::restore_room)) within a tick. Answered 503
    /// `store_unavailable`.
    #[error("store unavailable: the settings of room {0:?} are missing from Redis; they are written back within a tick")]
    SettingsLost(String),
}

impl StoreError {
    /// The error of a read-only call: a read that was not answered changed nothing, so an unknown
    /// outcome is plain unavailability.
    pub fn for_read(self) -> Self {
        match self {
            Self::OutcomeUnknown(reason) => Self::Unavailable(reason),
            other => other,
        }
    }
}
