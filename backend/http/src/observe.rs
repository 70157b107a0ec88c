//! What `/metrics` tells an operator beyond the process's own counters: every answer counted by
//! status and error code, and each room's figures read from the store at scrape time.
//!
//! Room gauges (`vestibule_waiting`, `vestibule_active_users`, `vestibule_admission_rate_measured`,
//! `vestibule_finish_rate_per_active_user`, `vestibule_cap_limited`) describe the room, not the
//! process: every replica reads them from the store when scraped (one `counts` call per room and
//! the pace the leader last published), so they are the same on every replica and never stale
//! after a leader change. Dashboards aggregate them with `max by (room)`, never `sum`. Counters
//! (`…_total`) count what this process did: `sum` them over replicas.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use std::fmt::Write as _;

use crate::state::AppState;
use vestibule_store::now_ms;

/// The error code an answer carries (`vestibule_shared::error_code`), left on the response as an
/// extension by whatever made the error body, for [`count_answers`].
#[derive(Debug, Clone, Copy)]
pub struct AnswerCode(pub &'static str);

/// Counts every answer of the API and the page in `vestibule_http_responses_total{status, code}`:
/// `code` is the JSON error code of a 4xx/5xx (`rate_limited`, `store_unavailable`, …) and
/// `none` for other answers.
pub async fn count_answers(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    count_answer(&response);
    response
}

/// What [`count_answers`] does to one answer (the router's answer layer calls it directly).
///
/// The counter of each (status, code) pair is registered once per serving thread and kept: a
/// labelled key built and looked up for every answer was 1–2% of a poll.
pub fn count_answer(response: &Response) {
    thread_local! {
        static COUNTERS: std::cell::RefCell<std::collections::HashMap<(u16, &'static str), metrics::Counter>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    let code = response
        .extensions()
        .get::<AnswerCode>()
        .map_or("none", |code| code.0);
    let status = response.status();
    COUNTERS.with_borrow_mut(|counters| {
        counters
            .entry((status.as_u16(), code))
            .or_insert_with(|| {
                metrics::counter!(
                    "vestibule_http_responses_total",
                    "status" => status_label(status),
                    "code" => code,
                )
            })
            .increment(1);
    });
}

/// A status code as a label value, without an allocation for the usual ones.
fn status_label(status: axum::http::StatusCode) -> metrics::SharedString {
    let label = match status.as_u16() {
        200 => "200",
        201 => "201",
        204 => "204",
        304 => "304",
        400 => "400",
        403 => "403",
        404 => "404",
        409 => "409",
        410 => "410",
        412 => "412",
        429 => "429",
        503 => "503",
        504 => "504",
        _ => return metrics::SharedString::from_owned(status.as_str().to_owned()),
    };
    metrics::SharedString::const_str(label)
}

/// A room's figures as the store has them now.
struct RoomFigures {
    room: String,
    waiting: u64,
    active: u64,
    admitted_per_sec: Option<f64>,
    finish_per_active_sec: Option<f64>,
    cap_limited: bool,
}

/// The room gauges in Prometheus text format, read from the store now (rooms sorted by slug).
/// A room whose counts the store cannot give is left out (and logged): the scrape still
/// answers, and the gap shows on the dashboard instead of a stale value.
pub async fn room_gauges(state: &AppState) -> String {
    let rooms = state.rooms.list();
    let mut figures = Vec::with_capacity(rooms.len());
    for room in rooms {
        let name = &room.name;
        match state.store.counts(room.id(), now_ms()).await {
            Ok(counts) => {
                let pace = room.pace();
                figures.push(RoomFigures {
                    room: name.clone(),
                    waiting: counts.waiting,
                    active: counts.active,
                    admitted_per_sec: pace.admitted_per_sec,
                    finish_per_active_sec: pace.finish_per_active_sec,
                    cap_limited: pace.cap_limited,
                });
            }
            Err(error) => {
                tracing::warn!(room = %name, %error, "room gauges left out of /metrics");
            }
        }
    }
    render(&figures)
}

/// Writes one gauge family (HELP, TYPE and one line per room that has a value).
fn family(
    out: &mut String,
    name: &str,
    help: &str,
    figures: &[RoomFigures],
    value: impl Fn(&RoomFigures) -> Option<f64>,
) {
    let lines: Vec<(&str, f64)> = figures
        .iter()
        .filter_map(|room| value(room).map(|v| (room.room.as_str(), v)))
        .collect();
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (room, v) in lines {
        // Room slugs are `[a-z0-9-]`: nothing to escape in the label.
        let _ = writeln!(out, "{name}{{room=\"{room}\"}} {v}");
    }
}

fn render(figures: &[RoomFigures]) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "vestibule_waiting",
        "Shoppers waiting (room-wide, from the store at scrape time: aggregate with max)",
        figures,
        |r| Some(r.waiting as f64),
    );
    family(
        &mut out,
        "vestibule_active_users",
        "Active users: tokens issued, not used, not expired (room-wide, from the store: aggregate with max)",
        figures,
        |r| Some(r.active as f64),
    );
    family(
        &mut out,
        "vestibule_admission_rate_measured",
        "Shoppers admitted per second over about the last minute (the leader's published measurement)",
        figures,
        |r| r.admitted_per_sec,
    );
    family(
        &mut out,
        "vestibule_finish_rate_per_active_user",
        "Finishes (orders, releases, expiries) per active user per second, last minute or so (published by the leader)",
        figures,
        |r| r.finish_per_active_sec,
    );
    family(
        &mut out,
        "vestibule_cap_limited",
        "1 when the leader's last tick left shoppers waiting because of the active-users cap",
        figures,
        |r| Some(f64::from(u8::from(r.cap_limited))),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_labels_are_the_codes() {
        use axum::http::StatusCode;
        for code in [
            200, 201, 204, 304, 400, 403, 404, 409, 410, 412, 418, 429, 500, 503, 504,
        ] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(&*super::status_label(status), status.as_str());
        }
    }

    #[test]
    fn unknown_pace_leaves_its_family_out_and_counts_always_show() {
        let text = render(&[RoomFigures {
            room: "main".into(),
            waiting: 5,
            active: 2,
            admitted_per_sec: None,
            finish_per_active_sec: Some(0.25),
            cap_limited: false,
        }]);
        assert!(
            text.contains("# TYPE vestibule_waiting gauge\nvestibule_waiting{room=\"main\"} 5\n")
        );
        assert!(text.contains("vestibule_active_users{room=\"main\"} 2\n"));
        assert!(!text.contains("vestibule_admission_rate_measured"));
        assert!(text.contains("vestibule_finish_rate_per_active_user{room=\"main\"} 0.25\n"));
        assert!(text.contains("vestibule_cap_limited{room=\"main\"} 0\n"));
    }

    #[test]
    fn no_rooms_render_nothing() {
        assert_eq!(render(&[]), "");
    }
}
