//! Paths and their rules: one table of request paths sent without an entry token, each with the
//! outcome the gate must give it. None of them may reach the origin.
//!
//! The rows are sent as raw requests: an HTTP client library would resolve dot segments and
//! escapes before sending, and those spellings are what the rows are about.

use vestibule_tests::Backend;

use crate::origin::Origin;
use crate::{gate_in_front_of, raw_exchange};

/// What the gate answers a request for a path that carries no entry token.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// 400 `bad_request` before any rule: the origin could resolve the path into a gated one,
    /// or the gate into an ungated one.
    BadRequest,
    /// 403 `entry_token_missing` to a client that is not a browser: a gated path.
    Gated,
    /// 303 to the waiting room at this `Location`, for a browser's navigation to a gated path.
    ToTheLine(&'static str),
    /// 404 `room_not_found`: a `{room}` rule naming no room.
    NoSuchRoom,
}

/// One row: the path as sent on the wire, why it is in the table, and its outcome.
struct PathCase {
    path: &'static str,
    why: &'static str,
    outcome: Outcome,
}

const fn row(path: &'static str, why: &'static str, outcome: Outcome) -> PathCase {
    PathCase { path, why, outcome }
}

/// The gate's rules are `/checkout=main` and `/rooms/{room}/pay` (see `gate_in_front_of`).
const PATH_CASES: &[PathCase] = &[
    // Dot segments and escapes an origin resolves after the gate matched (Envoy CVE-2019-9901,
    // gunicorn #2799, traefik #12961).
    row("/checkout/..%2fx", "escaped slash in a dot segment", Outcome::BadRequest),
    row("/checkout/..;/x", "matrix parameter on a dot segment", Outcome::BadRequest),
    row("/checkout/%2e%2e/x", "escaped dot segment", Outcome::BadRequest),
    row("/checkout/../products", "dot segment out of a gated path", Outcome::BadRequest),
    row("/checkout/x/../..", "dot segments above the root", Outcome::BadRequest),
    row("/checkout%00", "escaped NUL", Outcome::BadRequest),
    row("/%252e%252e/checkout", "double-escaped dot segment", Outcome::BadRequest),
    // Segments an origin may trim, and escapes that are not UTF-8 (Spring CVE-2016-5007, IIS
    // trailing dots; `%C0%AF` is an overlong `/`).
    row("/checkout%20", "escaped trailing space", Outcome::BadRequest),
    row("/checkout.", "trailing dot", Outcome::BadRequest),
    row("/checkout%2e", "escaped trailing dot", Outcome::BadRequest),
    row("/checkout%C0%AF", "escape that is not UTF-8", Outcome::BadRequest),
    row("/checkout./pay", "trailing dot inside the path", Outcome::BadRequest),
    row("/%20checkout", "escaped leading space", Outcome::BadRequest),
    // A format suffix names the same action (Rails, Spring MVC): gated with its path.
    row("/checkout.json", "format suffix", Outcome::Gated),
    row("/checkout.html?step=2", "format suffix and a query", Outcome::Gated),
    // A browser goes to the line and comes back to where it was going, by a same-origin path.
    row(
        "/checkout/pay?step=2&x=a%20b",
        "below a gated path, the query kept escaped",
        Outcome::ToTheLine("/_vestibule/?room=main&return=%2Fcheckout%2Fpay%3Fstep%3D2%26x%3Da%2520b"),
    ),
    row(
        "//checkout",
        "gated like `/checkout`; the way back has its slashes collapsed, never `//host`",
        Outcome::ToTheLine("/_vestibule/?room=main&return=%2Fcheckout"),
    ),
    row(
        "//checkout?step=2",
        "gated like `/checkout`, query kept",
        Outcome::ToTheLine("/_vestibule/?room=main&return=%2Fcheckout%3Fstep%3D2"),
    ),
    // `{room}` rules take the room from the path.
    row("/rooms/ghost/pay", "a room that does not exist", Outcome::NoSuchRoom),
    row(
        "/rooms/main%2Fx/pay",
        "an escaped slash stays in the `{room}` segment, as an origin routing on raw segments reads it",
        Outcome::NoSuchRoom,
    ),
];

/// A raw `GET path` on a connection that closes after the answer; a browser's `Accept` when
/// `browser`, no `Accept` otherwise.
fn request_for(path: &str, browser: bool) -> String {
    let accept = if browser {
        "Accept: text/html,application/xhtml+xml,*/*;q=0.8\r\n"
    } else {
        ""
    };
    format!("GET {path} HTTP/1.1\r\nHost: shop.test\r\n{accept}Connection: close\r\n\r\n")
}

/// The value of header `name` in a raw HTTP/1.1 answer (names compared without case).
fn header_of<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let head = answer.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_path_without_a_token_gets_the_outcome_of_its_rules_and_never_reaches_the_origin() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;
    for PathCase { path, why, outcome } in PATH_CASES {
        let browser = matches!(outcome, Outcome::ToTheLine(_));
        let answer = raw_exchange(&app, &request_for(path, browser)).await;
        let row = format!("row {path:?} ({why}), expected {outcome:?}");
        let (status, marker) = match outcome {
            Outcome::BadRequest => ("400", "bad_request"),
            Outcome::Gated => ("403", "entry_token_missing"),
            Outcome::ToTheLine(_) => ("303", ""),
            Outcome::NoSuchRoom => ("404", "room_not_found"),
        };
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{row}: {answer}"
        );
        assert!(answer.contains(marker), "{row}: {answer}");
        if let Outcome::ToTheLine(location) = outcome {
            assert_eq!(header_of(&answer, "location"), Some(*location), "{row}");
        }
        assert!(
            origin.paths().is_empty(),
            "{row}: the origin saw {:?}",
            origin.paths()
        );
    }
}
