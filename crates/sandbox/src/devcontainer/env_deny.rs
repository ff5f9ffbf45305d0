//! The env deny class (SANDBOX.md §7.7, widened by issue 15 item 14): variables a repository may
//! not set, because they would run code in, or redirect the trust of, a process the engine starts
//! inside the sandbox (the runner, its git, its shells and interpreters): loader and shell
//! start-up hooks (`LD_*`, `BASH_ENV`, `BASH_FUNC_*`), git's commands and configuration (every
//! `GIT_*` but the identity), interpreter start-up options (`PYTHON*`, `NODE_OPTIONS`, `PERL5OPT`,
//! `RUBYOPT`, `JAVA_TOOL_OPTIONS`), package-index and CA-bundle redirections, proxies, model
//! endpoints, and what the engine plants (`HOME`, `PATH`, `ITERION_*`).
//!
//! This module is the one place the policy lives. Every rule compares case-insensitively (a tool
//! that reads `https_proxy` or `Path` is not fooled), and a key that is not a portable shell name
//! (`[A-Za-z_][A-Za-z0-9_]*`) is denied outright: a key holding `=` would otherwise smuggle a
//! second variable into the `KEY=VALUE` list the driver hands the engine. Only repository-
//! contributed keys are stripped; the workflow's own values are the operator's choice and stay.

/// How one rule matches a key (ASCII case-insensitively).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EnvMatch {
    /// The whole key.
    Exact(&'static str),
    /// The key begins with this.
    Prefix(&'static str),
    /// The key ends with this.
    Suffix(&'static str),
}

impl EnvMatch {
    fn matches(self, key: &str) -> bool {
        let key = key.as_bytes();
        match self {
            EnvMatch::Exact(name) => key.eq_ignore_ascii_case(name.as_bytes()),
            EnvMatch::Prefix(prefix) => key
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix.as_bytes())),
            EnvMatch::Suffix(suffix) => key
                .len()
                .checked_sub(suffix.len())
                .and_then(|start| key.get(start..))
                .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix.as_bytes())),
        }
    }
}

/// One rule of the class and why it is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct EnvDenyRule {
    /// What it matches.
    pub matches: EnvMatch,
    /// The kind of harm, for the docs and the tests.
    pub why: &'static str,
}

const fn exact(name: &'static str, why: &'static str) -> EnvDenyRule {
    EnvDenyRule {
        matches: EnvMatch::Exact(name),
        why,
    }
}

const fn prefix(prefix: &'static str, why: &'static str) -> EnvDenyRule {
    EnvDenyRule {
        matches: EnvMatch::Prefix(prefix),
        why,
    }
}

const PLANTED: &str = "the engine plants it";
const LOADER: &str = "the dynamic loader loads code from it";
const SHELL: &str = "a shell runs code from it";
const GIT: &str = "git runs a command or reads configuration from it";
const INTERP: &str = "an interpreter or runtime runs code from it";
const INDEX: &str = "a package manager or toolchain trusts or runs what it names";
const TLS: &str = "it replaces the CA bundle the proxy's inspection relies on";
const PROXY: &str = "it redirects the engine's own traffic";
const MODEL: &str = "it redirects the model endpoint or its credentials";
const TOOL: &str = "a tool the engine or git starts runs the command it names";

/// The class (SANDBOX.md §7.7 as widened by issue 15). Prefix classes first.
pub(super) const DENIED_ENV: &[EnvDenyRule] = &[
    // What the engine plants.
    prefix("ITERION_", PLANTED),
    exact("PATH", PLANTED),
    exact("HOME", PLANTED),
    exact("SHELL", PLANTED),
    // The loader and libc.
    prefix("LD_", LOADER),
    prefix("DYLD_", LOADER),
    exact("GLIBC_TUNABLES", LOADER),
    exact("GCONV_PATH", LOADER),
    exact("LOCPATH", LOADER),
    exact("NLSPATH", LOADER),
    exact("HOSTALIASES", LOADER),
    exact("RESOLV_HOST_CONF", LOADER),
    exact("MALLOC_CHECK_", LOADER),
    // Shells: start-up files, exported functions, prompts and options that run code.
    prefix("BASH_", SHELL),
    exact("BASHOPTS", SHELL),
    exact("SHELLOPTS", SHELL),
    exact("ENV", SHELL),
    exact("PROMPT_COMMAND", SHELL),
    exact("PS0", SHELL),
    exact("PS1", SHELL),
    exact("PS2", SHELL),
    exact("PS3", SHELL),
    exact("PS4", SHELL),
    exact("IFS", SHELL),
    exact("CDPATH", SHELL),
    exact("GLOBIGNORE", SHELL),
    exact("HISTFILE", SHELL),
    exact("INPUTRC", SHELL),
    exact("ZDOTDIR", SHELL),
    exact("FPATH", SHELL),
    // git: every variable but the identity ones (ALLOWED_ENV_EXCEPTIONS).
    prefix("GIT_", GIT),
    exact("XDG_CONFIG_HOME", GIT),
    exact("XDG_CONFIG_DIRS", GIT),
    exact("PAGER", TOOL),
    exact("MANPAGER", TOOL),
    exact("LESSOPEN", TOOL),
    exact("LESSCLOSE", TOOL),
    prefix("SSH_", TOOL),
    exact("SUDO_ASKPASS", TOOL),
    exact("MAKEFLAGS", TOOL),
    exact("MFLAGS", TOOL),
    exact("GNUMAKEFLAGS", TOOL),
    exact("CURL_HOME", TOOL),
    exact("WGETRC", TOOL),
    exact("NETRC", TOOL),
    prefix("DOCKER_", TOOL),
    exact("CONTAINER_HOST", TOOL),
    exact("KUBECONFIG", TOOL),
    // Interpreters and runtimes.
    prefix("PYTHON", INTERP),
    prefix("NODE_", INTERP),
    prefix("PERL", INTERP),
    prefix("RUBY", INTERP),
    exact("JAVA_TOOL_OPTIONS", INTERP),
    prefix("_JAVA_", INTERP),
    exact("JDK_JAVA_OPTIONS", INTERP),
    exact("CLASSPATH", INTERP),
    exact("MAVEN_OPTS", INTERP),
    exact("GRADLE_OPTS", INTERP),
    exact("PHPRC", INTERP),
    exact("PHP_INI_SCAN_DIR", INTERP),
    prefix("LUA_", INTERP),
    exact("TCLLIBPATH", INTERP),
    prefix("DOTNET_", INTERP),
    prefix("CORECLR_", INTERP),
    prefix("COR_", INTERP),
    prefix("OPENSSL_", INTERP),
    // Package indexes and toolchains.
    prefix("PIP_", INDEX),
    prefix("UV_", INDEX),
    prefix("NPM_CONFIG_", INDEX),
    prefix("YARN_", INDEX),
    prefix("BUNDLE_", INDEX),
    exact("GEM_HOME", INDEX),
    exact("GEM_PATH", INDEX),
    prefix("CARGO_", INDEX),
    prefix("RUSTC", INDEX),
    exact("RUSTUP_TOOLCHAIN", INDEX),
    exact("GOFLAGS", INDEX),
    exact("GOPROXY", INDEX),
    exact("GOSUMDB", INDEX),
    exact("GONOSUMDB", INDEX),
    exact("GONOSUMCHECK", INDEX),
    exact("GONOPROXY", INDEX),
    exact("GOPRIVATE", INDEX),
    exact("GOINSECURE", INDEX),
    exact("GOTOOLCHAIN", INDEX),
    exact("GOENV", INDEX),
    prefix("NIX_", INDEX),
    // TLS trust.
    prefix("SSL_", TLS),
    exact("REQUESTS_CA_BUNDLE", TLS),
    exact("CURL_CA_BUNDLE", TLS),
    exact("AWS_CA_BUNDLE", TLS),
    exact("DENO_CERT", TLS),
    // Proxies: `*_PROXY` in any case (`https_proxy`, `ftp_proxy`, `grpc_proxy`, …).
    EnvDenyRule {
        matches: EnvMatch::Suffix("_PROXY"),
        why: PROXY,
    },
    // Model endpoints and their credentials.
    prefix("ANTHROPIC_", MODEL),
    prefix("OPENAI_", MODEL),
];

/// Keys a denying prefix covers that are known to be inert (identity, not commands): they stay.
pub(super) const ALLOWED_ENV_EXCEPTIONS: &[&str] = &[
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "NODE_ENV",
];

/// Why a repository may not set `key`, or `None` when it may (SANDBOX.md §7.7).
pub(super) fn denied_env_rule(key: &str) -> Option<EnvDenyRule> {
    const NOT_A_NAME: EnvDenyRule = EnvDenyRule {
        matches: EnvMatch::Exact(""),
        why: "not a portable variable name ([A-Za-z_][A-Za-z0-9_]*)",
    };
    if !is_portable_name(key) {
        return Some(NOT_A_NAME);
    }
    if ALLOWED_ENV_EXCEPTIONS.contains(&key) {
        return None;
    }
    DENIED_ENV
        .iter()
        .copied()
        .find(|rule| rule.matches.matches(key))
}

/// Whether a repository may not set `key` (SANDBOX.md §7.7).
pub(super) fn is_denied_env_key(key: &str) -> bool {
    denied_env_rule(key).is_some()
}

fn is_portable_name(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
