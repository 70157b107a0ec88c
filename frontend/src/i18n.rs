//! Every visible string of the page in English and Korean, and the ETA in words.

pub use vestibule_shared::lang::Lang;

/// A fixed string of the page; [`t`] gives its text in a language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text {
    WaitingRoom,
    Joining,
    JoiningDetail,
    CheckingBrowser,
    InLine,
    InLineDetail,
    PlaceKept,
    BeyondStock,
    RandomOrder,
    Paused,
    PausedDetail,
    YourTurn,
    YourTurnDetail,
    ContinueToCheckout,
    Completed,
    CompletedDetail,
    Expired,
    ExpiredDetail,
    Left,
    LeftDetail,
    JoinAgain,
    RoomNotFound,
    RoomNotFoundDetail,
    Failed,
    FailedDetail,
    TryAgain,
    Position,
    Ahead,
    Eta,
    EtaPaused,
    EtaUnknown,
    ReasonPaused,
    ReasonRateLowered,
    ReasonCapReached,
    ReasonCheckoutSlow,
    ReasonStockHeld,
    Progress,
    ConnConnecting,
    ConnLiveSse,
    ConnLivePoll,
    ConnHidden,
    ConnStopped,
    ConnReconnecting,
    ConnOffline,
    RetryNow,
    LeaveLine,
    LeaveQuestion,
    LeaveConfirm,
    StayInLine,
    SayOffline,
    SayConnectionLost,
    SayReconnected,
    SayPaused,
    SayResumed,
    SayYourTurn,
    Checkout,
    CheckoutTitle,
    NoTokenTitle,
    CheckoutIntro,
    Product,
    Quantity,
    PlaceOrder,
    PlacingOrder,
    NoToken,
    Ordered,
    OrderDone,
    OrderNumber,
    OrderExpired,
    OrderUsed,
    OrderFailed,
    OrderNetwork,
    OrderRetrying,
    BackToLine,
    SwitchLanguage,
    HandoffUnsent,
    HandoffRefused,
    PreQueue,
    PreQueueDetail,
    OpensIn,
    TicketTag,
    NotOpen,
    NotOpenDetail,
    ConnScheduled,
}

/// The text of `text` in `lang`.
pub fn t(lang: Lang, text: Text) -> &'static str {
    use Text::*;
    let (en, ko) = match text {
        WaitingRoom => ("Waiting room", "대기실"),
        Joining => ("Joining the line…", "대기 순번을 받는 중…"),
        CheckingBrowser => ("Checking your browser…", "브라우저를 확인하는 중…"),
        JoiningDetail => (
            "This takes a moment. Please keep this page open.",
            "잠시만 기다려 주세요. 이 페이지를 열어 두세요.",
        ),
        InLine => ("You're in line", "대기 중입니다"),
        PreQueue => ("The sale opens soon", "곧 판매가 시작됩니다"),
        PreQueueDetail => (
            "Your place will be drawn at the opening. Keep this page open.",
            "오픈 시각에 추첨으로 순번이 정해집니다. 이 페이지를 열어 두세요.",
        ),
        OpensIn => ("Opens in", "오픈까지"),
        NotOpen => ("Not open yet", "아직 열리지 않았습니다"),
        NotOpenDetail => (
            "This page joins the line by itself at the opening. Keep it open.",
            "오픈 시각에 이 페이지가 자동으로 줄을 섭니다. 이 페이지를 열어 두세요.",
        ),
        ConnScheduled => ("Waiting for the opening", "오픈을 기다리는 중"),
        TicketTag => ("Your ticket tag in the draw", "추첨 확인용 티켓 태그"),
        PlaceKept => (
            "Your place was kept while you were away.",
            "자리를 비운 동안에도 순서를 지켜 두었습니다.",
        ),
        RandomOrder => (
            "Random order: your place can move.",
            "무작위 순서: 순번이 바뀔 수 있습니다.",
        ),
        BeyondStock => (
            "There are fewer items left than people ahead of you: you may not get one.",
            "남은 수량이 앞선 대기 인원보다 적어 구매하지 못할 수도 있습니다.",
        ),
        InLineDetail => (
            "Keep this page open. When it's your turn, we'll take you to checkout automatically.",
            "이 페이지를 열어 두세요. 차례가 되면 결제 페이지로 자동으로 이동합니다.",
        ),
        Paused => ("Entry is paused", "입장이 일시 중지되었습니다"),
        PausedDetail => (
            "The shop has paused entry for a moment. You keep your place in line.",
            "쇼핑몰이 잠시 입장을 멈췄습니다. 대기 순번은 그대로 유지됩니다.",
        ),
        YourTurn => ("It's your turn!", "고객님 차례입니다!"),
        YourTurnDetail => ("Taking you to checkout…", "결제 페이지로 이동하는 중…"),
        ContinueToCheckout => ("Continue to checkout", "결제 페이지로 이동"),
        Completed => ("Your order is complete", "주문이 완료되었습니다"),
        CompletedDetail => (
            "Your entry was used for an order. Thank you!",
            "입장권이 주문에 사용되었습니다. 감사합니다!",
        ),
        Expired => ("Your time ran out", "시간이 만료되었습니다"),
        ExpiredDetail => (
            "Either your turn came and no order was placed before your entry ran out, or this \
             page was away from the line for longer than your place is kept. Join the line again \
             for a new place.",
            "차례가 되었지만 입장 시간 안에 주문하지 않았거나, 순서를 지켜 두는 시간보다 오래 \
             대기열을 떠나 있었습니다. 다시 줄을 서면 새 순번을 받습니다.",
        ),
        Left => ("You left the line", "대기열에서 나갔습니다"),
        LeftDetail => (
            "This ticket is no longer in the line.",
            "이 대기표는 더 이상 대기열에 없습니다.",
        ),
        JoinAgain => ("Join the line again", "다시 줄 서기"),
        RoomNotFound => (
            "This waiting room isn't open",
            "열려 있지 않은 대기실입니다",
        ),
        RoomNotFoundDetail => (
            "The room doesn't exist or has closed. Please check the link from the shop.",
            "존재하지 않거나 종료된 대기실입니다. 쇼핑몰에서 받은 링크를 확인해 주세요.",
        ),
        Failed => ("Something went wrong", "문제가 발생했습니다"),
        FailedDetail => (
            "The waiting room could not handle this request.",
            "대기실이 이 요청을 처리하지 못했습니다.",
        ),
        TryAgain => ("Try again", "다시 시도"),
        Position => ("Your place", "내 순번"),
        Ahead => ("People ahead", "앞선 대기자"),
        Eta => ("Estimated wait", "예상 대기 시간"),
        EtaPaused => ("paused", "일시 중지"),
        EtaUnknown => ("calculating…", "계산 중…"),
        ReasonPaused => (
            "The shop has paused entry for a moment; your place is kept.",
            "쇼핑몰이 입장을 잠시 멈췄습니다. 대기 순번은 유지됩니다.",
        ),
        ReasonRateLowered => (
            "The wait grew because the shop now lets fewer shoppers in per second.",
            "쇼핑몰이 초당 입장 인원을 줄여 대기 시간이 늘었습니다.",
        ),
        ReasonCapReached => (
            "The checkout is full: a new shopper enters each time someone there finishes.",
            "결제 화면이 가득 찼습니다. 결제를 마친 고객이 나올 때마다 다음 고객이 입장합니다.",
        ),
        ReasonCheckoutSlow => (
            "Shoppers at the checkout are taking longer than usual, so places free up slowly.",
            "결제 중인 고객이 평소보다 오래 걸려 입장이 천천히 진행됩니다.",
        ),
        ReasonStockHeld => (
            "Every item left is held by a shopper who has not bought yet; places free up only as their time runs out.",
            "남은 상품을 모두 아직 구매하지 않은 고객이 잡고 있습니다. 그 고객의 시간이 끝나야 다음 고객이 입장합니다.",
        ),
        Progress => ("Progress in line", "대기 진행률"),
        ConnConnecting => ("Connecting…", "연결 중…"),
        ConnLiveSse => ("Live updates", "실시간 업데이트 중"),
        ConnLivePoll => ("Updating automatically", "자동으로 업데이트 중"),
        ConnHidden => (
            "Updates pause while this tab is hidden",
            "탭이 가려져 있는 동안 업데이트를 멈춥니다",
        ),
        ConnStopped => ("Updates stopped", "업데이트 종료"),
        ConnReconnecting => (
            "Reconnecting… Your place is kept.",
            "다시 연결하는 중… 대기 순번은 유지됩니다.",
        ),
        ConnOffline => (
            "You're offline. Updates resume as soon as you're back online — your place is kept.",
            "오프라인 상태입니다. 다시 연결되면 바로 업데이트합니다. 대기 순번은 유지됩니다.",
        ),
        RetryNow => ("Retry now", "지금 다시 시도"),
        LeaveLine => ("Leave the line", "줄에서 나가기"),
        LeaveQuestion => (
            "Leave the line? You will lose your place.",
            "줄에서 나갈까요? 대기 순번을 잃게 됩니다.",
        ),
        LeaveConfirm => ("Yes, leave", "네, 나갈게요"),
        StayInLine => ("Stay in line", "계속 기다리기"),
        SayOffline => (
            "You're offline. Your place is kept.",
            "오프라인 상태입니다. 대기 순번은 유지됩니다.",
        ),
        SayConnectionLost => (
            "Connection lost. Your place is kept.",
            "연결이 끊겼습니다. 대기 순번은 유지됩니다.",
        ),
        SayReconnected => ("Reconnected.", "다시 연결되었습니다."),
        SayPaused => (
            "Entry is paused. You keep your place.",
            "입장이 일시 중지되었습니다. 대기 순번은 유지됩니다.",
        ),
        SayResumed => ("Entry has resumed.", "입장이 다시 시작되었습니다."),
        SayYourTurn => (
            "It's your turn! Taking you to checkout.",
            "고객님 차례입니다! 결제 페이지로 이동합니다.",
        ),
        Checkout => ("Checkout", "결제"),
        CheckoutTitle => ("You're in!", "입장하셨습니다!"),
        NoTokenTitle => ("Not your turn yet", "아직 입장 차례가 아닙니다"),
        CheckoutIntro => (
            "Complete your order while your entry is valid.",
            "입장권이 유효한 동안 주문을 완료해 주세요.",
        ),
        Product => ("Demo sneaker", "데모 스니커즈"),
        Quantity => ("Quantity: 1", "수량: 1"),
        PlaceOrder => ("Place order", "주문하기"),
        PlacingOrder => ("Placing order…", "주문하는 중…"),
        NoToken => (
            "No entry token was found in this tab. Please join the line first.",
            "이 탭에서 입장권을 찾을 수 없습니다. 먼저 줄을 서 주세요.",
        ),
        Ordered => ("Order placed.", "주문이 완료되었습니다."),
        OrderDone => ("Ordered", "주문 완료"),
        OrderNumber => ("Order number", "주문 번호"),
        OrderExpired => (
            "Your entry expired before the order. Please join the line again.",
            "주문 전에 입장권이 만료되었습니다. 다시 줄을 서 주세요.",
        ),
        OrderUsed => (
            "This entry was already used for an order.",
            "이 입장권은 이미 주문에 사용되었습니다.",
        ),
        OrderFailed => ("The order could not be placed.", "주문하지 못했습니다."),
        OrderNetwork => (
            "The order could not be sent. Check your connection and try again.",
            "주문을 보내지 못했습니다. 연결을 확인하고 다시 시도해 주세요.",
        ),
        OrderRetrying => (
            "No answer yet. Trying again — the order is placed only once.",
            "아직 응답이 없어 다시 시도하는 중입니다. 주문은 한 번만 접수됩니다.",
        ),
        BackToLine => ("Back to the waiting room", "대기실로 돌아가기"),
        SwitchLanguage => ("Language", "언어"),
        HandoffUnsent => (
            "It's your turn, but your entry could not be passed to the shop just now. Check your connection and try again.",
            "차례가 되었지만 지금은 입장 정보를 쇼핑몰에 전달하지 못했습니다. 연결을 확인하고 다시 시도해 주세요.",
        ),
        HandoffRefused => (
            "It's your turn, but the shop did not accept your entry. Please try again.",
            "차례가 되었지만 쇼핑몰이 입장을 받지 않았습니다. 다시 시도해 주세요.",
        ),
    };
    match lang {
        Lang::En => en,
        Lang::Ko => ko,
    }
}

/// A margin-adjusted ETA in words, rounded up to the minute: `"about 2 min"` / `"약 2분"`.
///
/// Rounding up keeps the promise honest: the server's ETA already includes its safety margin.
pub fn eta_words(lang: Lang, eta_secs: u64) -> String {
    if eta_secs < 60 {
        return match lang {
            Lang::En => "less than a minute".to_owned(),
            Lang::Ko => "1분 미만".to_owned(),
        };
    }
    let minutes = eta_secs.div_ceil(60);
    let (hours, rest) = (minutes / 60, minutes % 60);
    match (lang, hours, rest) {
        (Lang::En, 0, m) => format!("about {m} min"),
        (Lang::En, h, 0) => format!("about {h} h"),
        (Lang::En, h, m) => format!("about {h} h {m} min"),
        (Lang::Ko, 0, m) => format!("약 {m}분"),
        (Lang::Ko, h, 0) => format!("약 {h}시간"),
        (Lang::Ko, h, m) => format!("약 {h}시간 {m}분"),
    }
}

/// Whole minutes in words without "about": `"1 h 30 min"` / `"1시간 30분"`.
pub fn minutes_words(lang: Lang, minutes: u64) -> String {
    let (hours, rest) = (minutes / 60, minutes % 60);
    match (lang, hours, rest) {
        (Lang::En, 0, m) => format!("{m} min"),
        (Lang::En, h, 0) => format!("{h} h"),
        (Lang::En, h, m) => format!("{h} h {m} min"),
        (Lang::Ko, 0, m) => format!("{m}분"),
        (Lang::Ko, h, 0) => format!("{h}시간"),
        (Lang::Ko, h, m) => format!("{h}시간 {m}분"),
    }
}

/// The ETA range in words, each end rounded up to the minute: `"about 3–5 min"` /
/// `"약 3~5분"`; one figure when both ends round alike (see [`eta_words`]).
pub fn eta_range_words(lang: Lang, eta_secs: u64, high_secs: u64) -> String {
    let (low, high) = (eta_secs.div_ceil(60).max(1), high_secs.div_ceil(60).max(1));
    if high_secs < 60 || low >= high {
        return eta_words(lang, eta_secs.max(high_secs));
    }
    match (lang, high < 60) {
        (Lang::En, true) => format!("about {low}–{high} min"),
        (Lang::Ko, true) => format!("약 {low}~{high}분"),
        (Lang::En, false) => format!(
            "about {} – {}",
            minutes_words(lang, low),
            minutes_words(lang, high)
        ),
        (Lang::Ko, false) => format!(
            "약 {}~{}",
            minutes_words(lang, low),
            minutes_words(lang, high)
        ),
    }
}

/// Why the wait is longer than the rate alone makes it, in words (`None` for a code this page
/// does not know: it says nothing rather than something wrong).
pub fn reason_words(lang: Lang, reason: vestibule_shared::WaitReason) -> Option<&'static str> {
    use vestibule_shared::WaitReason;
    let text = match reason {
        WaitReason::Paused => Text::ReasonPaused,
        WaitReason::RateLowered => Text::ReasonRateLowered,
        WaitReason::CapReached => Text::ReasonCapReached,
        WaitReason::CheckoutSlow => Text::ReasonCheckoutSlow,
        WaitReason::StockHeld => Text::ReasonStockHeld,
        WaitReason::Other => return None,
    };
    Some(t(lang, text))
}

/// The connection line while retrying: `"Connection lost. Retrying in 4 s — your place is kept."`
pub fn retrying_in(lang: Lang, secs: u64) -> String {
    match lang {
        Lang::En => format!("Connection lost. Retrying in {secs} s — your place is kept."),
        Lang::Ko => {
            format!("연결이 끊겼습니다. {secs}초 후 다시 시도합니다. 대기 순번은 유지됩니다.")
        }
    }
}

/// What the live region says about a place in line, e.g. `"You are number 42 in line, …"`.
pub fn say_position(lang: Lang, position: u64, eta_secs: Option<u64>) -> String {
    let ahead = position.saturating_sub(1);
    let eta = eta_secs.map(|s| eta_words(lang, s));
    match (lang, eta) {
        (Lang::En, Some(eta)) => {
            format!("You are number {position} in line, {ahead} ahead of you. Wait: {eta}.")
        }
        (Lang::En, None) => format!("You are number {position} in line, {ahead} ahead of you."),
        (Lang::Ko, Some(eta)) => {
            format!("대기 순번 {position}번, 앞에 {ahead}명이 있습니다. 예상 대기 시간: {eta}.")
        }
        (Lang::Ko, None) => format!("대기 순번 {position}번, 앞에 {ahead}명이 있습니다."),
    }
}

/// When the entry token stops working, e.g. `"Your entry is valid until 09:05:00."`
pub fn valid_until(lang: Lang, time: &str) -> String {
    match lang {
        Lang::En => format!("Your entry is valid until {time}."),
        Lang::Ko => format!("입장권은 {time}까지 유효합니다."),
    }
}

#[cfg(test)]
mod tests;
