//! `iterion config show [--json]` and `iterion config path`: the effective settings and where
//! each came from (environment, config file, built-in default), read the way every other command
//! reads them ([`crate::config`]).
use serde_json::json;

use crate::args::{ConfigArgs, ConfigCommand};
use crate::config::{SETTINGS, config_path, load};
use crate::exit::Exit;
use crate::output::outln;

/// Runs the command over the process environment `env` as it was before the config file was
/// folded in (so it can tell the two apart).
pub fn run(args: ConfigArgs, env: &iterion_vocab::Environment) -> Exit {
    match args.command {
        ConfigCommand::Path => match config_path(env) {
            Some(path) => {
                outln!("{}", path.display());
                Exit::Success
            }
            None => {
                crate::output::errln!(
                    "error: no place for a config file: set ITERION_HOME (or HOME)"
                );
                Exit::BadInput
            }
        },
        ConfigCommand::Show(show) => {
            let config = match load(env) {
                Ok(config) => config,
                Err(error) => {
                    crate::output::errln!(
                        "error: {}",
                        crate::terminal::terminal_safe(&error.to_string())
                    );
                    return Exit::BadInput;
                }
            };
            let file = config_path(env);
            let mut rows = Vec::new();
            for setting in SETTINGS {
                let from_env = env.get(setting.variable).filter(|v| !v.is_empty());
                let (value, source) = match (from_env, config.get(setting.key)) {
                    (Some(value), _) => (value, format!("env {}", setting.variable)),
                    (None, Some(value)) => (value.to_owned(), "config file".to_owned()),
                    (None, None) => (setting.default.to_owned(), "default".to_owned()),
                };
                // A store URL may carry a password: only its scheme and host are shown.
                let value = if setting.key == "store_url" {
                    redact_url(&value)
                } else {
                    value
                };
                rows.push((setting.key, value, source));
            }
            if show.json {
                let settings: Vec<_> = rows
                    .iter()
                    .map(|(key, value, source)| json!({"key": key, "value": value, "source": source}))
                    .collect();
                outln!(
                    "{}",
                    json!({
                        "file": file,
                        "file_exists": config.path.is_some(),
                        "settings": settings,
                    })
                );
            } else {
                match (&file, &config.path) {
                    (Some(path), Some(_)) => outln!("config file: {}", path.display()),
                    (Some(path), None) => outln!("config file: {} (not there)", path.display()),
                    (None, _) => outln!("config file: none (set ITERION_HOME or HOME)"),
                }
                for (key, value, source) in &rows {
                    outln!(
                        "{key:<14} {:<40} ({source})",
                        crate::terminal::terminal_safe(value)
                    );
                }
            }
            Exit::Success
        }
    }
}

/// `postgres://user:secret@host/db?x` → `postgres://user:***@host/db`.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let shown = match rest.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{user}:***@{host}")
        }
        None => rest.to_owned(),
    };
    format!("{scheme}://{shown}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_store_url_shows_no_password_or_query() {
        assert_eq!(
            super::redact_url("postgres://ada:hunter2@db:5432/it?sslpassword=x"),
            "postgres://ada:***@db:5432/it"
        );
    }
}
