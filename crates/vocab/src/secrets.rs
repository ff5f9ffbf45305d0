//! The file a secret is delivered as (SANDBOX.md §8.7). The validator computes a file secret's
//! default mount path and the drivers name the file they write with the same function, so the two
//! cannot disagree.

/// Where file secrets are mounted in the container.
pub const SECRETS_DIR: &str = "/run/iterion/secrets";

/// The file name a secret gets under [`SECRETS_DIR`]: every character outside `[A-Za-z0-9_.-]`
/// becomes `_`, leading and trailing `._-` are trimmed, and an empty result becomes `secret`.
///
/// ```
/// assert_eq!(iterion_vocab::secret_file_name("gh token/../x"), "gh_token_.._x");
/// assert_eq!(iterion_vocab::secret_file_name("..."), "secret");
/// ```
pub fn secret_file_name(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches(|c| matches!(c, '_' | '.' | '-'));
    if trimmed.is_empty() {
        "secret".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The default mount path of a file secret: `/run/iterion/secrets/<file name>`.
pub fn default_secret_mount_path(name: &str) -> String {
    format!("{SECRETS_DIR}/{}", secret_file_name(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitising_follows_sandbox_8_7() {
        assert_eq!(secret_file_name("registry_token"), "registry_token");
        assert_eq!(secret_file_name("__x__"), "x");
        assert_eq!(secret_file_name("a b/c"), "a_b_c");
        assert_eq!(secret_file_name("-._"), "secret");
        assert_eq!(
            default_secret_mount_path("é"),
            "/run/iterion/secrets/secret"
        );
    }

    #[test]
    fn a_secret_name_cannot_leave_the_secrets_dir() {
        for name in ["../../etc/passwd", "/abs", "a/b", "..", "\u{0}x", "é"] {
            let file = secret_file_name(name);
            assert!(
                !file.contains('/') && file != ".." && file != ".",
                "{name:?} -> {file:?}"
            );
            assert!(default_secret_mount_path(name).starts_with("/run/iterion/secrets/"));
        }
        assert_eq!(secret_file_name("GITHUB_TOKEN"), "GITHUB_TOKEN");
    }
}
