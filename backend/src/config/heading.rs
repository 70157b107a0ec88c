//! The `--help` headings of the server's flags, in the order `--help` shows them.
//!
//! Every flag names one (a test checks); the flags of the flattened structs from other crates
//! get theirs where they are flattened, or spell one of these.

/// Where and how Vestibule serves.
pub const SERVING: &str = "Serving";
/// Redis or the embedded store.
pub const STORE: &str = "Store";
/// The rooms at start and the settings a new room starts with.
pub const ROOMS: &str = "Rooms";
/// Entry tokens, their keys, and the admin API.
pub const TOKENS: &str = "Tokens and admin";
/// Bots at the door and abuse limits.
pub const BOTS: &str = "Bots and abuse";
/// Gate mode (Vestibule in front of a storefront).
pub const GATE: &str = "Gate mode";
/// Bounds on requests, connections and store calls.
pub const LIMITS: &str = "Limits and timeouts";
/// Knobs whose defaults suit almost every deployment.
pub const TUNING: &str = "Tuning";
/// Every heading, in order.
pub const ALL: [&str; 8] = [SERVING, STORE, ROOMS, TOKENS, BOTS, GATE, LIMITS, TUNING];
/// The headings `-h` leaves to `--help` (to fit one screen).
pub const LONG_HELP_ONLY: [&str; 2] = [LIMITS, TUNING];
