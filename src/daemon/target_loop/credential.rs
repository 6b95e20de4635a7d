//! The target's credential, watched: its file's stamp looked at each pass (a `stat`),
//! so a token fixed in place, a key replaced or a `target set token_file=` is used at
//! the next pass, with no restart; read again after a 401, in case it was fixed within
//! the file's clock tick; and what is wrong with it kept for `status`
//! (`daemon_facts::CredentialSeen`). The decisions are `github::auth::check_source`'s
//! and the pure pass's (`ClientFit::CredentialChanged`, `Refusal::CredentialsRefused`).

use super::*;
use crate::github::auth::{CredentialSource, SourceCheck, check_source, stamp_credential};
use crate::store::daemon_facts::CredentialSeen;

/// What the loop knows of the credential behind its client.
#[derive(Default)]
pub(super) struct CredentialWatch {
    /// What the client was built from (`None`: no client).
    built: Option<CredentialSource>,
    /// A read after a 401 found other contents than the client's.
    stale: bool,
    /// Why a read would refuse the file now (the client keeps the credential read
    /// before), as last logged.
    problem: Option<String>,
    /// What `status` was last given.
    written: Option<CredentialSeen>,
}

impl TargetLoop {
    /// How the client fits the target's credential now: `CredentialChanged` when the
    /// reference was edited, its file changed, or a read after a 401 found it fixed.
    pub(super) fn credential_fit(&mut self, target: &Target) -> ClientFit {
        let Some(built) = &self.github.credential.built else {
            return ClientFit::Fits;
        };
        if std::mem::take(&mut self.github.credential.stale) {
            return ClientFit::CredentialChanged;
        }
        let seen = stamp_credential(&target.credential);
        match check_source(built, &target.credential, &seen) {
            SourceCheck::Same => {
                self.credential_problem(None);
                ClientFit::Fits
            }
            SourceCheck::Changed => {
                self.credential_problem(None);
                ClientFit::CredentialChanged
            }
            SourceCheck::Refused(why) => {
                self.credential_problem(Some(format!(
                    "{why} (the credential read before is used until then)"
                )));
                ClientFit::Fits
            }
        }
    }

    fn credential_problem(&mut self, problem: Option<String>) {
        if problem != self.github.credential.problem {
            match &problem {
                Some(why) => log_warn!("credential_file_refused", target = self.name, error = why),
                None if self.github.credential.problem.is_some() => {
                    log_info!("credential_file_accepted", target = self.name)
                }
                None => {}
            }
            self.github.credential.problem = problem;
        }
    }

    /// The stamp of the target's credential file before it is read for a client: a
    /// write after this stamp is seen as a change at the next pass.
    pub(super) fn credential_stamp(&self, target: &Target) -> Option<crate::secret::FileStamp> {
        stamp_credential(&target.credential).ok().flatten()
    }

    /// The client was built from `target`'s credential as stamped (or none was).
    pub(super) fn credential_built(&mut self, built: Option<CredentialSource>) {
        self.github.credential.built = built;
        self.github.credential.stale = false;
    }

    /// GitHub refused the credential: read it again now. Other contents than the
    /// client's mean someone fixed it; the next pass builds the client again at once
    /// rather than wait out the refusal's backoff.
    pub(super) fn recheck_credential(&mut self) {
        let (Some(client), Some(built)) = (&self.github.client, &self.github.credential.built)
        else {
            return;
        };
        if let Ok(now) = crate::github::load_credential(&built.reference)
            && !now.same_as(client.credential())
        {
            self.github.credential.stale = true;
        }
    }

    /// Gives `status` what is wrong with the credential, when that changed.
    pub(super) fn record_credential(&mut self) {
        let seen = CredentialSeen {
            refused_since: self.state.credentials_refused_since(),
            problem: self.github.credential.problem.clone(),
            expires_at: self
                .github
                .client
                .as_ref()
                .and_then(|c| c.token_expires_at()),
        };
        if self.github.credential.written.as_ref() == Some(&seen) {
            return;
        }
        let r = seen.write(&self.store, &self.name);
        if r.is_ok() {
            self.github.credential.written = Some(seen);
        }
        self.wrote("credential", r);
    }
}
