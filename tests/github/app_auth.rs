//! GitHub App auth: JWTs, installation lookup, one shared installation token, refresh
//! before expiry and after a 401, and the clock hint on a refused JWT.

use crate::common::*;
use crate::responder::*;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use runner_manager::domain::{CredentialRef, TargetScope};
use runner_manager::github::jwt::AppKey;
use runner_manager::github::{Credential, GhError, GitHubClient, load_credential};
use runner_manager::timefmt::format_rfc3339;
use std::sync::Arc;

const INSTALL_TOKEN: &str = "ghs_INSTALLATIONSECRET0123";
fn app_credential(installation_id: Option<u64>) -> Credential {
    load_credential(&CredentialRef::App {
        app_id: 4242,
        key_path: fixture("app-key.pem").into(),
        installation_id,
    })
    .unwrap()
}

fn token_reply(expires_at: i64) -> Action {
    ok(
        201,
        &[],
        &format!(
            r#"{{"token":"{INSTALL_TOKEN}","expires_at":"{}","permissions":{{}}}}"#,
            format_rfc3339(expires_at)
        ),
    )
}

fn verify_jwt(header: &str) -> serde_json::Value {
    let jwt = header.strip_prefix("Bearer ").unwrap();
    let parts: Vec<&str> = jwt.split('.').collect();
    let key = AppKey::from_pem(&std::fs::read_to_string(fixture("app-key.pem")).unwrap()).unwrap();
    let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.public_key_der());
    let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    public
        .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
        .expect("the JWT signature verifies with the App's public key");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap()
}

#[test]
fn looks_up_the_installation_mints_once_and_reuses_the_token() {
    let r = Responder::start(vec![
        json(r#"{"id":55,"app_id":4242}"#),
        token_reply(T0 + 3_600_000),
        json(RUNNERS),
        json(RUNNERS),
    ]);
    let (c, _) = client_for(&repo_target(&r.url()), app_credential(None));
    c.list_runners(&scope()).unwrap();
    c.list_runners(&scope()).unwrap();
    let reqs = r.requests();
    assert_eq!(reqs[0].path, "/repos/octo/app/installation");
    let claims = verify_jwt(reqs[0].header("authorization").unwrap());
    assert_eq!(claims["iss"], "4242");
    assert_eq!(claims["iat"], T0 / 1000 - 60);
    assert_eq!(claims["exp"], T0 / 1000 - 60 + 540);
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].path.as_str()),
        ("POST", "/app/installations/55/access_tokens")
    );
    verify_jwt(reqs[1].header("authorization").unwrap());
    for q in &reqs[2..] {
        assert_eq!(
            q.header("authorization"),
            Some(format!("Bearer {INSTALL_TOKEN}").as_str())
        );
    }
    assert_eq!(c.stats().tokens_minted, 1);
}

#[test]
fn the_org_installation_is_looked_up_for_an_org_target() {
    let r = Responder::start(vec![
        json(r#"{"id":56}"#),
        token_reply(T0 + 3_600_000),
        json(RUNNERS),
    ]);
    let (c, _) = client_for(&org_target(&r.url()), app_credential(None));
    c.list_runners(&TargetScope::Org { org: "acme".into() })
        .unwrap();
    assert_eq!(r.requests()[0].path, "/orgs/acme/installation");
    assert_eq!(r.requests()[1].path, "/app/installations/56/access_tokens");
}

#[test]
fn the_token_is_refreshed_five_minutes_before_expiry() {
    let r = Responder::start(vec![
        token_reply(T0 + 3_600_000),
        json(RUNNERS),
        json(RUNNERS),
        token_reply(T0 + 7_200_000),
        json(RUNNERS),
    ]);
    let (c, clock) = client_for(&repo_target(&r.url()), app_credential(Some(9)));
    c.list_runners(&scope()).unwrap();
    clock.advance(3_600_000 - 300_001);
    c.list_runners(&scope()).unwrap();
    assert_eq!(c.stats().tokens_minted, 1);
    clock.advance(1);
    c.list_runners(&scope()).unwrap();
    assert_eq!(c.stats().tokens_minted, 2);
    assert_eq!(r.requests()[3].path, "/app/installations/9/access_tokens");
}

#[test]
fn a_401_remints_once_and_retries_once() {
    let r = Responder::start(vec![
        token_reply(T0 + 3_600_000),
        status(401, "Bad credentials"),
        token_reply(T0 + 3_600_000),
        json(RUNNERS),
        status(401, "Bad credentials"),
        token_reply(T0 + 3_600_000),
        status(401, "Bad credentials"),
    ]);
    let (c, _) = client_for(&repo_target(&r.url()), app_credential(Some(9)));
    c.list_runners(&scope()).unwrap();
    assert_eq!(c.stats().tokens_minted, 2);
    let e = c.list_runners(&scope()).unwrap_err();
    assert_eq!(e, GhError::Unauthorized { clock_hint: false });
    assert_eq!(r.count(), 7, "one refresh, one retry, then the error");
}

#[test]
fn a_refused_jwt_says_to_check_the_clock() {
    let r = Responder::start(vec![status(
        401,
        "'Expiration time' claim ('exp') is too far in the future",
    )]);
    let (c, _) = client_for(&repo_target(&r.url()), app_credential(Some(9)));
    let e = c.list_runners(&scope()).unwrap_err();
    assert_eq!(e, GhError::Unauthorized { clock_hint: true });
    assert!(e.to_string().contains("check the host clock"), "{e}");
}

#[test]
fn concurrent_callers_share_one_minted_token() {
    let r = Responder::start(vec![
        token_reply(T0 + 3_600_000),
        json(RUNNERS),
        json(RUNNERS),
        json(RUNNERS),
    ]);
    let (c, _) = client_for(&repo_target(&r.url()), app_credential(Some(9)));
    let c: Arc<GitHubClient> = Arc::new(c);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || c.list_runners(&scope()).unwrap())
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(c.stats().tokens_minted, 1);
    let posts = r.requests().iter().filter(|q| q.method == "POST").count();
    assert_eq!(posts, 1);
    for text in [format!("{c:?}"), format!("{:?}", c.rate_limit_snapshot())] {
        assert!(!text.contains("INSTALLATIONSECRET"), "{text}");
    }
}
