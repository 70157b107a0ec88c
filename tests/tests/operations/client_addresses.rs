//! Client addresses behind proxies: what the join limit counts as one client.

use vestibule_shared::paths;
use vestibule_tests::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_pick_its_address_with_a_forwarded_header_line_of_its_own() {
    let app = TestApp::behind_proxy_with_join_limit("3", &[]).await;
    let mut statuses = Vec::new();
    for i in 0..6 {
        // The client's made-up line first, then the line the proxy appended.
        let mut headers = reqwest::header::HeaderMap::new();
        headers.append("x-forwarded-for", format!("10.9.8.{i}").parse().unwrap());
        headers.append("x-forwarded-for", "198.51.100.7".parse().unwrap());
        let response = app
            .client
            .post(app.url(&paths::tickets("main")))
            .headers(headers)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [201, 201, 201, 429, 429, 429]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_trusted_proxies_the_address_the_outer_one_saw_is_the_client() {
    let app = TestApp::behind_proxy_with_join_limit("1", &["--trusted-proxy-hops", "2"]).await;
    let join = |chain: &'static str| {
        app.client
            .post(app.url(&paths::tickets("main")))
            .header("X-Forwarded-For", chain)
            .send()
    };
    // Client spoofs the first entry; the CDN appended the real client, the proxy the CDN.
    let statuses = [
        join("6.6.6.1, [2001:db8::7]:51000, 10.0.0.2")
            .await
            .unwrap()
            .status(),
        join("6.6.6.2, 2001:db8::7, 10.0.0.2")
            .await
            .unwrap()
            .status(),
        join("6.6.6.3, 203.0.113.9, 10.0.0.2")
            .await
            .unwrap()
            .status(),
    ];
    assert_eq!(statuses.map(|s| s.as_u16()), [201, 429, 201]);
}
