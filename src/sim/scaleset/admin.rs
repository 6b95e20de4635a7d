//! The service's admin side, under the admin token: registration, runner groups, scale sets, sessions, JIT configs and agents.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{BROKER, Out, PIPELINES, body, err, exception};
use crate::http_server::Request;
use crate::secret::Secret;
use crate::sim::jit::{self, JitConfig};
use crate::sim::scaleset_state::{SimScaleSet, SimSession, jwt_token};
use crate::sim::state::{Scope, State};
use crate::timefmt::{Millis, format_rfc3339};

/// `GET runnerscalesets` (`?runnerGroupId=`, `?name=`): the scope's scale sets.
pub(super) fn list_scale_sets(st: &State, scope: &Scope, req: &Request) -> Out {
    let group: Option<u64> = req
        .query_param("runnerGroupId")
        .and_then(|v| v.parse().ok());
    let name = req.query_param("name");
    let value: Vec<Value> = st
        .scalesets
        .scale_sets
        .values()
        .filter(|s| s.scope == *scope)
        .filter(|s| group.is_none_or(|g| s.runner_group_id == g))
        .filter(|s| name.is_none_or(|n| s.name == n))
        .map(|s| scale_set_json(st, s))
        .collect();
    (200, Some(json!({"count": value.len(), "value": value})))
}

/// `POST runnerscalesets`: a new scale set; a taken name is a 409.
pub(super) fn create_scale_set(st: &mut State, scope: Scope, req: &Request, now: Millis) -> Out {
    let b: ScaleSetBody = try_out!(body(req));
    let Some(name) = b.name.filter(|n| !n.trim().is_empty()) else {
        return (400, Some(json!({"message": "name is required"})));
    };
    let group = b.runner_group_id.unwrap_or(1);
    if !st.group_exists(&scope, group) {
        return (
            404,
            Some(json!({"message": format!("Runner group {group} not found")})),
        );
    }
    if st
        .scalesets
        .scale_sets
        .values()
        .any(|s| s.scope == scope && s.name == name)
    {
        return err(exception(
            409,
            "RunnerScaleSetExistsException",
            &format!("A runner scale set named {name} already exists."),
        ));
    }
    let labels = b.labels.map_or_else(
        || vec![name.clone()],
        |l| l.into_iter().map(|l| l.name).collect(),
    );
    let disable = b
        .runner_setting
        .and_then(|r| r.disable_update)
        .unwrap_or(false);
    let id = st
        .scalesets
        .add_scale_set(&name, scope, group, labels, disable, now);
    st.scaleset_created(id);
    let s = st.scalesets.scale_sets[&id].clone();
    (200, Some(scale_set_json(st, &s)))
}

/// `PATCH runnerscalesets/{id}`: what the body names changes.
pub(super) fn update_scale_set(st: &mut State, id: u64, req: &Request) -> Out {
    let b: ScaleSetBody = try_out!(body(req));
    let s = st.scalesets.scale_sets.get_mut(&id).expect("checked");
    if let Some(n) = b.name.filter(|n| !n.trim().is_empty()) {
        s.name = n;
    }
    if let Some(g) = b.runner_group_id {
        s.runner_group_id = g;
    }
    if let Some(l) = b.labels {
        s.labels = l.into_iter().map(|l| l.name).collect();
    }
    if let Some(d) = b.runner_setting.and_then(|r| r.disable_update) {
        s.disable_update = d;
    }
    let s = s.clone();
    (200, Some(scale_set_json(st, &s)))
}

/// `POST runnerscalesets/{id}/sessions`: one live session per scale set (409 while
/// another lives); the new one gets its queue token.
pub(super) fn create_session(st: &mut State, set: &SimScaleSet, req: &Request, now: Millis) -> Out {
    let id = set.id;
    let b: SessionBody = try_out!(body(req));
    if let Some(s) = st.scalesets.live_session(id, now) {
        return err(exception(
            409,
            "RunnerScaleSetSessionConflictException",
            &format!(
                "The actions runner scale set {} already has an active session for owner {}.",
                set.name, s.owner
            ),
        ));
    }
    st.scalesets.sessions.retain(|_, s| s.scale_set_id != id);
    let sid = format!("{}-{}-{}", st.rng.hex(8), st.rng.hex(4), st.rng.hex(12));
    let session = SimSession {
        id: sid.clone(),
        scale_set_id: id,
        owner: b.owner_name.unwrap_or_default(),
        queue_token: String::new(),
        token_expires_at: 0,
        last_seen: now,
        polls: 0,
    };
    st.scalesets.sessions.insert(sid.clone(), session);
    (200, Some(issue_queue_token(st, &sid, now)))
}

/// `GET pools/0/agents` (`?agentName=`): the scope's runners.
pub(super) fn agents(st: &State, scope: &Scope, req: &Request) -> Out {
    let name = req.query_param("agentName");
    let value: Vec<Value> = st
        .runners
        .values()
        .filter(|r| r.scope == *scope && name.is_none_or(|n| r.name.eq_ignore_ascii_case(n)))
        .map(|r| agent_json(st, r.id))
        .collect();
    (200, Some(json!({"count": value.len(), "value": value})))
}

/// The 404 of an agent id the scope does not have.
pub(super) fn agent_not_found() -> (u16, Value) {
    exception(404, "AgentNotFoundException", "The runner was not found.")
}

/// `DELETE pools/0/agents/{id}`: 400 `AgentInUse` while the runner runs a job.
pub(super) fn delete_agent(st: &mut State, scope: &Scope, id: u64, now: Millis) -> Out {
    match st.runners.get(&id).filter(|r| r.scope == *scope) {
        None => err(agent_not_found()),
        Some(r) if r.busy => err(exception(
            400,
            "AgentInUseException",
            &format!("The runner {} is running a job.", r.name),
        )),
        Some(_) => {
            st.remove_runner(id, now);
            st.scalesets.runners.remove(&id);
            (204, None)
        }
    }
}

#[derive(Deserialize)]
pub(super) struct LabelBody {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SettingBody {
    disable_update: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ScaleSetBody {
    name: Option<String>,
    runner_group_id: Option<u64>,
    labels: Option<Vec<LabelBody>>,
    #[serde(rename = "RunnerSetting")]
    runner_setting: Option<SettingBody>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionBody {
    owner_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JitBody {
    name: String,
    work_folder: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct RegistrationBody {
    url: String,
    runner_event: Option<String>,
}

pub(super) fn register(st: &mut State, req: &Request, now: Millis) -> Out {
    let token = req
        .header("authorization")
        .and_then(|h| h.strip_prefix("RemoteAuth "))
        .map(str::trim)
        .unwrap_or_default();
    let Some((scope, exp)) = st.scalesets.registration_tokens.get(token).cloned() else {
        return (401, Some(json!({"message": "Bad credentials"})));
    };
    if exp <= now {
        return (
            401,
            Some(json!({"message": "The registration token expired"})),
        );
    }
    let b: RegistrationBody = try_out!(body(req));
    if b.runner_event.as_deref() != Some("register") {
        return (
            400,
            Some(json!({"message": "runner_event must be register"})),
        );
    }
    // The config URL must name the token's repository or organization.
    let path = b.url.trim_end_matches('/');
    let named = match &scope {
        Scope::Repo(full) => path.ends_with(&format!("/{full}")),
        Scope::Org(org) => path.ends_with(&format!("/{org}")),
    };
    if !named {
        return (404, Some(json!({"message": "Not Found"})));
    }
    let ttl = st.scalesets.config.admin_token_ttl_secs as Millis * 1000;
    let admin = jwt_token(now + ttl, &st.rng.hex(16));
    st.scalesets
        .admin_tokens
        .insert(admin.clone(), (scope, now + ttl));
    (
        200,
        Some(
            json!({"url": format!("{}{PIPELINES}/", st.base_url), "token": admin, "token_schema": "OAuthAccessToken"}),
        ),
    )
}

pub(super) fn issue_queue_token(st: &mut State, sid: &str, now: Millis) -> Value {
    let ttl = st.scalesets.config.queue_token_ttl_secs as Millis * 1000;
    let token = jwt_token(now + ttl, &st.rng.hex(16));
    let base = st.base_url.clone();
    let s = st.scalesets.sessions.get_mut(sid).expect("caller checked");
    s.queue_token = token.clone();
    s.token_expires_at = now + ttl;
    s.last_seen = now;
    let (set_id, owner) = (s.scale_set_id, s.owner.clone());
    let set = st.scalesets.scale_sets[&set_id].clone();
    json!({
        "sessionId": sid,
        "ownerName": owner,
        "runnerScaleSet": scale_set_json(st, &set),
        "messageQueueUrl": format!("{base}{BROKER}/_apis/runtime/runnerscalesets/{set_id}/messages?sessionId={sid}"),
        "messageQueueAccessToken": token,
        "statistics": st.scaleset_statistics(set_id),
    })
}

pub(super) fn scale_set_json(st: &State, s: &SimScaleSet) -> Value {
    json!({
        "id": s.id,
        "name": s.name,
        "runnerGroupId": s.runner_group_id,
        "runnerGroupName": if s.runner_group_id == 1 { "Default".to_string() } else {
            st.groups.iter().find(|g| g.id == s.runner_group_id).map_or(String::new(), |g| g.name.clone())
        },
        "labels": s.labels.iter().map(|l| json!({"type": "System", "name": l})).collect::<Vec<_>>(),
        "RunnerSetting": {"ephemeral": true, "isElastic": true, "disableUpdate": s.disable_update},
        "createdOn": format_rfc3339(s.created_at),
        "statistics": st.scaleset_statistics(s.id),
    })
}

pub(super) fn agent_json(st: &State, id: u64) -> Value {
    let r = &st.runners[&id];
    json!({
        "id": r.id,
        "name": r.name,
        "runnerScaleSetId": st.scalesets.runners.get(&id).copied().unwrap_or(0),
        "status": if r.online { "online" } else { "offline" },
        "busy": r.busy,
    })
}

pub(super) fn runner_groups(st: &State, scope: &Scope, req: &Request) -> Out {
    let mut groups = vec![json!({"id": 1, "name": "Default", "isDefaultGroup": true})];
    if let Scope::Org(org) = scope {
        for g in st.groups.iter().filter(|g| &g.org == org) {
            groups.push(json!({"id": g.id, "name": g.name, "isDefaultGroup": false}));
        }
    }
    if let Some(name) = req.query_param("groupName") {
        groups.retain(|g| {
            g["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        });
    }
    (200, Some(json!({"count": groups.len(), "value": groups})))
}

pub(super) fn generate_jit(st: &mut State, req: &Request, set: &SimScaleSet, now: Millis) -> Out {
    let b: JitBody = try_out!(body(req));
    if b.name.trim().is_empty() {
        return (400, Some(json!({"message": "name is required"})));
    }
    if st.runner_by_name(&set.scope, &b.name).is_some() {
        return err((
            409,
            json!({
                "message": format!("A runner with the name {} already exists.", b.name),
                "typeName": "GitHub.DistributedTask.WebApi.AgentExistsException, GitHub.DistributedTask.WebApi",
                "typeKey": "AgentExistsException",
            }),
        ));
    }
    let id = st.create_runner(
        set.scope.clone(),
        &b.name,
        set.runner_group_id,
        set.labels.clone(),
        now,
    );
    st.scalesets.runners.insert(id, set.id);
    let r = st.runners[&id].clone();
    let cfg = JitConfig {
        server_url: st.base_url.clone(),
        runner_id: id,
        runner_name: r.name.clone(),
        credential: Secret::new(r.credential),
        labels: r.labels,
        work_folder: b.work_folder.unwrap_or_else(|| "_work".into()),
        faults: r.faults,
        disable_update: set.disable_update,
    };
    let encoded = jit::encode(&cfg);
    (
        200,
        Some(json!({
            "runner": {"id": id, "name": r.name, "runnerScaleSetId": set.id},
            "encodedJITConfig": encoded.expose(),
        })),
    )
}
