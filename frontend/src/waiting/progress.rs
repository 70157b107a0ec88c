//! The waiting view's progress bar: how far along the line the shopper is.

use leptos::prelude::*;
use vestibule_shared::TicketState;

use crate::{
    connection::Phase,
    i18n::{t, Lang, Text},
};

/// How far along the line the shopper is, in percent, from the first position seen.
///
/// 0 at the starting position, approaching 100 at position 1 (100 means admitted).
pub fn progress_percent(starting_position: u64, position: u64) -> u8 {
    if starting_position == 0 {
        return 0;
    }
    let position = position.min(starting_position);
    ((starting_position - position) * 100 / starting_position) as u8
}

/// A `progressbar` from the first place seen (`starting`) to the turn. It means something while
/// waiting and once admitted; not for an ended or unknown place (hidden then).
#[component]
pub fn ProgressBar(
    lang: Lang,
    phase: RwSignal<Phase>,
    starting: RwSignal<Option<u64>>,
    joining: Signal<bool>,
) -> impl IntoView {
    let admitted = move || phase.with(Phase::is_admitted);
    let progress = move || {
        if admitted() {
            return 100;
        }
        match (starting.get(), phase.with(Phase::waiting_position)) {
            (Some(start), Some(position)) => progress_percent(start, position),
            _ => 0,
        }
    };
    let shown = move || admitted() || phase.with(Phase::ticket_state) == Some(TicketState::Waiting);
    view! {
        <div
            id="progress"
            class="progress"
            role="progressbar"
            hidden=super::shared(move || !(shown() || joining.get()))
            aria-label=t(lang, Text::Progress)
            aria-valuemin="0"
            aria-valuemax="100"
            aria-valuenow=super::shared(move || progress().to_string())
        >
            <div class="progress-fill" style:width=move || format!("{}%", progress())></div>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_starts_at_zero_and_grows_as_the_line_moves() {
        assert_eq!(progress_percent(200, 200), 0);
        assert_eq!(progress_percent(200, 100), 50);
        assert_eq!(progress_percent(200, 1), 99);
    }

    #[test]
    fn progress_is_clamped_when_the_position_is_above_the_start() {
        assert_eq!(progress_percent(10, 15), 0);
        assert_eq!(progress_percent(0, 5), 0);
        assert_eq!(progress_percent(1, 1), 0);
    }
}
