//! How a profile's runners execute: `native` (the default: a process on the host under
//! the containment of `isolation`) or `oci` (a rootless Podman container from an image
//! pinned by digest), with the parsers of `execution=`, `image=` and `disk_max=`.

use super::validate::Invalid;
use serde::{Deserialize, Serialize};

/// A profile's execution backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Execution {
    /// A runner process on the host, contained as the host's `isolation` says.
    #[default]
    Native,
    /// A rootless Podman container per attempt (`runner::oci`).
    Oci,
}

impl Execution {
    pub fn as_str(self) -> &'static str {
        match self {
            Execution::Native => "native",
            Execution::Oci => "oci",
        }
    }

    /// `execution=`: `native` or `oci`.
    pub fn parse(arg: &str, value: &str) -> Result<Execution, Invalid> {
        match value {
            "native" => Ok(Execution::Native),
            "oci" => Ok(Execution::Oci),
            _ => Err(Invalid::new(
                arg,
                format!("expected native or oci (got {value:?})"),
            )),
        }
    }

    /// The stored word read back leniently: `native` (or nothing) is native; any other
    /// word (a newer build's backend) is read as `oci`, so it runs nothing natively
    /// that was meant to be isolated.
    pub fn from_stored(s: &str) -> Execution {
        match s {
            "native" | "" => Execution::Native,
            _ => Execution::Oci,
        }
    }
}

/// The longest image reference accepted (Podman's own limit is about this).
const MAX_IMAGE_LEN: usize = 255 + 8 + 64;

/// Podman's transports: a reference that starts with one names a local archive, a
/// directory or another store instead of a registry, and a local file defeats the
/// digest pin (the digest is then of whatever the file holds).
const TRANSPORTS: &[&str] = &[
    "docker-archive:",
    "oci-archive:",
    "oci:",
    "dir:",
    "docker-daemon:",
    "containers-storage:",
    "docker://",
    "ostree:",
    "sif:",
    "tarball:",
];

/// `image=`: an OCI image reference pinned by digest, `NAME[:TAG]@sha256:<64 hex>`,
/// where NAME is `[REGISTRY[:PORT]/]PATH`: a registry host of lowercase letters,
/// digits, `.` and `-`, a numeric port, and path components of lowercase letters and
/// digits joined by `.`, `_`, `__` or dashes. A `:` is taken only as the port or the
/// tag, never as a Podman transport (`docker-archive:`, `oci-archive:`…). A tag alone
/// can move under us; a digest cannot. Empty clears it.
pub fn image(arg: &str, value: &str) -> Result<Option<String>, Invalid> {
    if value.is_empty() {
        return Ok(None);
    }
    let bad = |why: &str| Invalid::new(arg, format!("{why} (got {value:?})"));
    if value.len() > MAX_IMAGE_LEN {
        return Err(bad("too long for an image reference"));
    }
    if let Some(t) = TRANSPORTS
        .iter()
        .find(|t| value.to_ascii_lowercase().starts_with(*t))
    {
        return Err(bad(&format!(
            "names a Podman transport ({t}), not a registry image; a local archive or \
             directory defeats the digest pin: give REGISTRY/NAME@sha256:<64 hex>"
        )));
    }
    let Some((name, digest)) = value.split_once('@') else {
        return Err(bad(
            "must be pinned by digest: REF@sha256:<64 lowercase hex digits>",
        ));
    };
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or_else(|| bad("must be pinned by digest: REF@sha256:<64 lowercase hex digits>"))?;
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(bad(
            "the digest must be sha256: followed by 64 lowercase hex digits",
        ));
    }
    if !is_image_name(name) {
        return Err(bad(
            "is not an image name: [REGISTRY[:PORT]/]PATH[:TAG], with lowercase letters, \
             digits and ._- (a : only before a numeric port or a tag)",
        ));
    }
    Ok(Some(value.to_string()))
}

/// `[REGISTRY[:PORT]/]PATH[:TAG]` as the distribution reference grammar has it: the
/// first component is a registry when it has a `.` or a `:`, or is `localhost`, and
/// more follow.
fn is_image_name(name: &str) -> bool {
    // The tag: after the last ':' that follows the last '/'.
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    if let Some(tag) = tag {
        let ok = !tag.is_empty()
            && tag.len() <= 128
            && tag
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
            && tag
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !ok {
            return false;
        }
    }
    let mut parts: Vec<&str> = repo.split('/').collect();
    if parts.len() > 1 {
        let first = parts[0];
        if first.contains(['.', ':']) || first == "localhost" {
            if !is_registry(first) {
                return false;
            }
            parts.remove(0);
        }
    }
    !parts.is_empty() && parts.iter().all(|p| is_path_component(p))
}

/// `HOST[:PORT]`: dot-separated labels of lowercase letters, digits and inner
/// dashes, and a port of 1 to 65535 in decimal.
fn is_registry(s: &str) -> bool {
    let (host, port) = match s.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    let port_ok = port.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n))
    });
    let label = |l: &str| {
        !l.is_empty()
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    port_ok && host.split('.').all(label)
}

/// A path component: lowercase letters and digits, joined by one `.`, one or two
/// `_`, or any number of `-`.
fn is_path_component(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = s.as_bytes();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &s[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// The smallest container disk limit: an image's runner and a checkout need room.
pub const MIN_DISK_MAX: u64 = 1 << 30;

/// `disk_max`: the size an `oci` runner's container may write (`--storage-opt
/// size=`), at least [`MIN_DISK_MAX`], or empty/`none` for the default.
pub fn disk_max(arg: &str, value: &str) -> Result<Option<u64>, Invalid> {
    if matches!(value, "" | "none" | "max") {
        return Ok(None);
    }
    let b = super::isolation::parse_bytes(arg, value)?;
    if b < MIN_DISK_MAX {
        return Err(Invalid::new(
            arg,
            format!("must be at least 1G, or none for the default (got {value:?})"),
        ));
    }
    Ok(Some(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn images_must_be_pinned_by_digest() {
        for ok in [
            format!("ghcr.io/acme/runner@{D}"),
            format!("ghcr.io/acme/runner:2.330.0@{D}"),
            format!("localhost:5000/runner:Latest@{D}"),
            format!("runner@{D}"),
            format!("localhost/runner@{D}"),
            format!("registry.example.com:443/team/sub_dir/my__runner-x:v1.2_rc-3@{D}"),
            format!("docker.io/library/ubuntu:24.04@{D}"),
            format!("10.0.0.1:5000/runner@{D}"),
        ] {
            assert_eq!(image("image", &ok).unwrap(), Some(ok.clone()), "{ok}");
        }
        assert_eq!(image("image", "").unwrap(), None);
        for bad in [
            "ghcr.io/acme/runner".to_string(),
            "ghcr.io/acme/runner:latest".into(),
            format!("ghcr.io/acme/runner@{}", &D[..70]),
            "ghcr.io/acme/runner@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef".into(),
            "ghcr.io/acme/runner@sha512:00".into(),
            format!("Ghcr.io/Acme@{D}"),
            format!("-rm@{D}"),
            format!("a b@{D}"),
            format!("@{D}"),
            // Issue 33: Podman transports name local files, which defeat the pin.
            format!("docker-archive:/etc/shadow@{D}"),
            format!("oci-archive:/tmp/x@{D}"),
            format!("oci:/tmp/layout@{D}"),
            format!("dir:/tmp/d@{D}"),
            format!("containers-storage:runner@{D}"),
            format!("docker-daemon:runner:latest@{D}"),
            format!("docker://ghcr.io/acme/runner@{D}"),
            format!("Docker-Archive:/etc/shadow@{D}"),
            // A ':' anywhere but a numeric port or the tag.
            format!("weird:/etc/shadow@{D}"),
            format!("a:b/c@{D}"),
            format!("localhost:http/runner@{D}"),
            format!("localhost:99999/runner@{D}"),
            format!("ghcr.io/acme:x/runner@{D}"),
            format!("ghcr.io/acme/runner:@{D}"),
            format!("ghcr.io/acme/runner:-x@{D}"),
            format!("ghcr.io/acme/../runner@{D}"),
            format!("ghcr.io/acme/run..ner@{D}"),
            format!("ghcr.io//runner@{D}"),
            format!("ghcr.io/acme/runner/@{D}"),
            format!("-.io/acme@{D}"),
        ] {
            let e = image("image", &bad).unwrap_err();
            assert_eq!(e.arg, "image", "{bad}");
        }
    }

    #[test]
    fn execution_words() {
        assert_eq!(
            Execution::parse("execution", "oci").unwrap(),
            Execution::Oci
        );
        assert_eq!(Execution::default(), Execution::Native);
        assert_eq!(
            Execution::parse("execution", "docker").unwrap_err().arg,
            "execution"
        );
        assert_eq!(Execution::from_stored("native"), Execution::Native);
        assert_eq!(Execution::from_stored("vm"), Execution::Oci);
    }

    #[test]
    fn disk_limits() {
        assert_eq!(disk_max("disk_max", "20G").unwrap(), Some(20 << 30));
        assert_eq!(disk_max("disk_max", "none").unwrap(), None);
        assert!(disk_max("disk_max", "10M").is_err());
    }
}
