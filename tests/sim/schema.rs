//! A small OpenAPI 3.0 schema validator (type with nullable, required, properties, items,
//! enum, oneOf/anyOf/allOf, additionalProperties: false, date-time loosely).

use serde_json::Value;

/// Errors found validating `v` against `s`; empty when it conforms.
pub fn validate(s: &Value, v: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(s, v, "$", &mut errors);
    errors
}

fn check(s: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(s) = s.as_object() else { return };
    if v.is_null() && s.get("nullable").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        for sub in all {
            check(sub, v, at, errors);
        }
    }
    for (key, exactly_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(alts) = s.get(key).and_then(Value::as_array) {
            let passing = alts.iter().filter(|a| validate(a, v).is_empty()).count();
            if passing == 0
                || (exactly_one
                    && passing > 1
                    && !alts.iter().all(|a| a.get("properties").is_some()))
            {
                errors.push(format!("{at}: {passing} of the {key} alternatives match"));
            }
        }
    }
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => true,
        };
        if !ok {
            errors.push(format!("{at}: expected {t}, got {v}"));
            return;
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        errors.push(format!("{at}: {v} is not one of {e:?}"));
    }
    if s.get("format").and_then(Value::as_str) == Some("date-time")
        && let Some(text) = v.as_str()
        && runner_manager::timefmt::parse_rfc3339(text).is_none()
    {
        errors.push(format!("{at}: {text} is not a date-time"));
    }
    if let Some(obj) = v.as_object() {
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or_default();
            if !obj.contains_key(r) {
                errors.push(format!("{at}: missing required field {r}"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(ps, val, &format!("{at}.{k}"), errors),
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errors.push(format!("{at}: field {k} is not allowed"));
                }
                None => {
                    if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                        check(ap, val, &format!("{at}.{k}"), errors);
                    }
                }
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            check(items, x, &format!("{at}[{i}]"), errors);
        }
    }
}

#[test]
fn the_validator_catches_what_it_should() {
    let s = serde_json::json!({
        "type": "object", "required": ["id", "status"],
        "properties": {
            "id": {"type": "integer"},
            "status": {"type": "string", "enum": ["queued", "completed"]},
            "runner": {"type": "string", "nullable": true},
            "at": {"type": "string", "format": "date-time"},
            "labels": {"type": "array", "items": {"type": "string"}},
            "one": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        }
    });
    let good = serde_json::json!({"id": 1, "status": "queued", "runner": null, "at": "2026-11-30T10:00:00Z", "labels": ["a"], "one": 3});
    assert!(validate(&s, &good).is_empty(), "{:?}", validate(&s, &good));
    for bad in [
        serde_json::json!({"status": "queued"}),
        serde_json::json!({"id": "1", "status": "queued"}),
        serde_json::json!({"id": 1, "status": "running"}),
        serde_json::json!({"id": 1, "status": "queued", "at": "yesterday"}),
        serde_json::json!({"id": 1, "status": "queued", "labels": [1]}),
        serde_json::json!({"id": 1, "status": "queued", "one": true}),
        serde_json::json!({"id": 1.5, "status": "queued"}),
    ] {
        assert!(!validate(&s, &bad).is_empty(), "accepted {bad}");
    }
}
