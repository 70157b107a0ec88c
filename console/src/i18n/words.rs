//! The words of the sale, the schedule and the settings form (English, Korean).

use super::{Lang, Text};
use crate::schedule::HeldBack;

/// The English and Korean of the texts [`super::pair`] does not hold.
pub(super) fn pair(text: Text) -> (&'static str, &'static str) {
    use Text::*;
    match text {
        Minutes => ("min", "분"),
        Hours => ("h", "시간"),
        PrequeueOpens => ("Pre-queue opens", "사전 대기 시작"),
        PrequeueOpened => ("Pre-queue opened", "사전 대기 시작됨"),
        SaleOpens => ("Sale opens", "판매 시작"),
        SaleOpened => ("Sale opened", "판매 시작됨"),
        DisplayNameEn => ("Display name (English)", "표시 이름 (영어)"),
        DisplayNameKo => ("Display name (Korean)", "표시 이름 (한국어)"),
        PrequeueOpensAt => ("Pre-queue opens at", "사전 대기 시작 시각"),
        OpensAt => ("Sale opens at", "판매 시작 시각"),
        TimeHelp => (
            "Your local time. Empty: no schedule (the room opens at once). The pre-queue needs a sale opening after it.",
            "이 컴퓨터의 현지 시각. 비우면 일정 없음(바로 열림). 사전 대기는 그 뒤의 판매 시작 시각이 있어야 합니다.",
        ),
        Stock => ("Stock (units left)", "재고 (남은 수량)"),
        QueueingMethod => ("Queueing method", "대기 순서 방식"),
        Fifo => ("First come, first served", "먼저 온 순서"),
        Random => ("Random (lottery)", "무작위 (추첨)"),
        ExpectedCheckout => ("Expected checkout (s)", "예상 결제 시간 (초)"),
        CheckoutUrl => ("Checkout URL", "결제 페이지 URL"),
        SoldOutMessageEn => ("Sold-out message (English)", "품절 안내문 (영어)"),
        SoldOutMessageKo => ("Sold-out message (Korean)", "품절 안내문 (한국어)"),
        Unlimited => ("unlimited", "무제한"),
        NoCap => ("no cap", "한도 없음"),
        NotSet => ("not set", "없음"),
        Yes => ("yes", "예"),
        No => ("no", "아니요"),
        Paused => ("Admission paused", "입장 일시 정지"),
        ClosedToJoins => ("Closed to new joins", "신규 입장 닫힘"),
        SoldOutSetting => ("Sold out (the sale ended)", "품절 (판매 종료)"),
        NotOpenYet => ("Not open yet", "오픈 전"),
        CreateSettings => (
            "Settings (optional: empty ones take the server's defaults)",
            "설정 (선택: 비운 값은 서버 기본값)",
        ),
        ConfirmChange => ("Apply these changes?", "다음과 같이 바꿀까요?"),
        JoinsAtOnce => (
            "Shoppers can join it at once.",
            "바로 입장할 수 있게 됩니다.",
        ),
        JoinsOnSchedule => (
            "Shoppers can join from the times set.",
            "정한 시각부터 입장할 수 있습니다.",
        ),
        EndSale => ("End the sale (sold out)", "판매 종료 (품절)"),
        ConfirmEndSale => (
            "End the sale? Everyone not yet admitted is told it is sold out and new joins are refused. This cannot be undone.",
            "판매를 종료할까요? 아직 입장하지 못한 모든 사람에게 품절로 안내되고 신규 입장이 거부됩니다. 되돌릴 수 없습니다.",
        ),
        StockLeft => ("Stock left", "남은 재고"),
        Sold => ("Sold", "판매됨"),
        TokensOutstanding => ("Tokens outstanding", "사용 전 입장권"),
        OutOfBounds => ("Out of bounds", "허용 범위를 벗어남"),
        HeldSoldOut => ("sold out", "품절"),
        HeldNotOpen => (
            "not open yet (joins are refused)",
            "오픈 전 (입장 거부 중)",
        ),
        HeldPreQueue => (
            "pre-queue: nobody is admitted before the opening's draw",
            "사전 대기: 판매 시작 추첨 전에는 입장 없음",
        ),
        HeldRateZero => ("admission rate is 0", "입장 속도가 0"),
        HeldNobodyWaiting => ("nobody waiting", "대기 인원 없음"),
        SaleSummary => ("Sale so far", "판매 요약"),
        Joined => ("Joined", "대기열 참여"),
        AdmittedTotal => ("Admitted", "입장 허용"),
        Ordered => ("Ordered", "주문"),
        ExpiredUnused => ("Abandoned (tokens expired unused)", "이탈 (미사용 만료 입장권)"),
        PeakLine => ("Longest line", "최대 대기 인원"),
        LongestWait => ("Longest wait", "최장 대기 시간"),
        SoldOutAt => ("Sold out at", "품절 시각"),
        NotSoldOut => ("not sold out", "품절 전"),
        _ => super::auto_words::pair(text),
    }
}

/// Why admission is below the configured rate, in words.
pub fn held_back_text(lang: Lang, held: HeldBack) -> &'static str {
    use vestibule_shared::WaitReason;
    let text = match held {
        HeldBack::SoldOut => Text::HeldSoldOut,
        HeldBack::NotOpen => Text::HeldNotOpen,
        HeldBack::PreQueue => Text::HeldPreQueue,
        HeldBack::RateZero => Text::HeldRateZero,
        HeldBack::NobodyWaiting => Text::HeldNobodyWaiting,
        HeldBack::Paused => return super::reason_text(lang, WaitReason::Paused),
        HeldBack::StockHeld => return super::reason_text(lang, WaitReason::StockHeld),
        HeldBack::CapReached => return super::reason_text(lang, WaitReason::CapReached),
        HeldBack::Eta(reason) => return super::reason_text(lang, reason),
    };
    super::t(lang, text)
}

/// A room's state label in words, and its CSS class.
pub fn label_text(lang: Lang, label: crate::schedule::Label) -> (&'static str, &'static str) {
    use crate::schedule::Label;
    use vestibule_shared::RoomState;
    let state = |state| super::state_text(lang, state);
    match label {
        Label::NotOpen => (super::t(lang, Text::NotOpenYet), "state state-notopen"),
        Label::PreQueue => (state(RoomState::PreQueue), "state state-prequeue"),
        Label::Open => (state(RoomState::Open), "state state-open"),
        Label::Paused => (state(RoomState::Paused), "state state-paused"),
        Label::Closed => (state(RoomState::Closed), "state state-closed"),
        Label::SoldOut => (state(RoomState::SoldOut), "state state-soldout"),
    }
}
