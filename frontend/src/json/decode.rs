//! The API's answers taken out of a parsed [`Json`] tree, by the rules of the serde derives they
//! replace (see the module docs of [`super`]).

use vestibule_shared::{
    bots::Challenge, draw::RoomNotOpen, embed::EmbeddingInfo, OrderReceipt, QueueingMethod,
    RoomState, SoldOutMessage, TicketState, TicketStatus, WaitReason,
};

use super::{parse, Json};

/// A value the page reads from the API's JSON.
pub trait FromJson: Sized {
    /// `None` when the value does not have the expected shape.
    fn from_json(json: &Json) -> Option<Self>;
}

/// Parses `text` and decodes it as `T`.
pub fn decode<T: FromJson>(text: &str) -> Option<T> {
    T::from_json(&parse(text)?)
}

fn ticket_state(text: &str) -> Option<TicketState> {
    Some(match text {
        "PRE_QUEUE" => TicketState::PreQueue,
        "WAITING" => TicketState::Waiting,
        "TOKEN_ISSUED" => TicketState::TokenIssued,
        "COMPLETED" => TicketState::Completed,
        "EXPIRED" => TicketState::Expired,
        "LEFT" => TicketState::Left,
        "SOLD_OUT" => TicketState::SoldOut,
        _ => return None,
    })
}

fn room_state(text: &str) -> Option<RoomState> {
    Some(match text {
        "OPEN" => RoomState::Open,
        "PAUSED" => RoomState::Paused,
        "PRE_QUEUE" => RoomState::PreQueue,
        "SOLD_OUT" => RoomState::SoldOut,
        "CLOSED" => RoomState::Closed,
        _ => return None,
    })
}

fn wait_reason(text: &str) -> WaitReason {
    match text {
        "PAUSED" => WaitReason::Paused,
        "RATE_LOWERED" => WaitReason::RateLowered,
        "CAP_REACHED" => WaitReason::CapReached,
        "CHECKOUT_SLOW" => WaitReason::CheckoutSlow,
        "STOCK_HELD" => WaitReason::StockHeld,
        _ => WaitReason::Other,
    }
}

impl FromJson for TicketStatus {
    fn from_json(json: &Json) -> Option<Self> {
        Some(Self {
            ticket_id: json.string("ticketId")?,
            room: json.string("room")?,
            status: ticket_state(json.get("status")?.as_str()?)?,
            position: json.opt_int("position")?,
            eta_seconds: json.opt_int("etaSeconds")?,
            eta_seconds_high: json.opt_int("etaSecondsHigh")?,
            reason: json.opt("reason", |v| v.as_str().map(wait_reason))?,
            eta_basis: None,
            next_poll_after_ms: json.int("nextPollAfterMs")?,
            entry_token: json.opt_string("entryToken")?,
            token_expires_at: json.opt_string("tokenExpiresAt")?,
            checkout_url: json.opt_string("checkoutUrl")?,
            room_state: room_state(json.get("roomState")?.as_str()?)?,
            place_kept: json.flag("placeKept")?,
            sold_out_message: sold_out_message(json)?,
            heartbeat_after_ms: json.opt_int("heartbeatAfterMs")?,
            opens_at: json.opt_string("opensAt")?,
            ticket_tag: json.opt_string("ticketTag")?,
            message_en: json.opt_string("messageEn")?,
            message_ko: json.opt_string("messageKo")?,
            beyond_stock: json.flag("beyondStock")?,
            queueing_method: json.opt("queueingMethod", |v| QueueingMethod::parse(v.as_str()?))?,
            display_name_en: json.opt_string("displayNameEn")?,
            display_name_ko: json.opt_string("displayNameKo")?,
        })
    }
}

/// The optional `soldOutMessage` member: `{"en", "ko"}`, each optional.
fn sold_out_message(json: &Json) -> Option<Option<SoldOutMessage>> {
    json.opt("soldOutMessage", |m| {
        matches!(m, Json::Obj(_)).then_some(())?;
        Some(SoldOutMessage {
            en: m.opt_string("en")?,
            ko: m.opt_string("ko")?,
        })
    })
}

impl FromJson for RoomNotOpen {
    fn from_json(json: &Json) -> Option<Self> {
        Some(Self {
            error: json.string("error")?,
            message: json.string("message")?,
            opens_at: json.opt_string("opensAt")?,
            prequeue_opens_at: json.opt_string("prequeueOpensAt")?,
            sold_out_message: sold_out_message(json)?,
            display_name_en: json.opt_string("displayNameEn")?,
            display_name_ko: json.opt_string("displayNameKo")?,
        })
    }
}

impl FromJson for Challenge {
    fn from_json(json: &Json) -> Option<Self> {
        Some(Self {
            challenge: json.string("challenge")?,
            difficulty: u8::try_from(json.int("difficulty")?).ok()?,
            expires_at_ms: json.int("expiresAtMs")?,
            algorithm: json.string("algorithm")?,
        })
    }
}

impl FromJson for OrderReceipt {
    fn from_json(json: &Json) -> Option<Self> {
        Some(Self {
            order_id: json.string("orderId")?,
            room: json.string("room")?,
            sku: json.string("sku")?,
            quantity: u32::try_from(json.int("quantity")?).ok()?,
        })
    }
}

impl FromJson for EmbeddingInfo {
    fn from_json(json: &Json) -> Option<Self> {
        let Json::Arr(origins) = json.get("allowedOrigins")? else {
            return None;
        };
        Some(Self {
            room: json.string("room")?,
            allowed_origins: origins
                .iter()
                .map(|o| o.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
            share_token_with_embedder: match json.get("shareTokenWithEmbedder")? {
                Json::Bool(b) => *b,
                _ => return None,
            },
        })
    }
}
