//! Reading the devcontainer (SANDBOX.md §7.1–§7.2): the I/O shell [`read_from_repo`] finds the
//! file and hands its text on; the pure [`parse_devcontainer`] turns JSONC into a typed
//! [`Devcontainer`], with shape failures typed by field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jsonc_parser::ParseOptions;
use serde_json::{Map, Value};

use iterion_repofile::RepoFileError;

use crate::error::DevcontainerError;

/// Where the devcontainer is looked for, relative to the repository root, in order (§7.1).
pub(super) const DEVCONTAINER_CANDIDATES: &[&str] =
    &[".devcontainer/devcontainer.json", ".devcontainer.json"];

/// The largest devcontainer file read (defined here): 256 KiB. A bigger file is unusable, so a
/// hostile repository cannot make the engine parse an unbounded document.
pub(super) const MAX_DEVCONTAINER_BYTES: u64 = 256 * 1024;

/// What [`read_from_repo`] found.
#[derive(Debug)]
pub enum DevcontainerText {
    /// Neither candidate exists: auto uses the default image, labelled `(default image: …)`.
    NotFound,
    /// A candidate exists but cannot be used as text (unreadable, too large, outside the
    /// repository): auto falls back, labelled `(devcontainer unusable — …)`.
    Unusable(DevcontainerError),
    /// The first readable candidate.
    Found {
        /// `<repo root>/<candidate>`, as written (the label's path).
        path: PathBuf,
        /// Its content.
        text: String,
    },
}

/// Finds and reads the repository's devcontainer (SANDBOX.md §7.1): `.devcontainer/devcontainer.json`,
/// then `.devcontainer.json`. The first candidate that exists decides: a read error other than
/// "not found", a file larger than `MAX_DEVCONTAINER_BYTES`, anything the repository-file
/// reader refuses (outside the repository root or through a symlink leaving it, not a regular
/// file, not read in time) makes it unusable.
pub fn read_from_repo(repo_root: &Path) -> DevcontainerText {
    for candidate in DEVCONTAINER_CANDIDATES {
        let path = repo_root.join(candidate);
        return match repo_text(repo_root, Path::new(candidate), MAX_DEVCONTAINER_BYTES) {
            Ok(text) => DevcontainerText::Found { path, text },
            // A dangling symlink is "found but unusable", not absent.
            Err(RepoFileError::NotFound { .. }) if std::fs::symlink_metadata(&path).is_ok() => {
                DevcontainerText::Unusable(DevcontainerError::Unreadable {
                    path,
                    error: "a dangling symlink".to_owned(),
                })
            }
            Err(RepoFileError::NotFound { .. }) => continue,
            Err(RepoFileError::TooLarge { limit, .. }) => {
                DevcontainerText::Unusable(DevcontainerError::TooLarge {
                    path,
                    limit_bytes: limit,
                })
            }
            Err(RepoFileError::Io { source, .. }) => {
                DevcontainerText::Unusable(DevcontainerError::Unreadable {
                    path,
                    error: source.to_string(),
                })
            }
            Err(
                source @ (RepoFileError::OutsideRepository { .. }
                | RepoFileError::Symlink { .. }
                | RepoFileError::NotRegular { .. }
                | RepoFileError::TimedOut { .. }),
            ) => DevcontainerText::Unusable(DevcontainerError::Refused { source }),
        };
    }
    DevcontainerText::NotFound
}

/// Reads `relative` beneath the repository `root` through the one repository-file reader
/// ([`iterion_repofile`]: a regular file beneath the root, at most `limit` bytes, time-bounded),
/// as UTF-8.
pub(super) fn repo_text(root: &Path, relative: &Path, limit: u64) -> Result<String, RepoFileError> {
    iterion_repofile::read_text_beneath(root, relative, limit)
}

/// One lifecycle command in a form the devcontainer spec allows: a shell string or an argv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandForm {
    /// Run with `sh -c`.
    Shell(String),
    /// Run as an argv (converted by POSIX quoting).
    Argv(Vec<String>),
}

/// A lifecycle command (`postCreateCommand`, `postStartCommand`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LifecycleCommand {
    /// A string or an array.
    Single(CommandForm),
    /// An object of named commands; converted in sorted key order (§7.3).
    Named(BTreeMap<String, CommandForm>),
}

/// `build` of a devcontainer, as written (paths relative to the devcontainer file's directory).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevcontainerBuild {
    /// `build.dockerfile` (required).
    pub dockerfile: String,
    /// `build.context`; default: the devcontainer file's directory.
    pub context: Option<String>,
    /// `build.args`.
    pub args: BTreeMap<String, String>,
    /// `build.target`: read, then dropped by conversion (§7.3).
    pub target: Option<String>,
}

/// The fields of a devcontainer that iterion reads (SANDBOX.md §7.2). Fields never acted on
/// (`customizations`, `onCreateCommand`, `updateContentCommand`) are not kept; `initializeCommand`
/// is recorded as present only, because it never runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Devcontainer {
    /// The file it came from.
    pub path: PathBuf,
    /// `name`.
    pub name: Option<String>,
    /// `image`.
    pub image: Option<String>,
    /// `build`.
    pub build: Option<DevcontainerBuild>,
    /// `containerEnv` (wins a key over `remoteEnv`).
    pub container_env: BTreeMap<String, String>,
    /// `remoteEnv`; a `null` value (unset) is skipped.
    pub remote_env: BTreeMap<String, String>,
    /// `mounts`, each in `--mount` grammar (object mounts converted to
    /// `type=<t>,source=<s>,target=<t>`).
    pub mounts: Vec<String>,
    /// `runArgs`: screened (§7.2), never mapped.
    pub run_args: Vec<String>,
    /// `remoteUser`.
    pub remote_user: Option<String>,
    /// `containerUser`.
    pub container_user: Option<String>,
    /// `workspaceFolder`.
    pub workspace_folder: Option<String>,
    /// `workspaceMount`: kept, not mapped.
    pub workspace_mount: Option<String>,
    /// `postCreateCommand`.
    pub post_create_command: Option<LifecycleCommand>,
    /// `postStartCommand`: kept but unused.
    pub post_start_command: Option<LifecycleCommand>,
    /// `forwardPorts`, `features`, `hostRequirements`: kept but unused.
    pub unused: BTreeMap<String, Value>,
    /// Whether `initializeCommand` was present. It is a host command and never runs.
    pub has_initialize_command: bool,
}

/// Parses devcontainer text (SANDBOX.md §7.2). Pure. JSONC: `//` and `/* */` comments and
/// trailing commas are accepted; unquoted keys, single quotes and JSON5 numbers are not. The
/// shape rules: a top-level object; exactly one of `image` and `build`; a `build` with a
/// `dockerfile`; strings where strings are expected; object mounts with only `source`, `target`
/// and `type`. (`workspaceFolder` is checked after expansion, by conversion.)
///
/// # Errors
///
/// [`DevcontainerError::TooLarge`] (over `MAX_DEVCONTAINER_BYTES`),
/// [`DevcontainerError::NotJsonc`] or [`DevcontainerError::Shape`] — all unusable.
///
/// ```
/// use iterion_sandbox::parse_devcontainer;
/// let dc = parse_devcontainer("dc.json".as_ref(), r#"{ "image": "alpine", /* ok */ }"#)?;
/// assert_eq!(dc.image.as_deref(), Some("alpine"));
/// # Ok::<(), iterion_sandbox::DevcontainerError>(())
/// ```
pub fn parse_devcontainer(path: &Path, text: &str) -> Result<Devcontainer, DevcontainerError> {
    if text.len() as u64 > MAX_DEVCONTAINER_BYTES {
        return Err(DevcontainerError::TooLarge {
            path: path.to_owned(),
            limit_bytes: MAX_DEVCONTAINER_BYTES,
        });
    }
    let options = ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let value: Value = jsonc_parser::parse_to_serde_value(text, &options).map_err(|error| {
        DevcontainerError::NotJsonc {
            path: path.to_owned(),
            error: error.to_string(),
        }
    })?;
    Fields { path, value }.devcontainer()
}

struct Fields<'a> {
    path: &'a Path,
    value: Value,
}

impl Fields<'_> {
    fn shape(&self, field: &str, reason: &str) -> DevcontainerError {
        DevcontainerError::Shape {
            path: self.path.to_owned(),
            field: field.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn devcontainer(&self) -> Result<Devcontainer, DevcontainerError> {
        let Value::Object(root) = &self.value else {
            return Err(self.shape("(root)", "want an object"));
        };
        let build = match root.get("build") {
            None | Some(Value::Null) => None,
            Some(value) => Some(self.build(value)?),
        };
        let image = self.opt_string(root, "image")?;
        match (&image, &build) {
            (Some(_), Some(_)) => {
                return Err(self.shape("image", "image and build are exclusive; set only one"));
            }
            (None, None) => {
                return Err(self.shape(
                    "image",
                    "neither image nor build is set (docker compose is not supported)",
                ));
            }
            _ => {}
        }
        let mut unused = BTreeMap::new();
        for key in ["forwardPorts", "features", "hostRequirements"] {
            if let Some(value) = root.get(key) {
                unused.insert(key.to_owned(), value.clone());
            }
        }
        Ok(Devcontainer {
            path: self.path.to_owned(),
            name: self.opt_string(root, "name")?,
            image,
            build,
            container_env: self.env(root, "containerEnv")?,
            remote_env: self.env(root, "remoteEnv")?,
            mounts: self.mounts(root)?,
            run_args: self.strings(root, "runArgs")?,
            remote_user: self.opt_string(root, "remoteUser")?,
            container_user: self.opt_string(root, "containerUser")?,
            workspace_folder: self.opt_string(root, "workspaceFolder")?,
            workspace_mount: self.opt_string(root, "workspaceMount")?,
            post_create_command: self.lifecycle(root, "postCreateCommand")?,
            post_start_command: self.lifecycle(root, "postStartCommand")?,
            unused,
            has_initialize_command: root.get("initializeCommand").is_some(),
        })
    }

    fn opt_string(
        &self,
        object: &Map<String, Value>,
        key: &str,
    ) -> Result<Option<String>, DevcontainerError> {
        self.opt_string_at(object, key, key)
    }

    fn opt_string_at(
        &self,
        object: &Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<Option<String>, DevcontainerError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(value)) => Ok(Some(value.clone())),
            Some(_) => Err(self.shape(field, "want a string")),
        }
    }

    fn strings(
        &self,
        object: &Map<String, Value>,
        key: &str,
    ) -> Result<Vec<String>, DevcontainerError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => self.string_items(key, items),
            Some(_) => Err(self.shape(key, "want an array of strings")),
        }
    }

    fn string_items(&self, field: &str, items: &[Value]) -> Result<Vec<String>, DevcontainerError> {
        items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(value) => Ok(value.clone()),
                _ => Err(self.shape(&format!("{field}[{index}]"), "want a string")),
            })
            .collect()
    }

    fn string_map(
        &self,
        field: &str,
        value: Option<&Value>,
    ) -> Result<BTreeMap<String, String>, DevcontainerError> {
        let mut out = BTreeMap::new();
        match value {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (key, value) in map {
                    match value {
                        Value::String(value) => {
                            out.insert(key.clone(), value.clone());
                        }
                        // remoteEnv: null unsets a variable; nothing to carry.
                        Value::Null => {}
                        _ => return Err(self.shape(&format!("{field}.{key}"), "want a string")),
                    }
                }
            }
            Some(_) => return Err(self.shape(field, "want an object of strings")),
        }
        Ok(out)
    }

    fn env(
        &self,
        object: &Map<String, Value>,
        key: &str,
    ) -> Result<BTreeMap<String, String>, DevcontainerError> {
        self.string_map(key, object.get(key))
    }

    fn build(&self, value: &Value) -> Result<DevcontainerBuild, DevcontainerError> {
        let Value::Object(build) = value else {
            return Err(self.shape("build", "want an object"));
        };
        let Some(dockerfile) = self.opt_string_at(build, "dockerfile", "build.dockerfile")? else {
            return Err(self.shape("build.dockerfile", "a build needs a dockerfile"));
        };
        Ok(DevcontainerBuild {
            dockerfile,
            context: self.opt_string_at(build, "context", "build.context")?,
            args: self.string_map("build.args", build.get("args"))?,
            target: self.opt_string_at(build, "target", "build.target")?,
        })
    }

    fn mounts(&self, object: &Map<String, Value>) -> Result<Vec<String>, DevcontainerError> {
        let items = match object.get("mounts") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(self.shape("mounts", "want an array")),
        };
        let mut mounts = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let field = format!("mounts[{index}]");
            match item {
                Value::String(mount) => mounts.push(mount.clone()),
                Value::Object(mount) => mounts.push(self.object_mount(&field, mount)?),
                _ => return Err(self.shape(&field, "want a string or an object")),
            }
        }
        Ok(mounts)
    }

    /// `{source, target, type}` → `type=<t>,source=<s>,target=<t>` (§7.2); any other key makes
    /// the file unusable.
    fn object_mount(
        &self,
        field: &str,
        mount: &Map<String, Value>,
    ) -> Result<String, DevcontainerError> {
        if let Some(key) = mount
            .keys()
            .find(|key| !matches!(key.as_str(), "source" | "target" | "type"))
        {
            return Err(self.shape(
                &format!("{field}.{key}"),
                "unknown key in an object mount (want source, target, type)",
            ));
        }
        let mut items = Vec::new();
        for key in ["type", "source", "target"] {
            if let Some(value) = self.opt_string_at(mount, key, &format!("{field}.{key}"))? {
                items.push(format!("{key}={value}"));
            }
        }
        Ok(items.join(","))
    }

    fn lifecycle(
        &self,
        object: &Map<String, Value>,
        key: &str,
    ) -> Result<Option<LifecycleCommand>, DevcontainerError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(named)) => {
                let mut commands = BTreeMap::new();
                for (name, value) in named {
                    let field = format!("{key}.{name}");
                    commands.insert(name.clone(), self.command_form(&field, value)?);
                }
                Ok(Some(LifecycleCommand::Named(commands)))
            }
            Some(value) => Ok(Some(LifecycleCommand::Single(
                self.command_form(key, value)?,
            ))),
        }
    }

    fn command_form(&self, field: &str, value: &Value) -> Result<CommandForm, DevcontainerError> {
        match value {
            Value::String(command) => Ok(CommandForm::Shell(command.clone())),
            Value::Array(items) => Ok(CommandForm::Argv(self.string_items(field, items)?)),
            _ => Err(self.shape(field, "want a string or an array of strings")),
        }
    }
}
