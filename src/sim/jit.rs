//! The simulated JIT config: what the sim's generate-jitconfig returns and the simulated
//! runner reads from `ACTIONS_RUNNER_INPUT_JITCONFIG`.
//!
//! Shaped like the real one: base64 of a JSON object mapping the files the runner writes
//! into its root (`.runner`, `.credentials`, `.credentials_rsaparams`) to each file's
//! base64 content. `.runner` carries the sim's URL, the runner's id, name, labels and
//! fault switches (`simFaults`); `.credentials` carries the runner's sim credential.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::faults::RunnerFault;
use crate::secret::Secret;

/// The decoded content of a JIT config.
#[derive(Debug, Clone)]
pub struct JitConfig {
    /// The sim's base URL, e.g. `http://127.0.0.1:4000`.
    pub server_url: String,
    pub runner_id: u64,
    pub runner_name: String,
    /// The runner's own credential for the sim's private runner endpoints.
    pub credential: Secret,
    pub labels: Vec<String>,
    pub work_folder: String,
    pub faults: Vec<RunnerFault>,
    /// The registration's `disableUpdate` (`.runner`): set for scale set runners whose
    /// scale set says so; REST's generate-jitconfig has no such field, so never there.
    pub disable_update: bool,
}

/// The `.runner` file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunnerFile {
    agent_id: u64,
    agent_name: String,
    pool_id: u64,
    pool_name: String,
    server_url: String,
    git_hub_url: String,
    work_folder: String,
    ephemeral: bool,
    disable_update: bool,
    labels: Vec<String>,
    #[serde(default)]
    sim_faults: Vec<RunnerFault>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CredentialsData {
    client_id: String,
    authorization_url: String,
    require_fips_cryptography: String,
    sim_token: String,
}

#[derive(Serialize, Deserialize)]
struct CredentialsFile {
    scheme: String,
    data: CredentialsData,
}

pub const RUNNER_FILE: &str = ".runner";
pub const CREDENTIALS_FILE: &str = ".credentials";
pub const RSA_PARAMS_FILE: &str = ".credentials_rsaparams";

/// Encodes a config as the opaque `encoded_jit_config` string.
pub fn encode(cfg: &JitConfig) -> Secret {
    let runner = RunnerFile {
        agent_id: cfg.runner_id,
        agent_name: cfg.runner_name.clone(),
        pool_id: 1,
        pool_name: "Default".into(),
        server_url: cfg.server_url.clone(),
        git_hub_url: cfg.server_url.clone(),
        work_folder: cfg.work_folder.clone(),
        ephemeral: true,
        disable_update: cfg.disable_update,
        labels: cfg.labels.clone(),
        sim_faults: cfg.faults.clone(),
    };
    let creds = CredentialsFile {
        scheme: "OAuth".into(),
        data: CredentialsData {
            client_id: format!("sim-client-{}", cfg.runner_id),
            authorization_url: format!("{}/_sim/runner/oauth2/token", cfg.server_url),
            require_fips_cryptography: "False".into(),
            sim_token: cfg.credential.expose().to_string(),
        },
    };
    let pretty = |v: &dyn erased::Ser| STANDARD.encode(v.to_json());
    let files = serde_json::json!({
        RUNNER_FILE: pretty(&runner),
        CREDENTIALS_FILE: pretty(&creds),
        RSA_PARAMS_FILE: STANDARD.encode(br#"{"d":"sim","dp":"sim","dq":"sim","exponent":"AQAB","inverseQ":"sim","modulus":"sim","p":"sim","q":"sim"}"#),
    });
    Secret::new(STANDARD.encode(files.to_string()))
}

mod erased {
    /// Lets `encode` format differently typed files with one closure.
    pub trait Ser {
        fn to_json(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_json(&self) -> Vec<u8> {
            serde_json::to_vec_pretty(self).unwrap_or_default()
        }
    }
}

/// Files to write into the runner root: (file name, content).
pub type RootFiles = Vec<(&'static str, Vec<u8>)>;

/// Decodes an encoded config: the config and the files to write into the runner root.
pub fn decode(encoded: &str) -> Result<(JitConfig, RootFiles), String> {
    let outer = STANDARD
        .decode(encoded.trim())
        .map_err(|e| format!("the JIT config is not base64 ({e})"))?;
    let files: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&outer)
        .map_err(|e| format!("the JIT config is not a JSON object of files ({e})"))?;
    let file = |name: &str| -> Result<Vec<u8>, String> {
        let b64 = files
            .get(name)
            .and_then(|v| v.as_str())
            .ok_or_else(|| format!("the JIT config has no {name} file"))?;
        STANDARD
            .decode(b64)
            .map_err(|e| format!("the {name} file is not base64 ({e})"))
    };
    let (runner_bytes, cred_bytes, rsa_bytes) = (
        file(RUNNER_FILE)?,
        file(CREDENTIALS_FILE)?,
        file(RSA_PARAMS_FILE)?,
    );
    let runner: RunnerFile = serde_json::from_slice(&runner_bytes)
        .map_err(|e| format!("the .runner file is malformed ({e})"))?;
    let creds: CredentialsFile = serde_json::from_slice(&cred_bytes)
        .map_err(|e| format!("the .credentials file is malformed ({e})"))?;
    let cfg = JitConfig {
        server_url: runner.server_url,
        runner_id: runner.agent_id,
        runner_name: runner.agent_name,
        credential: Secret::new(creds.data.sim_token),
        labels: runner.labels,
        work_folder: runner.work_folder,
        faults: runner.sim_faults,
        disable_update: runner.disable_update,
    };
    Ok((
        cfg,
        vec![
            (RUNNER_FILE, runner_bytes),
            (CREDENTIALS_FILE, cred_bytes),
            (RSA_PARAMS_FILE, rsa_bytes),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let cfg = JitConfig {
            server_url: "http://127.0.0.1:1".into(),
            runner_id: 42,
            runner_name: "rm-a-1".into(),
            credential: Secret::new("tok"),
            labels: vec!["self-hosted".into(), "linux".into()],
            work_folder: "_work".into(),
            faults: vec![RunnerFault::IgnoreSigterm],
            disable_update: false,
        };
        let enc = encode(&cfg);
        let (back, files) = decode(enc.expose()).unwrap();
        assert_eq!(back.runner_id, 42);
        assert_eq!(back.runner_name, "rm-a-1");
        assert_eq!(back.credential.expose(), "tok");
        assert_eq!(back.faults, vec![RunnerFault::IgnoreSigterm]);
        assert_eq!(files.len(), 3);
        assert!(decode("not base64!").is_err());
        assert!(decode(&STANDARD.encode("{}")).is_err());
    }
}
