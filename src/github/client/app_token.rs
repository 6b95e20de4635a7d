//! The credential on the wire: the PAT, or a GitHub App's installation token, minted when missing or near expiry, and its installation looked up once.

use super::{Auth, Call, GitHubClient, lock, parse_json};
use crate::domain::TargetScope;
use crate::github::auth::{Credential, InstallationToken};
use crate::github::error::GhError;
use crate::github::types;
use crate::secret::Secret;
use crate::timefmt::parse_rfc3339;

impl GitHubClient {
    /// The bearer secret for API calls: the PAT, or a fresh installation token.
    pub(super) fn bearer(&self) -> Result<Secret, GhError> {
        match &self.credential {
            Credential::Token(t) => Ok(t.clone()),
            Credential::App { .. } => self.installation_token(),
        }
    }

    /// The cached installation token, minted when missing or near expiry. The lock is
    /// held while minting so that concurrent callers wait for one token.
    pub(crate) fn installation_token(&self) -> Result<Secret, GhError> {
        let mut slot = lock(&self.token);
        let now = self.now();
        if let Some(t) = slot.as_ref().filter(|t| t.is_fresh(now)) {
            return Ok(t.token.clone());
        }
        let id = self.installation_id()?;
        let mut c = Call::post(
            self.url(&format!("/app/installations/{id}/access_tokens")),
            b"{}".to_vec(),
        );
        c.auth = Auth::AppJwt;
        c.ignore_limit = true;
        let reply = self.call(&c)?;
        let parsed: types::TokenResponse = parse_json(&reply.body)?;
        let expires_at = parse_rfc3339(&parsed.expires_at).ok_or_else(|| GhError::Malformed {
            detail: "installation token expires_at is not a timestamp".into(),
        })?;
        let token = Secret::new(parsed.token);
        lock(&self.state).stats.tokens_minted += 1;
        *slot = Some(InstallationToken {
            token: token.clone(),
            expires_at,
        });
        Ok(token)
    }

    /// The App installation for this target: configured, or looked up once.
    pub(crate) fn installation_id(&self) -> Result<u64, GhError> {
        if let Credential::App {
            installation_id: Some(id),
            ..
        } = &self.credential
        {
            return Ok(*id);
        }
        if let Some(id) = lock(&self.state).installation_id {
            return Ok(id);
        }
        let path = match &self.scope {
            TargetScope::Repo { owner, repo } => format!("/repos/{owner}/{repo}/installation"),
            TargetScope::Org { org } => format!("/orgs/{org}/installation"),
        };
        let mut c = Call::get(self.url(&path));
        c.auth = Auth::AppJwt;
        c.conditional = false;
        c.ignore_limit = true;
        let inst: types::Installation = parse_json(&self.call(&c)?.body)?;
        lock(&self.state).installation_id = Some(inst.id);
        Ok(inst.id)
    }
}
