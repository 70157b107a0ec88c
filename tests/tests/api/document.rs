//! The OpenAPI document stands on its own and says what the server does: no description points
//! at a file, an issue or a Rust item a reader of the document does not have, and the facts a
//! client is built on (the entry token's form, the final statuses of a stream, what a 504 asks
//! for) match the server's own answers.

use serde_json::Value;
use vestibule_shared::TicketState;
use vestibule_tests::{Backend, TestApp};

/// Every `description` and `summary` of the document, with where it is.
fn descriptions(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let here = format!("{at}/{key}");
                match value {
                    Value::String(text) if key == "description" || key == "summary" => {
                        out.push((here, text.clone()));
                    }
                    other => descriptions(other, &here, out),
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                descriptions(item, &format!("{at}/{index}"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_self_contained_and_true_to_the_server() {
    let app = TestApp::spawn(Backend::Memory, &["--admission-rate", "100"]).await;
    let (_, document) = app.get_json("/api/v1/openapi.json").await;
    let mut all = Vec::new();
    descriptions(&document, "", &mut all);
    assert!(all.len() > 100, "{} descriptions", all.len());
    let pointing: Vec<&(String, String)> = all
        .iter()
        .filter(|(_, text)| {
            ["docs/", ".md", "README", "issue ", "[`"]
                .iter()
                .any(|pointer| text.contains(pointer))
                || text.as_bytes().windows(4).any(|w| {
                    w[0].is_ascii_alphabetic() && &w[1..3] == b"::" && w[3].is_ascii_alphabetic()
                })
        })
        .collect();
    assert!(
        pointing.is_empty(),
        "descriptions that point outside the document: {pointing:#?}"
    );

    // The entry token is what the document says: a JWT, not a short random string.
    let (_, token) = app.admitted("main").await;
    assert_eq!(token.split('.').count(), 3, "{token}");
    let described = document["components"]["schemas"]["TicketStatus"]["properties"]["entryToken"]
        ["description"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(described.contains("JWT"), "{described}");
    assert!(
        (300..=500).contains(&token.len()) && described.contains("about 400 characters"),
        "the token is {} characters, the document says: {described}",
        token.len()
    );

    // The stream names every final status.
    let stream = document["paths"]["/api/v1/rooms/{room}/tickets/{ticketId}/events"]["get"]
        ["description"]
        .as_str()
        .unwrap_or_default();
    for state in [
        TicketState::Completed,
        TicketState::Expired,
        TicketState::Left,
        TicketState::SoldOut,
    ] {
        assert!(state.is_terminal());
        assert!(stream.contains(state.as_str()), "{state:?}: {stream}");
    }

    // A leave takes no Idempotency-Key, so its 504 must not ask for one alone.
    let leave = &document["paths"]["/api/v1/rooms/{room}/tickets/{ticketId}"]["delete"];
    assert!(
        leave["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|p| p["name"] != "Idempotency-Key"),
        "{leave}"
    );
    let timeout = leave["responses"]["504"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(timeout.contains("a leave"), "{timeout}");
}
