//! The message queue, under the queue token: the long poll, acks and job acquisition.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Out, bearer, body, err, fault_error, scale_set_not_found, unauthorized};
use crate::http_server::Request;
use crate::sim::handle::Sim;
use crate::sim::state::State;
use crate::timefmt::{Millis, now_millis};

/// The session a queue call names, checked: 404 when it is gone, 401 when the queue
/// token is wrong or expired.
pub(super) fn queue_session(
    st: &State,
    req: &Request,
    set_id: u64,
    now: Millis,
) -> Result<String, Out> {
    let sid = req.query_param("sessionId").unwrap_or_default();
    let Some(s) = st
        .scalesets
        .sessions
        .get(sid)
        .filter(|s| s.scale_set_id == set_id)
    else {
        return Err(err(fault_error(404, &req.path)));
    };
    if s.queue_token != bearer(req) || s.token_expires_at <= now {
        return Err(err(unauthorized()));
    }
    Ok(sid.to_string())
}

pub(super) fn queue(sim: &Sim, req: &Request, template: &str, params: &[String]) -> Out {
    let set_id: u64 = params[0].parse().unwrap_or(0);
    let mut st = sim.lock();
    let now = now_millis();
    if !st.scalesets.scale_sets.contains_key(&set_id) {
        return err(scale_set_not_found(&params[0]));
    }
    let sid = try_out!(queue_session(&st, req, set_id, now));
    if template.ends_with("{message}") {
        let mid: i64 = params[1].parse().unwrap_or(0);
        return match st
            .scalesets
            .messages
            .iter_mut()
            .find(|m| m.scale_set_id == set_id && m.id == mid)
        {
            Some(m) => {
                m.acked = true;
                (204, None)
            }
            None => (404, Some(json!({"message": "no such message"}))),
        };
    }
    if req
        .header("x-scalesetmaxcapacity")
        .and_then(|v| v.trim().parse::<u32>().ok())
        .is_none()
    {
        return (
            400,
            Some(json!({"message": "X-ScaleSetMaxCapacity is required"})),
        );
    }
    let last: i64 = req
        .query_param("lastMessageId")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let hold = Duration::from_millis(st.scalesets.config.hold_ms);
    let deadline = Instant::now() + hold;
    if let Some(s) = st.scalesets.sessions.get_mut(&sid) {
        s.polls += 1;
    }
    let out = loop {
        // The session may have been deleted or replaced while this poll waited.
        let Some(s) = st.scalesets.sessions.get_mut(&sid) else {
            break err(fault_error(404, &req.path));
        };
        s.last_seen = now_millis();
        let found = st
            .scalesets
            .next_message(set_id, last, &sid)
            .map(|m| (m.id, m.body.clone()));
        if let Some((id, inner)) = found {
            if let Some(m) = st
                .scalesets
                .messages
                .iter_mut()
                .find(|m| m.scale_set_id == set_id && m.id == id)
            {
                m.delivered_to = Some(sid.clone());
            }
            // Statistics as of now, not as of when the message was queued.
            let body = json!({
                "messageId": id,
                "messageType": "RunnerScaleSetJobMessages",
                "body": inner,
                "statistics": st.scaleset_statistics(set_id),
            });
            break (200, Some(body));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || sim.stopper.is_stopped() {
            break (202, None);
        }
        st = sim
            .changed
            .wait_timeout(st, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    };
    if let Some(s) = st.scalesets.sessions.get_mut(&sid) {
        s.polls = s.polls.saturating_sub(1);
        s.last_seen = now_millis();
    }
    out
}

pub(super) fn acquire(st: &mut State, req: &Request, params: &[String], now: Millis) -> Out {
    let set_id: u64 = params[0].parse().unwrap_or(0);
    if !st.scalesets.scale_sets.contains_key(&set_id) {
        return err(scale_set_not_found(&params[0]));
    }
    let token = bearer(req);
    let valid =
        st.scalesets.sessions.values().any(|s| {
            s.scale_set_id == set_id && s.queue_token == token && s.token_expires_at > now
        });
    if !valid {
        return err(unauthorized());
    }
    let ids: Vec<u64> = try_out!(body(req));
    let granted = st.scaleset_acquire(set_id, &ids);
    (200, Some(json!({"count": granted.len(), "value": granted})))
}
