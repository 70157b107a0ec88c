//! The words of the closed loop (`autoRate`) and the origin's signals (English, Korean): the
//! panel's labels, the settings form's, and each reason of the loop in words with the numbers it
//! acted on ("origin p95 over target (900 ms > 500 ms)").

use vestibule_shared::auto_rate::AutoRateReason;

use super::{Lang, Text};
use crate::auto_rate::{ms_text, percent};

/// The English and Korean of the closed loop's texts.
pub(super) fn pair(text: Text) -> (&'static str, &'static str) {
    use Text::*;
    match text {
        AutoTitle => ("Closed-loop admission (autoRate)", "자동 입장 속도 조절 (autoRate)"),
        AutoBounds => ("Loop bounds and targets", "조절 범위와 목표"),
        AutoRateNow => ("Rate now", "현재 입장 속도"),
        AutoStep => ("This second", "지금 판단"),
        AutoLastChange => ("Last change", "마지막 변경"),
        AutoNoChangeYet => (
            "none yet (the leader has not moved the rate)",
            "아직 없음 (리더가 속도를 바꾸지 않음)",
        ),
        AutoNotStepped => ("waiting for the leader's first step", "리더의 첫 판단 대기 중"),
        AutoOff => (
            "autoRate is off: the rate is the operator's alone.",
            "autoRate 꺼짐: 입장 속도는 운영자가 정한 값입니다.",
        ),
        OriginP95 => ("Origin p95", "오리진 p95"),
        OriginP50 => ("Origin p50", "오리진 p50"),
        OriginErrors => ("Origin errors", "오리진 오류율"),
        OriginRequests => ("Origin requests (last few s)", "오리진 요청 (최근 몇 초)"),
        InFlight => ("in flight", "처리 중"),
        ChartP95 => ("Origin p95 latency and its target", "오리진 p95 지연과 목표"),
        ChartErrors => ("Origin error rate and its limit", "오리진 오류율과 한도"),
        Target => ("target", "목표"),
        ErrorLimit => ("limit", "한도"),
        Ms => ("ms", "ms"),
        Percent => ("%", "%"),
        Ago => ("ago", "전"),
        AutoRateSetting => ("Closed-loop admission (autoRate)", "자동 입장 속도 조절 (autoRate)"),
        AutoMin => ("autoRate min (people/s)", "autoRate 최소 (명/초)"),
        AutoMax => ("autoRate max (people/s)", "autoRate 최대 (명/초)"),
        AutoTargetP95 => ("autoRate target p95 (ms)", "autoRate 목표 p95 (ms)"),
        AutoMaxErrors => ("autoRate error limit (%)", "autoRate 오류율 한도 (%)"),
        AutoHealthUrl => (
            "autoRate health URL (optional; read each second)",
            "autoRate 상태 URL (선택, 매초 읽음)",
        ),
        AutoSignalsFrom => ("Signals read from", "신호를 읽는 URL"),
        AutoHelp => (
            "Each second the leader moves the rate within min–max: down when the origin's p95 or errors pass their limits, up while it has headroom. Off: the rate stays where the loop left it.",
            "리더가 매초 최소–최대 안에서 입장 속도를 조절합니다. 오리진의 p95나 오류율이 한도를 넘으면 낮추고, 여유가 있으면 높입니다. 끄면 마지막 속도가 유지됩니다.",
        ),
        Off => ("off", "꺼짐"),
        _ => ("?", "?"),
    }
}

/// The numbers a reason cites: the origin's signals the loop read and the room's targets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Numbers {
    /// The origin's p95 latency, ms, when known.
    pub p95_ms: Option<f64>,
    /// The origin's error rate (a fraction), when known.
    pub error_rate: Option<f64>,
    /// `autoRate.targetP95Ms`.
    pub target_p95_ms: u64,
    /// `autoRate.maxErrorRate` (a fraction).
    pub max_error_rate: f64,
}

/// Why the loop left the rate where it is, in words with its numbers:
/// "origin p95 over target (900 ms > 500 ms)".
pub fn reason_phrase(lang: Lang, reason: AutoRateReason, numbers: &Numbers) -> String {
    use AutoRateReason::*;
    let target = ms_text(numbers.target_p95_ms as f64);
    let limit = percent(numbers.max_error_rate);
    let ko = lang == Lang::Ko;
    match (reason, numbers.p95_ms, numbers.error_rate) {
        (LatencyHigh, Some(p95), _) if ko => {
            format!("오리진 p95가 목표 초과 ({} > {target})", ms_text(p95))
        }
        (LatencyHigh, Some(p95), _) => {
            format!("origin p95 over target ({} > {target})", ms_text(p95))
        }
        (LatencyHigh, None, _) if ko => format!("오리진 p95가 목표 초과 (목표 {target})"),
        (LatencyHigh, None, _) => format!("origin p95 over target ({target})"),
        (LatencyRising, Some(p95), _) if ko => {
            format!("오리진 p95가 상승 중 ({}, 목표 {target})", ms_text(p95))
        }
        (LatencyRising, Some(p95), _) => {
            format!("origin p95 rising ({}, target {target})", ms_text(p95))
        }
        (LatencyRising, None, _) if ko => format!("오리진 p95가 상승 중 (목표 {target})"),
        (LatencyRising, None, _) => format!("origin p95 rising (target {target})"),
        (ErrorsHigh, _, Some(errors)) if ko => {
            format!("오리진 오류율이 한도 초과 ({} > {limit})", percent(errors))
        }
        (ErrorsHigh, _, Some(errors)) => {
            format!("origin errors over limit ({} > {limit})", percent(errors))
        }
        (ErrorsHigh, _, None) if ko => format!("오리진 오류율이 한도 초과 (한도 {limit})"),
        (ErrorsHigh, _, None) => format!("origin errors over limit ({limit})"),
        (AtTarget, Some(p95), _) if ko => {
            format!("오리진 p95가 목표에 근접 ({}, 목표 {target})", ms_text(p95))
        }
        (AtTarget, Some(p95), _) => {
            format!(
                "origin p95 close to target ({}, target {target})",
                ms_text(p95)
            )
        }
        (Headroom, Some(p95), _) if ko => {
            format!("오리진에 여유 있음 (p95 {}, 목표 {target})", ms_text(p95))
        }
        (Headroom, Some(p95), _) => {
            format!(
                "origin well under its targets (p95 {} < {target})",
                ms_text(p95)
            )
        }
        (other, ..) => {
            let (en, ko_text) = match other {
                Headroom => ("origin well under its targets", "오리진에 여유 있음"),
                Probing => (
                    "probing near the origin's limit",
                    "오리진 한계 근처를 탐색 중",
                ),
                AtTarget => ("origin p95 close to target", "오리진 p95가 목표에 근접"),
                AtCapacity => (
                    "the origin answers less than it is sent",
                    "오리진이 받은 요청보다 적게 응답함",
                ),
                Settling => (
                    "the origin is draining its backlog after a cut",
                    "감속 후 오리진이 밀린 요청을 처리하는 중",
                ),
                LittleTraffic => (
                    "too few origin requests to judge",
                    "판단하기에 오리진 요청이 너무 적음",
                ),
                SignalsStale => (
                    "no fresh signals from the origin",
                    "오리진의 최근 신호 없음",
                ),
                SignalsLost => (
                    "no signals from the origin for 10 s",
                    "10초 넘게 오리진 신호 없음",
                ),
                AtMax => ("at the loop's max", "자동 조절 최대값"),
                Drained => (
                    "the origin's backlog is drained: back near its capacity",
                    "오리진의 밀린 요청이 해소됨: 용량 근처로 복귀",
                ),
                LatencyHigh | LatencyRising | ErrorsHigh => ("", ""),
            };
            if ko { ko_text } else { en }.to_owned()
        }
    }
}

/// What a step with `reason` does to the rate: "Holding", "Cutting".
pub fn step_verb(lang: Lang, reason: AutoRateReason) -> &'static str {
    use AutoRateReason::*;
    let (en, ko) = match reason {
        Headroom => ("Rising", "높이는 중"),
        Drained => ("Refilling", "다시 채우는 중"),
        Probing => ("Rising slowly", "조금씩 높이는 중"),
        LatencyHigh | ErrorsHigh => ("Cutting", "낮추는 중"),
        LatencyRising => ("Trimming", "조금 낮추는 중"),
        SignalsLost => ("Falling to min", "최소값으로 낮추는 중"),
        AtTarget | AtCapacity | Settling | LittleTraffic | SignalsStale | AtMax => {
            ("Holding", "유지")
        }
    };
    if lang == Lang::Ko {
        ko
    } else {
        en
    }
}

/// What a change with `reason` from `from` to `to` did: "Cut", "Raised".
pub fn change_verb(lang: Lang, reason: AutoRateReason, from: f64, to: f64) -> &'static str {
    use AutoRateReason::*;
    let (en, ko) = match reason {
        LatencyHigh | ErrorsHigh => ("Cut", "감속"),
        LatencyRising => ("Trimmed", "소폭 감속"),
        SignalsLost => ("Lowered to min", "최소값으로 낮춤"),
        Probing => ("Raised slowly", "조금 높임"),
        _ if to < from => ("Lowered", "낮춤"),
        _ => ("Raised", "높임"),
    };
    if lang == Lang::Ko {
        ko
    } else {
        en
    }
}
