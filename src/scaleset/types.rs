//! The Actions service's JSON for the scale set API, as serde structs private to
//! `scaleset/`; converted to the public types at the edge. Only the fields read are
//! declared (the service adds fields freely). Field names follow `actions/scaleset`.

use serde::{Deserialize, Serialize};

/// `{count, value: [...]}`, the service's list envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct List<T> {
    #[serde(default = "Vec::new")]
    pub value: Vec<T>,
}

#[derive(Debug, Serialize)]
pub(crate) struct RegistrationRequest<'a> {
    pub url: &'a str,
    pub runner_event: &'a str,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RegistrationResponse {
    pub url: String,
    pub token: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default, rename = "typeName")]
    pub type_name: Option<String>,
    #[serde(default, rename = "typeKey")]
    pub type_key: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunnerGroup {
    pub id: i64,
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Label {
    #[serde(rename = "type", default)]
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunnerSetting {
    #[serde(default)]
    pub ephemeral: bool,
    #[serde(default)]
    pub is_elastic: bool,
    #[serde(default)]
    pub disable_update: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Statistics {
    #[serde(default)]
    pub total_available_jobs: u32,
    #[serde(default)]
    pub total_acquired_jobs: u32,
    #[serde(default)]
    pub total_assigned_jobs: u32,
    #[serde(default)]
    pub total_running_jobs: u32,
    #[serde(default)]
    pub total_registered_runners: u32,
    #[serde(default)]
    pub total_busy_runners: u32,
    #[serde(default)]
    pub total_idle_runners: u32,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScaleSet {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub id: i64,
    pub name: String,
    pub runner_group_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_group_name: Option<String>,
    #[serde(default)]
    pub labels: Vec<Label>,
    /// Capitalized on the wire, as the service (and ARC) spell it.
    #[serde(rename = "RunnerSetting", default)]
    pub runner_setting: RunnerSetting,
    #[serde(default, skip_serializing)]
    pub statistics: Option<Statistics>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionRequest<'a> {
    pub owner_name: &'a str,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Session {
    pub session_id: String,
    pub message_queue_url: String,
    pub message_queue_access_token: String,
    #[serde(default)]
    pub statistics: Option<Statistics>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Message {
    pub message_id: i64,
    pub message_type: String,
    /// A JSON array, itself encoded as a JSON string.
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub statistics: Option<Statistics>,
}

/// One element of a message body's array; the union of every job message's fields.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobMessage {
    pub message_type: String,
    #[serde(default)]
    pub runner_request_id: i64,
    #[serde(default)]
    pub repository_name: String,
    #[serde(default)]
    pub owner_name: String,
    /// A string on the wire (a GUID-like id), not GitHub's REST job id.
    #[serde(default, deserialize_with = "string_or_number")]
    pub job_id: String,
    #[serde(default)]
    pub job_display_name: String,
    #[serde(default)]
    pub workflow_run_id: i64,
    #[serde(default)]
    pub request_labels: Vec<String>,
    #[serde(default)]
    pub queue_time: Option<String>,
    /// `owner/repo/.github/workflows/FILE@REF`: the workflow's file, not its name.
    #[serde(default)]
    pub job_workflow_ref: Option<String>,
    #[serde(default)]
    pub acquire_job_url: Option<String>,
    #[serde(default)]
    pub runner_id: Option<i64>,
    #[serde(default)]
    pub runner_name: Option<String>,
    #[serde(default)]
    pub result: Option<String>,
}

fn string_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JitRequest<'a> {
    pub name: &'a str,
    pub work_folder: &'a str,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunnerReference {
    pub id: i64,
    pub name: String,
    #[serde(default)]
    pub runner_scale_set_id: i64,
}

#[derive(Debug, Deserialize)]
pub(crate) struct JitResponse {
    pub runner: RunnerReference,
    #[serde(rename = "encodedJITConfig")]
    pub encoded_jit_config: String,
}
