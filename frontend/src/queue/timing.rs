//! The queue's one timer and the browser's signals about the network and the tab: when the
//! next request goes (back-off after a failure, `Retry-After`, nothing while a polling tab is
//! hidden), and what `offline`, `online` and `visibilitychange` do.

use std::{rc::Rc, time::Duration};

use leptos::prelude::*;

use super::{Queue, OFFLINE_CHECK};
use crate::{
    connection::{ActiveTransport, Connection, Phase},
    i18n::Text,
};

impl Queue {
    pub(super) fn retry_later(
        self: &Rc<Self>,
        retry_after: Option<Duration>,
        server_answered: bool,
    ) {
        let delay = self.backoff.borrow_mut().next_delay(
            js_sys::Math::random(),
            retry_after,
            server_answered,
        );
        if self.offline.get() {
            self.view.connection.set(Connection::Offline);
            self.schedule(delay.max(OFFLINE_CHECK));
            return;
        }
        // A request that hung until its deadline has already waited; `Retry-After` counts
        // from the answer, so it is never shortened.
        let waited = Duration::from_millis(
            (js_sys::Date::now() - self.attempt_started.get()).max(0.0) as u64,
        );
        let remaining = match retry_after {
            Some(_) => delay,
            None => delay.saturating_sub(waited),
        };
        self.countdown.start(remaining);
        self.schedule(remaining);
    }

    /// Sets the one timer for the next request, replacing any other. While polling, nothing
    /// is scheduled in a hidden tab: becoming visible asks at once instead.
    pub(super) fn schedule(self: &Rc<Self>, delay: Duration) {
        self.cancel_timer();
        if self.view.transport.get_untracked() == ActiveTransport::Poll && document().hidden() {
            self.countdown.stop();
            self.view.connection.set(Connection::Hidden);
            return;
        }
        self.set_timer(delay);
    }

    /// Sets the one timer for the next request, replacing any other, hidden tab or not.
    pub(super) fn set_timer(self: &Rc<Self>, delay: Duration) {
        self.cancel_timer();
        let this = Rc::clone(self);
        let handle = set_timeout_with_handle(
            move || {
                this.timer.set(None);
                this.refresh();
            },
            delay,
        );
        self.timer.set(handle.ok());
    }

    pub(super) fn cancel_timer(&self) {
        if let Some(handle) = self.timer.take() {
            handle.clear();
        }
    }

    pub(super) fn on_visibility_change(self: &Rc<Self>) {
        if self.stopped.get() || self.view.transport.get_untracked() != ActiveTransport::Poll {
            return;
        }
        // Before the opening the join's timer runs whether the tab shows or not.
        if matches!(self.view.phase.get_untracked(), Phase::NotOpen { .. }) {
            return;
        }
        if document().hidden() {
            self.cancel_timer();
            self.countdown.stop();
            if !self.in_flight.get() {
                self.view.connection.set(Connection::Hidden);
            }
        } else {
            self.refresh();
        }
    }

    /// The browser lost its network: say so at once, stop the stream and any countdown, and
    /// wait for `online` (with a slow check in case it never comes).
    pub(super) fn on_offline(self: &Rc<Self>) {
        if self.stopped.get() {
            return;
        }
        self.offline.set(true);
        self.close_sse();
        self.countdown.stop();
        self.view.connection.set(Connection::Offline);
        self.lost_announced.set(true);
        self.say(Text::SayOffline);
        if !self.in_flight.get() {
            self.schedule(OFFLINE_CHECK);
        }
    }

    pub(super) fn on_online(self: &Rc<Self>) {
        let was_offline = self.offline.replace(false);
        if self.stopped.get() {
            return;
        }
        if was_offline || self.view.connection.get_untracked().is_lost() {
            self.backoff.borrow_mut().reset();
            self.view.connection.set(Connection::Reconnecting);
            self.refresh();
        }
    }
}
