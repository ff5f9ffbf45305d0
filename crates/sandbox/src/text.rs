//! Small text and path helpers shared by validation and screening. Private: callers see their
//! effects through the typed errors.

use std::path::{Component, Path, PathBuf};

pub(crate) use iterion_vocab::{escape_controls, has_control};

/// Go's `path.Clean` for slash-separated strings: the shortest equivalent path by purely lexical
/// processing (collapse `//`, drop `.`, resolve `..` against the preceding element, drop a
/// trailing `/`). `..` above the root of an absolute path stays at the root. An empty input is `.`.
pub(crate) fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| *last != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Whether `path` is absolute and already in `clean` form.
pub fn is_clean_absolute(path: &str) -> bool {
    path.starts_with('/') && clean(path) == path
}

/// Lexical cleaning of a host path: like [`clean`] but on `Path` components, so a non-UTF-8
/// workspace path survives. `..` above the root stays at the root.
pub(crate) fn clean_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => out.push(prefix.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                let at_root = out.parent().is_none() && out.has_root();
                let ends_in_parent =
                    matches!(out.components().next_back(), Some(Component::ParentDir));
                if out.as_os_str().is_empty() || ends_in_parent {
                    out.push("..");
                } else if !at_root {
                    out.pop();
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Whether `name` matches `[A-Za-z_][A-Za-z0-9_]*`: a portable environment variable name.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn clean_matches_go_path_clean() {
        let cases = [
            ("", "."),
            ("/", "/"),
            ("//a//b/", "/a/b"),
            ("/a/./b/../c", "/a/c"),
            ("/../..", "/"),
            ("a/../..", ".."),
            ("./a", "a"),
            ("/run/iterion/", "/run/iterion"),
        ];
        let got: Vec<(&str, String)> = cases.iter().map(|(i, _)| (*i, clean(i))).collect();
        let want: Vec<(&str, String)> = cases.iter().map(|(i, o)| (*i, (*o).to_owned())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn clean_path_resolves_parent_components_lexically() {
        let cases = [
            ("/ws/./a/../../..", "/"),
            ("/ws/a/../b", "/ws/b"),
            ("/ws/link/..", "/ws"),
            ("a/../../b", "../b"),
        ];
        let got: Vec<PathBuf> = cases
            .iter()
            .map(|(i, _)| clean_path(Path::new(i)))
            .collect();
        let want: Vec<PathBuf> = cases.iter().map(|(_, o)| PathBuf::from(o)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn control_characters_are_escaped_for_messages() {
        assert_eq!(escape_controls("a\nb\r\0\u{1b}c"), "a\\nb\\r\\0\\u{1b}c");
        assert_eq!(escape_controls("plain"), "plain");
    }

    #[test]
    fn env_names_follow_the_portable_grammar() {
        let got: Vec<bool> = ["A", "_x1", "1A", "", "A-B", "a.b"]
            .iter()
            .map(|n| is_env_name(n))
            .collect();
        assert_eq!(got, vec![true, true, false, false, false, false]);
    }
}
