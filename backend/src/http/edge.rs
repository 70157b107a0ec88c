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
//!   this module), the 431 of oversized header fields, and what every answer gets
//!   ([`super::finish_answer`]: security headers, `no-store` under `/api/`, JSON errors, …).
//! - [`IntakeLayer`] (innermost, in front of the routes): a request whose body is known to be empty
//!   and whose path no protected prefix matches goes straight to the routes; any other goes
//!   through `read_whole_body`, the default body limit and `require_entry_token`, as before.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::HttpBody as _;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures_util::future::Either;
use pin_project_lite::pin_project;
use tower::util::Oneshot;
use tower::{Layer, Service, ServiceExt as _};

use super::AnswerPolicy;
use crate::http::token_layer::Prefixes;

/// Makes [`Answers`]: the request span and what every answer gets.
#[derive(Clone)]
pub(super) struct AnswerLayer {
    pub policy: Arc<AnswerPolicy>,
}

impl<S> Layer<S> for AnswerLayer {
    type Service = Answers<S>;

    fn layer(&self, inner: S) -> Answers<S> {
        Answers {
            inner,
            policy: self.policy.clone(),
        }
    }
}

/// See [`AnswerLayer`].
#[derive(Clone)]
pub struct Answers<S> {
    inner: S,
    policy: Arc<AnswerPolicy>,
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
        let (inner, early) = match crate::http::error::check_header_size(request.headers()) {
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
        }
    }
}

pin_project! {
    /// The answer of [`Answers`]: the inner service's (or the early 431), finished.
    pub struct Answering<F> {
        #[pin]
        inner: Option<F>,
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
        let this = self.project();
        let _entered = this.span.as_ref().map(tracing::Span::enter);
        let response = match this.inner.as_pin_mut() {
            Some(inner) => match inner.poll(cx) {
                Poll::Ready(Ok(response)) => response,
                Poll::Ready(Err(never)) => match never {},
                Poll::Pending => return Poll::Pending,
            },
            None => this
                .early
                .take()
                .expect("an answering future without an inner one holds its early answer"),
        };
        let response = super::finish_answer(response, this.method, this.uri.path(), this.policy);
        if this.span.is_some() {
            tracing::debug!(status = response.status().as_u16(), "answered");
        }
        Poll::Ready(Ok(response))
    }
}

/// Makes [`Intake`] in front of `routes`: `slow` is the same routes behind the body and
/// entry-token middleware.
#[derive(Clone)]
pub(super) struct IntakeLayer {
    pub slow: Router,
    pub protected: Prefixes,
}

impl Layer<Router> for IntakeLayer {
    type Service = Intake;

    fn layer(&self, routes: Router) -> Intake {
        Intake {
            routes,
            slow: self.slow.clone(),
            protected: self.protected.clone(),
        }
    }
}

/// See [`IntakeLayer`].
#[derive(Clone)]
pub struct Intake {
    routes: Router,
    slow: Router,
    protected: Prefixes,
}

impl Service<Request> for Intake {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<<Router as Service<Request>>::Future, Oneshot<Router, Request>>;

    /// Always ready: a `Router` is.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if request.body().size_hint().exact() == Some(0)
            && !self.protected.matches(request.uri().path())
        {
            Either::Left(self.routes.call(request))
        } else {
            Either::Right(self.slow.clone().oneshot(request))
        }
    }
}

/// API answers carry tickets and tokens: never to be cached anywhere.
pub(super) fn no_store(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}
