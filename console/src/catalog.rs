//! Every room's settings (`GET …/admin/rooms`), for what the figures stream does not carry:
//! display names and the two opening times. Read at sign-in, whenever the stream's rooms differ
//! from it, every 15 s, and updated by each change made here.

use std::collections::HashMap;

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::Value;

use crate::api;
use crate::i18n::Lang;
use crate::local_time::parse_rfc3339;
use crate::schedule::Times;
use crate::state::Console;

/// How often the settings are read again while the rooms stay the same.
const REFRESH_MS: u64 = 15_000;

/// Reads every room's settings into `console.catalog`.
pub fn refresh(console: Console) {
    spawn_local(async move {
        match api::call("GET", "admin/rooms", None).await {
            Ok(answer) => {
                let rooms: HashMap<String, Value> = answer.body["rooms"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|room| Some((room["room"].as_str()?.to_owned(), room.clone())))
                    .collect();
                console.catalog.set(rooms);
            }
            Err(error) if error.is_auth() => console.sign_out(true),
            // A server without rooms at run time: names and times stay unknown.
            Err(_) => {}
        }
    });
}

/// Refreshes the catalog when the stream's rooms are not the ones it holds, or it is old.
pub fn follow(console: Console) {
    let read_at = StoredValue::new(0_u64);
    Effect::new(move |_| {
        let Some((at_ms, rooms)) = console.latest.with(|latest| {
            latest.as_ref().map(|event| {
                let rooms: Vec<String> = event.rooms.iter().map(|r| r.room.clone()).collect();
                (event.at_ms, rooms)
            })
        }) else {
            return;
        };
        let known = console.catalog.with_untracked(|catalog| {
            catalog.len() == rooms.len() && rooms.iter().all(|room| catalog.contains_key(room))
        });
        if !known && at_ms >= read_at.get_value() + 2_000
            || at_ms >= read_at.get_value() + REFRESH_MS
        {
            read_at.set_value(at_ms);
            refresh(console);
        }
    });
}

/// The room's name for people in `lang` (else the other language's), if it has one.
pub fn display_name(lang: Lang, settings: Option<&Value>) -> Option<String> {
    let settings = settings?;
    let (first, second) = match lang {
        Lang::En => ("displayNameEn", "displayNameKo"),
        Lang::Ko => ("displayNameKo", "displayNameEn"),
    };
    settings[first]
        .as_str()
        .or_else(|| settings[second].as_str())
        .map(str::to_owned)
}

/// The two opening times of settings.
pub fn times(settings: Option<&Value>) -> Times {
    let at = |field: &str| {
        settings
            .and_then(|settings| settings[field].as_str())
            .and_then(parse_rfc3339)
    };
    Times {
        prequeue_ms: at("prequeueOpensAt"),
        opens_ms: at("opensAt"),
    }
}
