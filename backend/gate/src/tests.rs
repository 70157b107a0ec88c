use super::*;

fn request(version: axum::http::Version, method: Method, uri: &str, host: Option<&str>) -> Request {
    let mut request = Request::builder()
        .version(version)
        .method(method)
        .uri(uri)
        .body(axum::body::Body::empty())
        .unwrap();
    if let Some(host) = host {
        request
            .headers_mut()
            .insert(header::HOST, HeaderValue::from_str(host).unwrap());
    }
    request
}

/// Requests whose host or target the origin could read otherwise than the gate: refused
/// before any rule is checked.
#[test]
fn hosts_and_targets_an_origin_could_read_otherwise_are_refused() {
    use axum::http::Version;
    let h2 = "http://shop.example/checkout";
    assert!(refused_shape(&request(Version::HTTP_2, Method::GET, h2, None)).is_none());
    assert!(refused_shape(&request(
        Version::HTTP_2,
        Method::GET,
        h2,
        Some("SHOP.example")
    ))
    .is_none());
    assert!(refused_shape(&request(
        Version::HTTP_2,
        Method::GET,
        h2,
        Some("other.example")
    ))
    .is_some());
    assert!(refused_shape(&request(Version::HTTP_11, Method::GET, "/x", None)).is_some());
    assert!(refused_shape(&request(Version::HTTP_10, Method::GET, "/x", None)).is_none());
    assert!(refused_shape(&request(Version::HTTP_11, Method::GET, "*", Some("s"))).is_some());
    assert!(refused_shape(&request(Version::HTTP_11, Method::OPTIONS, "*", Some("s"))).is_none());
}
