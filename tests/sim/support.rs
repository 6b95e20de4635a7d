//! Test support: a started sim with fixtures, requests with credentials, App JWTs, the
//! OpenAPI description, and polling with a deadline.

use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use runner_manager::sim::client::{self, ClientResponse};
use runner_manager::sim::{SimConfig, SimGitHub, SimHandle};
use serde_json::Value;

pub const PAT: &str = "ghp_simtesttoken";
pub const APP_ID: u64 = 4242;
pub const TEST_KEY: &str = include_str!("../fixtures/github/app-key.pem");

pub fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture is readable")
}

pub fn spec() -> &'static Value {
    static SPEC: OnceLock<Value> = OnceLock::new();
    SPEC.get_or_init(|| {
        serde_json::from_str(&fixture("github/github-actions-runners.openapi.json"))
            .expect("spec parses")
    })
}

/// A sim with an org `octo` (repos `octo/app` private, `octo/site` public), a user repo
/// `alice/tool`, a PAT, and the test App installed on `octo`.
pub fn sim_with(cfg: SimConfig) -> (SimHandle, u64) {
    let h = SimGitHub::start(cfg).expect("sim starts");
    h.add_org("octo");
    h.add_repo("octo/app", true);
    h.add_repo("octo/site", false);
    h.add_repo("alice/tool", true);
    h.add_pat(PAT);
    h.add_app(APP_ID, "Iv1.simtest", TEST_KEY)
        .expect("the test key loads");
    let inst = h.add_installation(APP_ID, "octo");
    (h, inst)
}

pub fn sim() -> (SimHandle, u64) {
    sim_with(SimConfig::default())
}

pub fn call(
    h: &SimHandle,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
    extra: &[(&str, &str)],
) -> ClientResponse {
    try_call(h, method, path, token, body, extra).expect("the sim answers")
}

pub fn try_call(
    h: &SimHandle,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
    extra: &[(&str, &str)],
) -> std::io::Result<ClientResponse> {
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("accept", "application/vnd.github+json"),
        ("x-github-api-version", "2022-11-28"),
    ];
    if !token.is_empty() {
        headers.push(("authorization", auth.as_str()));
    }
    headers.extend_from_slice(extra);
    let bytes = body.map(|b| b.to_string().into_bytes());
    client::request(
        h.url(),
        method,
        path,
        &headers,
        bytes.as_deref(),
        Duration::from_secs(10),
    )
}

pub fn get(h: &SimHandle, path: &str) -> ClientResponse {
    call(h, "GET", path, PAT, None, &[])
}

/// An RS256 App JWT with these claims, signed with the test key.
pub fn jwt_with(iss: &str, iat: i64, exp: i64) -> String {
    let der = runner_manager::sim::auth::pem_body(TEST_KEY, "RSA PRIVATE KEY").unwrap();
    let key = ring::rsa::KeyPair::from_der(&der).unwrap();
    let head = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"iat":{iat},"exp":{exp},"iss":"{iss}"}}"#));
    let msg = format!("{head}.{claims}");
    let mut sig = vec![0; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        msg.as_bytes(),
        &mut sig,
    )
    .unwrap();
    format!("{msg}.{}", URL_SAFE_NO_PAD.encode(sig))
}

pub fn now_s() -> i64 {
    runner_manager::timefmt::now_millis() / 1000
}

pub fn jwt() -> String {
    jwt_with(&APP_ID.to_string(), now_s() - 60, now_s() + 540)
}

/// An installation token for `inst`, minted through the REST endpoint.
pub fn installation_token(h: &SimHandle, inst: u64) -> String {
    let r = call(
        h,
        "POST",
        &format!("/app/installations/{inst}/access_tokens"),
        &jwt(),
        None,
        &[],
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json().unwrap()["token"].as_str().unwrap().to_string()
}

#[path = "../common/poll.rs"]
mod poll;
pub use poll::wait_for;

/// The response schema of an operation for a status code, from GitHub's description.
pub fn response_schema(method: &str, template: &str, status: u16) -> Option<&'static Value> {
    let op = spec()["paths"]
        .get(template)?
        .get(method.to_ascii_lowercase())?;
    op["responses"]
        .get(status.to_string())?
        .get("content")?
        .get("application/json")?
        .get("schema")
}

/// Validates a response body against the operation's schema for its status.
pub fn assert_conforms(method: &str, template: &str, r: &ClientResponse) {
    let op = &spec()["paths"][template][method.to_ascii_lowercase()];
    assert!(
        op.is_object(),
        "{method} {template} is not in GitHub's description"
    );
    assert!(
        op["responses"].get(r.status.to_string()).is_some(),
        "{method} {template} answered {} which the description does not list",
        r.status
    );
    if let Some(schema) = response_schema(method, template, r.status) {
        let body: Value = serde_json::from_slice(&r.body).expect("a JSON body");
        let errors = super::schema::validate(schema, &body);
        assert!(
            errors.is_empty(),
            "{method} {template} {}: {errors:#?}",
            r.status
        );
    }
}
