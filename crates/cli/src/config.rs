//! The operator's config file: what people would otherwise set on every command.
//!
//! Where: `$ITERION_HOME/config.toml` when `ITERION_HOME` is set, else
//! `$XDG_CONFIG_HOME/iterion/config.toml`, else `~/.config/iterion/config.toml`. A missing file
//! is no config; a file that is there but unreadable, not TOML, or has an unknown key or a bad
//! value is a [`ConfigError`] naming the file and the key (exit 2).
//!
//! How it applies: [`fold`] reads it **once**, at the edge (main), and folds each setting into
//! the [`Environment`] the CLI hands down, as the variable that setting stands for, *only where
//! the environment does not set that variable*. Flags already beat variables everywhere, so the
//! precedence is flag > environment > config file > built-in default; for the sandbox mode the
//! four tiers stay: `--sandbox` > the workflow's `sandbox:` block > `ITERION_SANDBOX_DEFAULT`
//! (the environment's, else the config file's `sandbox`) > `auto`. Nothing below the CLI knows a
//! config file exists.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use iterion_vocab::Environment;

/// The variable naming the iterion home (and so the config file's first place).
const ITERION_HOME: &str = "ITERION_HOME";

/// One setting of the config file: its key, the variable it stands for, and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The key in `config.toml`.
    pub key: &'static str,
    /// The variable it fills when the environment leaves it unset.
    pub variable: &'static str,
    /// What `config show` prints when neither sets it.
    pub default: &'static str,
    /// What the value must be, as an error says it.
    pub expected: &'static str,
}

/// Every key the file may hold, in the order `config show` prints them.
pub const SETTINGS: [Setting; 5] = [
    Setting {
        key: "sandbox",
        variable: "ITERION_SANDBOX_DEFAULT",
        default: "auto",
        expected: "\"auto\" or \"none\"",
    },
    Setting {
        key: "default_image",
        variable: "ITERION_SANDBOX_DEFAULT_IMAGE",
        default: "(the built-in default image)",
        expected: "an image reference such as \"ghcr.io/acme/dev:1\"",
    },
    Setting {
        key: "host_state",
        variable: "ITERION_SANDBOX_HOST_STATE",
        default: "(the workflow's host_state:, else auto)",
        expected: "\"auto\" or \"none\"",
    },
    Setting {
        key: "proxy_hosts",
        variable: "ITERION_SANDBOX_PROXY_HOSTS",
        default: "(none: the proxy resolves names with the system resolver)",
        expected: "a table of host names to IP addresses, e.g. { \"db.internal\" = \"172.17.0.1\" }",
    },
    Setting {
        key: "store_url",
        variable: "ITERION_STORE_URL",
        default: "(SQLite under ITERION_HOME)",
        expected: "a postgres:// or postgresql:// URL",
    },
];

/// Why the config file cannot be used. Each names the file; a bad value names its key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read the config file {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("the config file {} is not valid TOML: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// What the parser said (with the line).
        message: String,
    },
    /// A key iterion does not know (a typo would otherwise be ignored silently).
    #[error(
        "the config file {} has an unknown key `{key}`; the keys are {}",
        path.display(),
        SETTINGS.iter().map(|s| s.key).collect::<Vec<_>>().join(", ")
    )]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
    },
    /// A known key with a value it cannot take.
    #[error("the config file {}: `{key}` must be {expected}", path.display())]
    BadValue {
        /// The file.
        path: PathBuf,
        /// The key (`proxy_hosts.db`, for an entry of a table).
        key: String,
        /// What it must be.
        expected: &'static str,
    },
}

impl ConfigError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "CONFIG_UNREADABLE",
            Self::Syntax { .. } => "CONFIG_SYNTAX",
            Self::UnknownKey { .. } => "CONFIG_UNKNOWN_KEY",
            Self::BadValue { .. } => "CONFIG_BAD_VALUE",
        }
    }
}

/// Where the config file is for `env` (whether or not it exists); `None` when neither
/// `ITERION_HOME`, `XDG_CONFIG_HOME` nor `HOME` says.
pub fn config_path(env: &Environment) -> Option<PathBuf> {
    let absolute = |name: &str| {
        env.get_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(home) = absolute(ITERION_HOME) {
        return Some(home.join("config.toml"));
    }
    if let Some(xdg) = absolute("XDG_CONFIG_HOME") {
        return Some(xdg.join("iterion").join("config.toml"));
    }
    absolute("HOME").map(|home| home.join(".config").join("iterion").join("config.toml"))
}

/// The config file's settings, each as the variable value it stands for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The file read; `None` when there is none.
    pub path: Option<PathBuf>,
    /// `(setting, value as the variable takes it)`, in [`SETTINGS`] order.
    pub values: Vec<(Setting, String)>,
}

impl Config {
    /// The value of `key`, when the file sets it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(s, _)| s.key == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the config file for `env`.
///
/// # Errors
/// [`ConfigError`] for a file that is there but cannot be used.
pub fn load(env: &Environment) -> Result<Config, ConfigError> {
    let Some(path) = config_path(env) else {
        return Ok(Config::default());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Config::default());
        }
        Err(source) => return Err(ConfigError::Unreadable { path, source }),
    };
    let values = parse(&path, &text)?;
    Ok(Config {
        path: Some(path),
        values,
    })
}

/// The settings `text` (the file `path`) holds, checked.
pub fn parse(path: &Path, text: &str) -> Result<Vec<(Setting, String)>, ConfigError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string().trim().replace('\n', " "),
        })?;
    for key in table.keys() {
        if !SETTINGS.iter().any(|s| s.key == key) {
            return Err(ConfigError::UnknownKey {
                path: path.to_owned(),
                key: key.clone(),
            });
        }
    }
    let mut values = Vec::new();
    for setting in SETTINGS {
        let Some(value) = table.get(setting.key) else {
            continue;
        };
        let bad = |key: String| ConfigError::BadValue {
            path: path.to_owned(),
            key,
            expected: setting.expected,
        };
        let text = match setting.key {
            "sandbox" | "host_state" => match value.as_str() {
                Some(word @ ("auto" | "none")) => word.to_owned(),
                _ => return Err(bad(setting.key.to_owned())),
            },
            "default_image" => match value.as_str() {
                Some(image) if is_image_ref(image) => image.to_owned(),
                _ => return Err(bad(setting.key.to_owned())),
            },
            "store_url" => match value.as_str() {
                Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                    url.to_owned()
                }
                _ => return Err(bad(setting.key.to_owned())),
            },
            _ => proxy_hosts(value).map_err(|entry| {
                bad(match entry {
                    Some(name) => format!("{}.{name}", setting.key),
                    None => setting.key.to_owned(),
                })
            })?,
        };
        values.push((setting, text));
    }
    Ok(values)
}

/// An image reference: non-empty, no whitespace or control characters, not an option.
fn is_image_ref(text: &str) -> bool {
    !text.is_empty()
        && !text.starts_with('-')
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `{ name = "ip" | ["ip", …] }` as `name=ip,name=ip`; `Err(Some(name))` names the bad entry,
/// `Err(None)` a value that is not a table.
fn proxy_hosts(value: &toml::Value) -> Result<String, Option<String>> {
    let table = value.as_table().ok_or(None)?;
    let mut entries = Vec::new();
    for (name, ips) in table {
        let bad = || Some(name.clone());
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        if !name_ok {
            return Err(bad());
        }
        let list: Vec<&toml::Value> = match ips {
            toml::Value::Array(list) => list.iter().collect(),
            one => vec![one],
        };
        if list.is_empty() {
            return Err(bad());
        }
        for ip in list {
            let ip: IpAddr = ip.as_str().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
            entries.push(format!("{name}={ip}"));
        }
    }
    Ok(entries.join(","))
}

/// `env` with the config file's settings folded in where `env` leaves their variables unset
/// (see the module doc); the config read, for `config show`.
///
/// # Errors
/// [`ConfigError`] from [`load`].
pub fn fold(env: Environment) -> Result<(Environment, Config), ConfigError> {
    let config = load(&env)?;
    let mut folded = env;
    for (setting, value) in &config.values {
        if folded.get(setting.variable).is_none_or(|v| v.is_empty()) {
            folded = folded.with(setting.variable, value);
        }
    }
    Ok((folded, config))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn codes(text: &str) -> Result<Vec<(&'static str, String)>, (String, String)> {
        parse(Path::new("/cfg/config.toml"), text)
            .map(|v| v.into_iter().map(|(s, v)| (s.key, v)).collect())
            .map_err(|e| (e.code().to_owned(), e.to_string()))
    }

    #[test]
    fn every_key_parses_into_the_variable_value_it_stands_for() {
        let got = codes(
            "sandbox = \"none\"\ndefault_image = \"ghcr.io/acme/dev:1\"\nhost_state = \"auto\"\n\
             store_url = \"postgres://u@db/iterion\"\n[proxy_hosts]\n\"db.internal\" = \"172.17.0.1\"\n\
             api = [\"10.0.0.1\", \"::1\"]\n",
        );
        assert_eq!(
            got,
            Ok(vec![
                ("sandbox", "none".to_owned()),
                ("default_image", "ghcr.io/acme/dev:1".to_owned()),
                ("host_state", "auto".to_owned()),
                (
                    "proxy_hosts",
                    "api=10.0.0.1,api=::1,db.internal=172.17.0.1".to_owned()
                ),
                ("store_url", "postgres://u@db/iterion".to_owned()),
            ])
        );
    }

    #[test]
    fn a_bad_file_is_a_typed_error_naming_the_file_and_the_key() {
        let got: Vec<_> = [
            "sandbox = \"inline\"",
            "sandboxx = \"auto\"",
            "default_image = \"-v /:/host\"",
            "store_url = \"mysql://x\"",
            "[proxy_hosts]\n\"db\" = \"not-an-ip\"",
            "proxy_hosts = \"db=1.2.3.4\"",
            "sandbox = ",
        ]
        .into_iter()
        .map(|text| codes(text).unwrap_err())
        .collect();
        let codes: Vec<&str> = got.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            codes,
            vec![
                "CONFIG_BAD_VALUE",
                "CONFIG_UNKNOWN_KEY",
                "CONFIG_BAD_VALUE",
                "CONFIG_BAD_VALUE",
                "CONFIG_BAD_VALUE",
                "CONFIG_BAD_VALUE",
                "CONFIG_SYNTAX",
            ]
        );
        assert_eq!(
            got[0].1,
            "the config file /cfg/config.toml: `sandbox` must be \"auto\" or \"none\""
        );
        assert!(got[1].1.contains("unknown key `sandboxx`"), "{}", got[1].1);
        assert!(
            got[4].1.contains("`proxy_hosts.db` must be"),
            "{}",
            got[4].1
        );
        assert!(
            got[6]
                .1
                .starts_with("the config file /cfg/config.toml is not valid TOML")
        );
    }

    #[test]
    fn the_environment_beats_the_file_and_the_file_fills_what_it_leaves_unset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            "sandbox = \"none\"\nhost_state = \"none\"\n",
        )
        .unwrap();
        let env = Environment::from_pairs([
            ("ITERION_HOME", dir.path().to_str().unwrap()),
            ("ITERION_SANDBOX_HOST_STATE", "auto"),
        ]);
        let (folded, config) = fold(env).unwrap();
        assert_eq!(config.path, Some(dir.path().join("config.toml")));
        assert_eq!(
            (
                folded.get("ITERION_SANDBOX_DEFAULT"),
                folded.get("ITERION_SANDBOX_HOST_STATE")
            ),
            (Some("none".to_owned()), Some("auto".to_owned()))
        );
    }

    #[test]
    fn the_file_is_found_under_iterion_home_then_xdg_then_home() {
        let env = |pairs: &[(&str, &str)]| config_path(&Environment::from_pairs(pairs.to_vec()));
        assert_eq!(
            env(&[("ITERION_HOME", "/ih"), ("HOME", "/h")]),
            Some(PathBuf::from("/ih/config.toml"))
        );
        assert_eq!(
            env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")]),
            Some(PathBuf::from("/x/iterion/config.toml"))
        );
        assert_eq!(
            env(&[("HOME", "/h")]),
            Some(PathBuf::from("/h/.config/iterion/config.toml"))
        );
        assert_eq!(env(&[("HOME", "relative")]), None);
    }
}
