//! Why a store call failed, and what a client may assume about its effect.

/// Why a store call failed.
///
/// The two outage kinds differ in what a client may assume (docs/api.md, "Retries"): after
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
    /// [`Store::join`](crate::Store::join); nothing changed). Answered 409.
    #[error("join refused: {0:?}")]
    Refused(crate::JoinRefusal),
    /// The call named a generation of the room that is not its live one: the room was deleted
    /// (or deleted and created again) through some replica, and the caller's copy is older
    /// (docs/DESIGN.md "Rooms at run time"); nothing was changed. Answered 410 `room_deleted`.
    #[error("room {0:?} was deleted")]
    RoomGone(String),
    /// The room's document is missing: the store lost it (Redis restarted without persistence,
    /// or the key was removed by hand). A replica running the room writes back the document it
    /// holds ([`Catalog::write_back_room`](crate::Catalog::write_back_room)) within a tick.
    /// Answered 503 `store_unavailable`.
    #[error("store unavailable: room {0:?} is missing from the store; a replica running it writes it back within a tick")]
    RoomLost(String),
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
