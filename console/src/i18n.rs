//! Every visible string of the console in English and Korean.

pub use vestibule_shared::lang::Lang;

/// A fixed string of the console; [`t`] gives its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Text {
    Title,
    SignInTitle,
    SignInHelp,
    AdminToken,
    SignIn,
    SignOut,
    WrongToken,
    Language,
    Live,
    Connecting,
    Reconnecting,
    Rooms,
    Room,
    State,
    Waiting,
    Active,
    Rate,
    Admitted,
    Actions,
    Close,
    Reopen,
    Delete,
    NoRooms,
    CreateRoom,
    NewRoomSlug,
    SlugHelp,
    Create,
    ConfirmCreate,
    ConfirmClose,
    NotRunning,
    ConfirmReopen,
    ConfirmDelete,
    ConfirmForceDelete,
    Created,
    Deleted,
    PickRoom,
    JoinsPerSec,
    PollsPerSec,
    SseStreams,
    TokensUsed,
    TokensExpired,
    EtaBack,
    SlowedBy,
    Leader,
    OtherReplica,
    Configured,
    PerSec,
    People,
    Seconds,
    ChartLine,
    ChartRate,
    MinutesAgo,
    Now,
    Controls,
    RatePerSec,
    Cap,
    CapHelp,
    TokenTtl,
    MessageEn,
    MessageKo,
    MessageHelp,
    Apply,
    Pause,
    Resume,
    ConfirmBigChange,
    Applied,
    AuditMade,
    AuditUnavailable,
    NoChange,
    Calculator,
    CalculatorHelp,
    PoolSize,
    AvgCheckoutMs,
    Utilization,
    P95CheckoutSecs,
    SuggestedRate,
    SuggestedTtl,
    ApplySuggestion,
    Failed,
    NotOnThisServer,
    Loading,
}

/// The text of `text` in `lang`.
pub fn t(lang: Lang, text: Text) -> &'static str {
    let (en, ko) = pair(text);
    match lang {
        Lang::En => en,
        Lang::Ko => ko,
    }
}

fn pair(text: Text) -> (&'static str, &'static str) {
    use Text::*;
    match text {
        Title => ("Vestibule console", "Vestibule 운영 콘솔"),
        SignInTitle => ("Sign in", "로그인"),
        SignInHelp => (
            "Enter the admin token the server was started with (--admin-token). It is kept in this tab only.",
            "서버를 시작할 때 정한 관리자 토큰(--admin-token)을 입력하세요. 이 탭에만 보관됩니다.",
        ),
        AdminToken => ("Admin token", "관리자 토큰"),
        SignIn => ("Sign in", "로그인"),
        SignOut => ("Sign out", "로그아웃"),
        WrongToken => (
            "The server refused this token. Check it and sign in again.",
            "서버가 이 토큰을 거부했습니다. 확인 후 다시 로그인하세요.",
        ),
        Language => ("Language", "언어"),
        Live => ("Live", "실시간"),
        Connecting => ("Connecting…", "연결 중…"),
        Reconnecting => ("Connection lost, reconnecting…", "연결이 끊겨 다시 연결하는 중…"),
        Rooms => ("Rooms", "대기실 목록"),
        Room => ("Room", "대기실"),
        State => ("State", "상태"),
        Waiting => ("Waiting", "대기 인원"),
        Active => ("Active users", "입장 중"),
        Rate => ("Rate", "입장 속도"),
        Admitted => ("Admitted", "실제 입장"),
        Actions => ("Actions", "작업"),
        Close => ("Close", "닫기"),
        Reopen => ("Reopen", "다시 열기"),
        Delete => ("Delete", "삭제"),
        NoRooms => ("No rooms yet.", "아직 대기실이 없습니다."),
        CreateRoom => ("Create a room", "대기실 만들기"),
        NewRoomSlug => ("Room slug", "대기실 이름(slug)"),
        SlugHelp => (
            "Lowercase letters, digits and -, up to 64 (e.g. drop-7).",
            "영문 소문자, 숫자, - 만, 64자까지 (예: drop-7).",
        ),
        Create => ("Create", "만들기"),
        ConfirmClose => (
            "Close this room to new joins? Shoppers in line keep their places and are admitted.",
            "이 대기실의 신규 입장을 닫을까요? 대기 중인 사람은 순번을 유지하고 입장합니다.",
        ),
        ConfirmCreate => (
            "Create this room? Shoppers can join it at once.",
            "이 대기실을 만들까요? 바로 입장할 수 있게 됩니다.",
        ),
        NotRunning => (
            "This room is not running (deleted, or not yet seen by this server).",
            "이 대기실은 운영 중이 아닙니다 (삭제되었거나 아직 이 서버에 없음).",
        ),
        ConfirmReopen => ("Open this room to new joins again?", "신규 입장을 다시 열까요?"),
        ConfirmDelete => ("Delete this room?", "이 대기실을 삭제할까요?"),
        ConfirmForceDelete => (
            "People are still in this room. Delete it anyway and end every ticket?",
            "아직 사람이 있습니다. 그래도 삭제하고 모든 티켓을 끝낼까요?",
        ),
        Created => ("Room created.", "대기실을 만들었습니다."),
        Deleted => ("Room deleted.", "대기실을 삭제했습니다."),
        PickRoom => ("Pick a room to see it live.", "실시간으로 볼 대기실을 고르세요."),
        JoinsPerSec => ("Joins", "신규 대기"),
        PollsPerSec => ("Polls", "상태 조회"),
        SseStreams => ("SSE streams", "SSE 연결"),
        TokensUsed => ("Tokens used", "사용된 입장권"),
        TokensExpired => ("Tokens expired", "만료된 입장권"),
        EtaBack => ("Wait at the back of the line", "맨 뒤 예상 대기"),
        SlowedBy => ("Held back by", "대기 지연 원인"),
        Leader => ("Leader", "리더"),
        OtherReplica => ("another replica", "다른 레플리카"),
        Configured => ("configured", "설정값"),
        PerSec => ("/s", "/초"),
        People => ("people", "명"),
        Seconds => ("s", "초"),
        ChartLine => ("Waiting and active users", "대기 인원과 입장 중 인원"),
        ChartRate => (
            "Admitted per second, actual and configured",
            "초당 입장: 실제와 설정값",
        ),
        MinutesAgo => ("min ago", "분 전"),
        Now => ("now", "지금"),
        Controls => ("Controls", "설정"),
        RatePerSec => ("Admission rate (people/s)", "입장 속도 (명/초)"),
        Cap => ("Active-users cap", "동시 입장 한도"),
        CapHelp => ("Empty: no cap.", "비워 두면 한도 없음."),
        TokenTtl => ("Entry token TTL (s)", "입장권 유효 시간 (초)"),
        MessageEn => ("Message to waiters (English)", "대기자 안내문 (영어)"),
        MessageKo => ("Message to waiters (Korean)", "대기자 안내문 (한국어)"),
        MessageHelp => (
            "Shown above the position on every waiting page; empty: none. Up to 280 characters.",
            "모든 대기 화면의 순번 위에 표시됩니다. 비우면 없음. 280자까지.",
        ),
        Apply => ("Apply changes", "변경 적용"),
        Pause => ("Pause admission", "입장 일시 정지"),
        Resume => ("Resume admission", "입장 재개"),
        ConfirmBigChange => (
            "This changes admission by more than 2×. Apply it?",
            "입장량이 2배 넘게 바뀝니다. 적용할까요?",
        ),
        Applied => ("Applied.", "적용했습니다."),
        AuditMade => ("Audit log entries made", "기록된 감사 로그"),
        AuditUnavailable => (
            "The audit log could not be read",
            "감사 로그를 읽을 수 없습니다",
        ),
        NoChange => ("Nothing to change.", "바뀐 값이 없습니다."),
        Calculator => ("Capacity calculator", "처리 용량 계산기"),
        CalculatorHelp => (
            "Rate = pool ÷ average checkout seconds × utilization; token TTL = P95 checkout time × 1.5; expected checkout (the ETA's pace until checkouts are measured) = P95 ÷ 2.",
            "입장 속도 = 커넥션 풀 ÷ 평균 결제 시간(초) × 목표 사용률, 입장권 유효 시간 = 결제 시간 P95 × 1.5, 예상 결제 시간(결제가 측정되기 전 예상 대기 시간의 기준) = P95 ÷ 2.",
        ),
        PoolSize => ("Checkout connection pool size", "결제 커넥션 풀 크기"),
        AvgCheckoutMs => ("Average checkout time (ms)", "평균 결제 시간 (ms)"),
        Utilization => ("Utilization target (%)", "목표 사용률 (%)"),
        P95CheckoutSecs => ("P95 checkout time (s)", "결제 시간 P95 (초)"),
        SuggestedRate => ("Admission rate", "입장 속도"),
        SuggestedTtl => ("Token TTL", "입장권 유효 시간"),
        ApplySuggestion => ("Apply to this room", "이 대기실에 적용"),
        Failed => ("Failed", "실패"),
        NotOnThisServer => (
            "this server does not offer it (404)",
            "이 서버에는 없는 기능입니다 (404)",
        ),
        Loading => ("Loading…", "불러오는 중…"),
    }
}

/// Why admission is below the configured rate for the back of the line (a ticket's `reason`).
pub fn reason_text(lang: Lang, reason: vestibule_shared::WaitReason) -> &'static str {
    use vestibule_shared::WaitReason::*;
    let (en, ko) = match reason {
        Paused => ("paused", "일시 정지"),
        RateLowered => ("rate lowered recently", "최근 입장 속도 낮춤"),
        CapReached => ("cap on active users reached", "동시 입장 한도 도달"),
        CheckoutSlow => (
            "slow checkouts (tokens held over half the TTL)",
            "결제 지연 (입장권을 TTL의 절반 넘게 보유)",
        ),
        StockHeld => (
            "stock held by unused tokens",
            "사용되지 않은 입장권이 재고를 잡고 있음",
        ),
        Other => ("other", "기타"),
    };
    match lang {
        Lang::En => en,
        Lang::Ko => ko,
    }
}

/// A room state's words (`OPEN` → "Open" / "진행 중").
pub fn state_text(lang: Lang, state: vestibule_shared::RoomState) -> &'static str {
    use vestibule_shared::RoomState::*;
    let (en, ko) = match state {
        Open => ("Open", "진행 중"),
        Paused => ("Paused", "일시 정지"),
        PreQueue => ("Pre-queue", "사전 대기"),
        SoldOut => ("Sold out", "품절"),
        Closed => ("Closed", "닫힘"),
    };
    match lang {
        Lang::En => en,
        Lang::Ko => ko,
    }
}
