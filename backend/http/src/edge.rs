//! The two layers every request passes, as plain tower services.
//!
//! They did the same work as `axum::middleware::from_fn` functions, and the request span came from
//! `tower_http`'s `TraceLayer`. A `from_fn` layer boxes its future and clones the whole stack
//! below it (boxed again) on every request; with three of them and the trace layer's wrapped body,
//! the layers cost a join ~17k instructions of ~80k, against ~1.5k for a bare axum route
//! (callgrind; BENCHMARKS.md "Layers as plain services"). Here the common request (no body, no
//! protected path) goes straight through with one small future per layer, and the rest takes the
//! unchanged middleware (`read_whole_body`, `require_entry_token`).
//!
//! - [`AnswerLayer`] (outermost): the request span at `debug` (built only when `debug` is on for
//!   this module), the 431 of oversized header fields, the request timeout (408), and what every
//!   answer gets ([`super::finish_answer`]: security headers, `no-store` under `/api/`, JSON
//!   errors, …). The timeout counts from the request's arrival, but its timer is made only when
//!   the routes do not answer at once: most polls are answered from memory on their first poll,
//!   and `tower_http`'s timeout layer made and dropped a timer for each (~0.8k instructions of a
//!   poll's ~32k, callgrind).
//! - [`IntakeLayer`] (innermost, in front of the routes): a request whose body is known to be empty
//!   and whose path no protected prefix matches goes straight to the routes; any other goes
//!   through `read_whole_body`, the default body limit and `require_entry_token`. Of
//!   those straight ones, the two a sale is made of, a poll and a join ([`hot_route`]), call
//!   their handlers without the router: its match, the path parameters percent-decoded into a
//!   map in the request's extensions and the `Path` extractor's deserialising cost a poll ~6.5k
//!   instructions of ~32k (callgrind), for the same two strings.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::HttpBody as _;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures_util::future::Either;
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower::util::Oneshot;
use tower::{Layer, Service, ServiceExt as _};

use axum::extract::State;

use super::AnswerPolicy;
use crate::error::Path;
use crate::state::AppState;
use crate::tickets;
use crate::token_layer::Prefixes;

/// Makes [`Answers`]: the request span, the request timeout and what every answer gets.
#[derive(Clone)]
pub(super) struct AnswerLayer {
    pub policy: Arc<AnswerPolicy>,
    /// How long the routes may take to answer (`--request-timeout-secs`), counted from the
    /// request's arrival; then 408 `request_timeout`.
    pub timeout: Duration,
}

impl<S> Layer<S> for AnswerLayer {
    type Service = Answers<S>;

    fn layer(&self, inner: S) -> Answers<S> {
        Answers {
            inner,
            policy: self.policy.clone(),
            timeout: self.timeout,
        }
    }
}

/// See [`AnswerLayer`].
#[derive(Clone)]
pub struct Answers<S> {
    inner: S,
    policy: Arc<AnswerPolicy>,
    timeout: Duration,
}

impl<S> Service<Request> for Answers<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answering<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let method = request.method().clone();
        // For an error's log line; a clone of the URI's shared bytes, not a copy.
        let uri = request.uri().clone();
        let span = tracing::enabled!(tracing::Level::DEBUG).then(|| {
            tracing::debug_span!(
                "request",
                method = %method,
                path = %super::redacted_path(uri.path()),
            )
        });
        let (inner, early) = match crate::error::check_header_size(request.headers()) {
            Ok(()) => {
                let _entered = span.as_ref().map(tracing::Span::enter);
                (Some(self.inner.call(request)), None)
            }
            Err(error) => (None, Some(error.into_response())),
        };
        Answering {
            inner,
            early,
            method,
            uri,
            policy: self.policy.clone(),
            span,
            deadline_at: tokio::time::Instant::now() + self.timeout,
            deadline: None,
        }
    }
}

pin_project! {
    /// The answer of [`Answers`]: the inner service's (or the early 431, or the 408 of the
    /// timeout), finished.
    pub struct Answering<F> {
        #[pin]
        inner: Option<F>,
        // The timer of `deadline_at`, made the first time `inner` is pending.
        #[pin]
        deadline: Option<Sleep>,
        deadline_at: tokio::time::Instant,
        early: Option<Response>,
        method: Method,
        uri: Uri,
        policy: Arc<AnswerPolicy>,
        span: Option<tracing::Span>,
    }
}

impl<F> Future for Answering<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.as_ref().map(tracing::Span::enter);
        // The deadline is looked at before the routes, as `tower_http`'s timeout did: when a
        // store timeout of the same length falls due in the same timer tick, the answer is the
        // request's 408, not the store's 503/504.
        let due = |deadline: Pin<&mut Option<Sleep>>, cx: &mut Context<'_>| {
            deadline
                .as_pin_mut()
                .is_some_and(|deadline| deadline.poll(cx).is_ready())
        };
        let response = if this.inner.is_none() {
            this.early
                .take()
                .expect("an answering future without an inner one holds its early answer")
        } else if due(this.deadline.as_mut(), cx) {
            this.inner.set(None);
            StatusCode::REQUEST_TIMEOUT.into_response()
        } else {
            let inner = this.inner.as_mut().as_pin_mut();
            match inner.map(|inner| inner.poll(cx)) {
                Some(Poll::Ready(Ok(response))) => response,
                Some(Poll::Ready(Err(never))) => match never {},
                _ => {
                    if this.deadline.is_some() {
                        return Poll::Pending;
                    }
                    // The timer of the first wait (registered by this poll; due already if the
                    // routes took the whole timeout to get here).
                    this.deadline
                        .set(Some(tokio::time::sleep_until(*this.deadline_at)));
                    if !due(this.deadline.as_mut(), cx) {
                        return Poll::Pending;
                    }
                    this.inner.set(None);
                    StatusCode::REQUEST_TIMEOUT.into_response()
                }
            }
        };
        let response = super::finish_answer(response, this.method, this.uri.path(), this.policy);
        if this.span.is_some() {
            tracing::debug!(status = response.status().as_u16(), "answered");
        }
        Poll::Ready(Ok(response))
    }
}

/// Makes [`Intake`] in front of `routes`: `slow` is the same routes behind the body and
/// entry-token middleware; `state` is what the hot routes' handlers are called with.
#[derive(Clone)]
pub(super) struct IntakeLayer {
    pub slow: Router,
    pub protected: Prefixes,
    pub state: AppState,
}

impl Layer<Router> for IntakeLayer {
    type Service = Intake;

    fn layer(&self, routes: Router) -> Intake {
        Intake {
            routes,
            slow: self.slow.clone(),
            protected: self.protected.clone(),
            state: self.state.clone(),
        }
    }
}

/// See [`IntakeLayer`].
#[derive(Clone)]
pub struct Intake {
    routes: Router,
    slow: Router,
    protected: Prefixes,
    state: AppState,
}

/// A route [`Intake`] takes without the router (see [`hot_route`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HotRoute<'a> {
    /// `GET /api/v1/rooms/{room}/tickets/{ticketId}` (`tickets::poll`).
    Poll {
        /// The `{room}` segment, as the router would give it.
        room: &'a str,
        /// The `{ticketId}` segment, as the router would give it.
        ticket_id: &'a str,
    },
    /// `POST /api/v1/rooms/{room}/tickets` (`tickets::join`).
    Join {
        /// The `{room}` segment, as the router would give it.
        room: &'a str,
    },
}

/// The hot route a request's method and path name, if any: only where the router would choose
/// the same handler with the same parameters (each parameter a non-empty segment with no `%`,
/// which percent-decoding leaves as it is; no route is more specific than these two). Anything
/// else (`HEAD`, an encoded segment, a trailing `/`, …) is left to the router.
pub(crate) fn hot_route<'a>(method: &Method, path: &'a str) -> Option<HotRoute<'a>> {
    fn segment(text: &str) -> Option<&str> {
        (!text.is_empty() && !text.contains(['/', '%'])).then_some(text)
    }
    let rest = path.strip_prefix("/api/v1/rooms/")?;
    let (room, rest) = rest.split_once('/')?;
    let room = segment(room)?;
    if *method == Method::GET {
        let ticket_id = segment(rest.strip_prefix("tickets/")?)?;
        Some(HotRoute::Poll { room, ticket_id })
    } else if *method == Method::POST && rest == "tickets" {
        Some(HotRoute::Join { room })
    } else {
        None
    }
}

/// A hot route's answer: its handler's future, boxed (its type has no name).
type HotFuture = futures_util::future::BoxFuture<'static, Result<Response, Infallible>>;

impl Intake {
    /// Calls the handler of a hot route, as the router would have, or gives the request back.
    fn hot(&self, request: Request) -> Either<HotFuture, Request> {
        // The parameters copied out before the request is taken apart.
        let parameters = match hot_route(request.method(), request.uri().path()) {
            Some(HotRoute::Poll { room, ticket_id }) => {
                (room.to_owned(), Some(ticket_id.to_owned()))
            }
            Some(HotRoute::Join { room }) => (room.to_owned(), None),
            None => return Either::Right(request),
        };
        let state = self.state.clone();
        Either::Left(match parameters {
            (room, Some(ticket_id)) => Box::pin(async move {
                let answer = tickets::poll(State(state), Path((room, ticket_id))).await;
                Ok(answer.into_response())
            }),
            (room, None) => {
                let (parts, _empty) = request.into_parts();
                Box::pin(async move {
                    let answer =
                        tickets::join(State(state), Path(room), parts.headers, parts.extensions)
                            .await;
                    Ok(answer.into_response())
                })
            }
        })
    }
}

impl Service<Request> for Intake {
    type Response = Response;
    type Error = Infallible;
    type Future =
        Either<Either<<Router as Service<Request>>::Future, Oneshot<Router, Request>>, HotFuture>;

    /// Always ready: a `Router` is.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if request.body().size_hint().exact() == Some(0)
            && !self.protected.matches(request.uri().path())
        {
            match self.hot(request) {
                Either::Left(hot) => Either::Right(hot),
                Either::Right(request) => Either::Left(Either::Left(self.routes.call(request))),
            }
        } else {
            Either::Left(Either::Right(self.slow.clone().oneshot(request)))
        }
    }
}

/// API answers carry tickets and tokens: never to be cached anywhere.
pub(super) fn no_store(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests;
