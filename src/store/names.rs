//! The name a mistyped one most likely meant, among the targets or profiles the store
//! holds: what `no target named "dem"` adds as `; did you mean 'demo'?`.

use super::Store;
use crate::domain::validate::nearest;

/// The stored name of kind `what` ("target" or "profile") nearest in spelling to
/// `typed` (`domain::validate::nearest`'s rule), if one is near enough. Nothing for
/// another kind, or a store that cannot be read: a guess is never worth an error.
pub fn near_name(store: &dyn Store, what: &str, typed: &str) -> Option<String> {
    let names: Vec<String> = match what {
        "target" => store.targets().ok()?.into_iter().map(|t| t.name).collect(),
        "profile" => store.profiles().ok()?.into_iter().map(|p| p.name).collect(),
        _ => return None,
    };
    nearest(typed, names.iter().map(String::as_str)).map(str::to_string)
}

/// `; did you mean 'NAME'?` for the stored name nearest to `typed`, or nothing.
pub fn guess(store: &dyn Store, what: &str, typed: &str) -> String {
    said(near_name(store, what, typed))
}

/// `; did you mean 'NAME'?` for a name [`near_name`] found, or nothing.
pub fn said(near: Option<String>) -> String {
    near.map(|k| format!("; did you mean '{k}'?"))
        .unwrap_or_default()
}
