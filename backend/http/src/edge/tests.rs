use super::*;

/// [`Answers`] around `inner` with a request timeout of 50 ms.
fn with_timeout_of_50_ms<S>(inner: S) -> Answers<S> {
    let policy = Arc::new(AnswerPolicy {
        retry_after_secs: 2,
        frame_ancestors: HeaderValue::from_static("frame-ancestors 'self'"),
    });
    AnswerLayer {
        policy,
        timeout: Duration::from_millis(50),
    }
    .layer(inner)
}

/// A bodiless join request.
fn a_join() -> Request {
    Request::builder()
        .method(Method::POST)
        .uri("/api/v1/rooms/main/tickets")
        .body(axum::body::Body::empty())
        .expect("a request")
}

/// The request timeout counts from the request's arrival, not from the first time the routes
/// are waited on (a timer started late lets a store timeout equal to the request timeout win the
/// race: 504 instead of 408).
#[tokio::test(start_paused = true)]
async fn the_request_timeout_counts_from_the_arrival() {
    let never = tower::service_fn(|_request: Request| {
        std::future::pending::<Result<Response, Infallible>>()
    });
    let mut answers = with_timeout_of_50_ms(never);
    let mut answer = Box::pin(answers.call(a_join()));
    // Not polled for 40 ms after it arrived (a busy thread), then waited on.
    tokio::time::advance(Duration::from_millis(40)).await;
    assert!(futures_util::poll!(answer.as_mut()).is_pending());
    tokio::time::advance(Duration::from_millis(11)).await;
    let answer = match futures_util::poll!(answer.as_mut()) {
        Poll::Ready(Ok(answer)) => answer,
        Poll::Ready(Err(never)) => match never {},
        Poll::Pending => panic!("still pending 51 ms after the arrival, with a 50-ms timeout"),
    };
    assert_eq!(answer.status(), StatusCode::REQUEST_TIMEOUT);
    let body = axum::body::to_bytes(answer.into_body(), 1024)
        .await
        .expect("a body");
    assert!(String::from_utf8_lossy(&body).contains("request_timeout"));
}

const ID: &str = "Zb3n0W6m1q8VqL2pX9cT4A";

/// At a tie (the routes' own timeout of the same length, as a store timeout equal to the
/// request timeout), the answer is the request's 408, as with `tower_http`'s timeout.
#[tokio::test(start_paused = true)]
async fn at_a_tie_the_request_timeout_answers() {
    let store_timeout = tower::service_fn(|_request: Request| async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok::<_, Infallible>(StatusCode::SERVICE_UNAVAILABLE.into_response())
    });
    let mut answers = with_timeout_of_50_ms(store_timeout);
    let mut answer = Box::pin(answers.call(a_join()));
    assert!(futures_util::poll!(answer.as_mut()).is_pending());
    tokio::time::advance(Duration::from_millis(50)).await;
    match futures_util::poll!(answer.as_mut()) {
        Poll::Ready(Ok(answer)) => assert_eq!(answer.status(), StatusCode::REQUEST_TIMEOUT),
        Poll::Ready(Err(never)) => match never {},
        Poll::Pending => panic!("both timers are due"),
    }
}

/// `hot_route` takes every `GET /api/v1/rooms/{a}/tickets/{b}` and `POST
/// /api/v1/rooms/{a}/tickets` for the two handlers: a documented route the router would
/// prefer for some of those paths (a static segment where they have a parameter) would be
/// shadowed. None may exist.
#[test]
fn no_documented_route_is_shadowed_by_a_hot_route() {
    let (_, document) = crate::documented_routes();
    let hot_shape = |path: &str, method: &Method| {
        let segments: Vec<&str> = path.split('/').collect();
        match segments.as_slice() {
            ["", "api", "v1", "rooms", _, "tickets", _] => *method == Method::GET,
            ["", "api", "v1", "rooms", _, "tickets"] => *method == Method::POST,
            _ => false,
        }
    };
    let mut hot = 0;
    for (path, item) in &document.paths.paths {
        let methods = [
            (Method::GET, item.get.is_some()),
            (Method::POST, item.post.is_some()),
        ];
        for (method, declared) in methods {
            if declared && hot_shape(path, &method) {
                hot += 1;
                assert!(
                    path == "/api/v1/rooms/{room}/tickets/{ticketId}"
                        || path == "/api/v1/rooms/{room}/tickets",
                    "{method} {path} would be taken by a hot route"
                );
            }
        }
    }
    assert_eq!(
        hot, 2,
        "the poll and the join are declared where hot_route expects them"
    );
}

#[test]
fn hot_routes_are_only_what_the_router_would_route_alike() {
    let poll = |room, ticket_id| Some(HotRoute::Poll { room, ticket_id });
    let cases: &[(Method, String, Option<HotRoute<'_>>)] = &[
        (
            Method::GET,
            format!("/api/v1/rooms/main/tickets/{ID}"),
            poll("main", ID),
        ),
        // Not a well-formed id: the handler's own 400, as through the router.
        (
            Method::GET,
            "/api/v1/rooms/main/tickets/short".into(),
            poll("main", "short"),
        ),
        (
            Method::POST,
            "/api/v1/rooms/main/tickets".into(),
            Some(HotRoute::Join { room: "main" }),
        ),
        (
            Method::POST,
            "/api/v1/rooms/Bad_Room/tickets".into(),
            Some(HotRoute::Join { room: "Bad_Room" }),
        ),
        // Left to the router: encoded segments, other methods and shapes.
        (
            Method::GET,
            format!("/api/v1/rooms/m%61in/tickets/{ID}"),
            None,
        ),
        (
            Method::GET,
            "/api/v1/rooms/main/tickets/Zb3n0W6m1q8VqL2pX9cT4%41".into(),
            None,
        ),
        (Method::POST, "/api/v1/rooms/m%61in/tickets".into(), None),
        (
            Method::HEAD,
            format!("/api/v1/rooms/main/tickets/{ID}"),
            None,
        ),
        (
            Method::DELETE,
            format!("/api/v1/rooms/main/tickets/{ID}"),
            None,
        ),
        (
            Method::POST,
            format!("/api/v1/rooms/main/tickets/{ID}"),
            None,
        ),
        (Method::GET, "/api/v1/rooms/main/tickets".into(), None),
        (Method::PUT, "/api/v1/rooms/main/tickets".into(), None),
        (Method::POST, "/api/v1/rooms/main/tickets/".into(), None),
        (
            Method::GET,
            format!("/api/v1/rooms/main/tickets/{ID}/"),
            None,
        ),
        (
            Method::GET,
            format!("/api/v1/rooms/main/tickets/{ID}/events"),
            None,
        ),
        (
            Method::POST,
            format!("/api/v1/rooms/main/tickets/{ID}/heartbeat"),
            None,
        ),
        (Method::GET, format!("/api/v1/rooms//tickets/{ID}"), None),
        (Method::POST, "/api/v1/rooms//tickets".into(), None),
        (
            Method::GET,
            format!("/api/v1/rooms/main/tickets//{ID}"),
            None,
        ),
        (Method::GET, format!("/api/v1/rooms/main/orders/{ID}"), None),
        (Method::GET, format!("/api/rooms/main/tickets/{ID}"), None),
        (
            Method::GET,
            format!("//api/v1/rooms/main/tickets/{ID}"),
            None,
        ),
        (Method::GET, "/api/v1/rooms/main".into(), None),
    ];
    for (method, path, expected) in cases {
        assert_eq!(&hot_route(method, path), expected, "{method} {path}");
    }
}
