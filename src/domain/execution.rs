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

/// `image=`: an OCI image reference pinned by digest, `NAME[:TAG]@sha256:<64 hex>`,
/// where NAME is a registry path of lowercase letters, digits and `._-/:` (a port).
/// A tag alone can move under us; a digest cannot. Empty clears it.
pub fn image(arg: &str, value: &str) -> Result<Option<String>, Invalid> {
    if value.is_empty() {
        return Ok(None);
    }
    let bad = |why: &str| Invalid::new(arg, format!("{why} (got {value:?})"));
    if value.len() > MAX_IMAGE_LEN {
        return Err(bad("too long for an image reference"));
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
    let ok_name = !name.is_empty()
        && !name.starts_with(['-', '.', '/', ':'])
        && !name.ends_with(['/', ':'])
        && !name.contains("//")
        && name.bytes().all(|b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'.' | b'_' | b'-' | b'/' | b':')
        });
    // A tag, if any, is mixed case: allow upper case after the last ':' past the
    // last '/'.
    let ok_tagged = || {
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        match name[last_slash..].rfind(':') {
            Some(i) => {
                let (repo, tag) = (&name[..last_slash + i], &name[last_slash + i + 1..]);
                !repo.is_empty()
                    && !tag.is_empty()
                    && tag.len() <= 128
                    && tag
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
                    && repo.bytes().all(|b| {
                        b.is_ascii_lowercase()
                            || b.is_ascii_digit()
                            || matches!(b, b'.' | b'_' | b'-' | b'/' | b':')
                    })
            }
            None => false,
        }
    };
    if !(ok_name || ok_tagged()) {
        return Err(bad(
            "is not an image name: lowercase letters, digits and ._-/ (a registry may \
             have :PORT, a tag may follow the name)",
        ));
    }
    Ok(Some(value.to_string()))
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
