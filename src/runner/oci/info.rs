//! `podman info --format json` read into the readiness facts
//! ([`crate::domain::oci_readiness::Facts`]) the domain judges: the edge's half of
//! readiness, pure over the text `podman::Podman::facts` gets.

use crate::domain::oci_readiness::Facts;
use serde_json::Value;

/// Reads the facts `podman info --format json` gives. Missing fields stay `None`.
pub fn parse_info(json: &str) -> Facts {
    let Ok(v) = serde_json::from_str::<Value>(json) else {
        return Facts {
            podman: Some(Err("podman info did not print JSON".into())),
            ..Facts::default()
        };
    };
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    let subordinate = |p: &str| {
        v.pointer(p).and_then(Value::as_array).map(|ranges| {
            ranges
                .iter()
                .filter(|r| r.get("container_id").and_then(Value::as_u64) != Some(0))
                .filter_map(|r| r.get("size").and_then(Value::as_u64))
                .sum()
        })
    };
    Facts {
        podman: Some(Ok(s("/version/Version").unwrap_or_else(|| "?".into()))),
        rootless: v
            .pointer("/host/security/rootless")
            .and_then(Value::as_bool),
        uid_map: subordinate("/host/idMappings/uidmap"),
        gid_map: subordinate("/host/idMappings/gidmap"),
        cgroup_version: s("/host/cgroupVersion"),
        controllers: v
            .pointer("/host/cgroupControllers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            }),
        storage: s("/store/graphDriverName").map(|d| {
            (
                d,
                s("/store/graphStatus/Backing Filesystem").unwrap_or_default(),
            )
        }),
        quota_probe: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::oci_readiness::{checks, first_hint, quota_holds, verdict};

    /// What a rootless Podman 5 on xfs says (trimmed to the fields read).
    const READY_INFO: &str = r#"{
      "host": {
        "cgroupControllers": ["cpu", "io", "memory", "pids"],
        "cgroupVersion": "v2",
        "idMappings": {
          "gidmap": [{"container_id": 0, "host_id": 1000, "size": 1},
                     {"container_id": 1, "host_id": 100000, "size": 65536}],
          "uidmap": [{"container_id": 0, "host_id": 1000, "size": 1},
                     {"container_id": 1, "host_id": 100000, "size": 65536}]
        },
        "security": {"rootless": true}
      },
      "store": {"graphDriverName": "overlay",
                "graphStatus": {"Backing Filesystem": "xfs"}},
      "version": {"Version": "5.0.3"}
    }"#;

    #[test]
    fn a_rootless_podman_5_on_xfs_reads_as_every_fact_it_gives() {
        let f = parse_info(READY_INFO);
        assert_eq!(f.podman, Some(Ok("5.0.3".into())));
        assert_eq!(f.rootless, Some(true));
        assert_eq!((f.uid_map, f.gid_map), (Some(65_536), Some(65_536)));
        assert_eq!(f.cgroup_version.as_deref(), Some("v2"));
        assert_eq!(f.storage, Some(("overlay".into(), "xfs".into())));
        assert_eq!(f.quota_probe, None, "the probe is the edge's second call");
        assert!(verdict(&f).is_ok(), "{:?}", verdict(&f));
    }

    /// A real Podman's answers (4.3.1 from Debian 12's packages, run as `nobody` on
    /// this build host: no subordinate ids, cgroup v1, vfs storage), saved under
    /// tests/fixtures/oci/: `podman info --format json`, and the last line of what
    /// `podman --storage-opt=size=1073741824 info` printed as it exited 125.
    #[test]
    fn a_real_podman_on_a_host_without_cgroup_v2_is_refused_naming_what_is_missing() {
        let info =
            include_str!("../../../tests/fixtures/oci/podman-4.3.1-info-rootless-cgroup-v1.json");
        let probe = include_str!("../../../tests/fixtures/oci/podman-4.3.1-size-probe-vfs.stderr");
        let f = Facts {
            quota_probe: Some(Err(format!(
                "podman --storage-opt=size=1073741824 failed (exit status: 125): {}",
                probe.trim()
            ))),
            ..parse_info(info)
        };
        assert_eq!(f.podman, Some(Ok("4.3.1".into())));
        assert_eq!(f.rootless, Some(true));
        assert_eq!((f.uid_map, f.gid_map), (Some(0), Some(0)));
        let why = verdict(&f).unwrap_err();
        assert_eq!(
            why,
            "user-namespaces: subordinate ids: 0 uids, 0 gids (at least 65536 each); \
             cgroup-v2: cgroup v1: container limits need cgroup v2"
        );
        assert!(!quota_holds(&f));
        assert!(first_hint(&f).unwrap().contains("usermod --add-subuids"));
    }

    #[test]
    fn text_that_is_not_podmans_json_fails_closed() {
        assert!(verdict(&parse_info("not json")).is_err());
        // Podman answers but says nothing: every check fails, closed.
        let empty = parse_info("{}");
        assert_eq!(checks(&empty).iter().filter(|c| !c.ok).count(), 4);
    }
}
