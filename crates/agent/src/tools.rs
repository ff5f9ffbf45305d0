//! The agent's tools (DSL.md §6.2): `bash`, `read_file`, `write_file`, `file_edit`, `glob`, `grep`,
//! the read-only git tools, the claw tools of [`crate::claw_tools`] (`web_fetch`, `read_image`,
//! `sleep`, `todo_write`, `structured_output`, `send_user_message`), plus `ask_user` for
//! `interaction: ask` nodes.
//!
//! [`LocalTools`] runs the six workspace tools where it lives: in the engine process on the host
//! (no sandbox), or in the runner inside the container. Paths are workspace-relative; a path that
//! resolves outside the workspace (`..`, an absolute path elsewhere, a symlink out) is refused.
//! `bash` goes through a [`Shell`] — the engine gives the noop driver's host run, so it runs "in
//! the same place and environment as a tool node". Every output given back to the model is
//! bounded.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use iterion_dsl::ir::Tool;
use serde_json::{Value, json};

use crate::claw_tools::{self, TodoList};
use crate::glob::Glob;
use crate::http::HttpClient;
use crate::shell::{BoundedSink, Command, Shell, ShellError};
use crate::wire::{Image, ToolSpec};

/// The most text a tool gives back to the model.
pub(crate) const TOOL_OUTPUT_MAX: usize = 256 * 1024;
/// The largest file `read_file` and `grep` read.
const READ_MAX: u64 = 4 * 1024 * 1024;
/// The most paths `glob` lists and lines `grep` reports.
const LIST_MAX: usize = 1000;
/// The most files `glob`/`grep` visit.
const WALK_MAX: usize = 100_000;

/// The name of the ask-user tool.
pub const ASK_USER: &str = "ask_user";

/// The spec offered to the model for one of the six tools.
pub fn spec_of(tool: Tool) -> ToolSpec {
    let (description, schema) = match tool {
        Tool::Bash => (
            "Run a shell command with `bash -c` in the workspace. Returns the exit code, stdout and stderr.",
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        ),
        Tool::ReadFile => (
            "Read a text file. The path is relative to the workspace.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        Tool::WriteFile => (
            "Create or overwrite a text file (parent directories are created). The path is relative to the workspace.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
        ),
        Tool::FileEdit => (
            "Replace an exact string in a file. old_string must occur exactly once unless replace_all is true.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}, "replace_all": {"type": "boolean"}}, "required": ["path", "old_string", "new_string"]}),
        ),
        Tool::Glob => (
            "List workspace paths matching a glob pattern (`*`, `?`, `**`), relative to the workspace.",
            json!({"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}),
        ),
        Tool::Grep => (
            "Search file contents with a regular expression. Optional path (a file or directory) and glob filter. Returns path:line:text.",
            json!({"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}, "glob": {"type": "string"}}, "required": ["pattern"]}),
        ),
        Tool::GitDiff => (
            "Show `git diff` of the workspace: the working tree against `base` (a commit, branch or tag; default the index), optionally limited to `path`.",
            json!({"type": "object", "properties": {"base": {"type": "string"}, "path": {"type": "string"}}}),
        ),
        Tool::GitStatus => (
            "Show `git status --porcelain` of the workspace: changed and untracked files.",
            json!({"type": "object", "properties": {}}),
        ),
        Tool::GitLog => (
            "Show `git log` of the workspace: the commits reachable from `revision` (a commit, branch, tag or `A..B` range; default HEAD), newest first, at most `max_count` (default 20, at most 200), optionally only those touching `path`.",
            json!({"type": "object", "properties": {"revision": {"type": "string"}, "max_count": {"type": "integer"}, "path": {"type": "string"}}}),
        ),
        Tool::WebFetch => (
            "Fetch an http:// or https:// URL with GET and return its status, content type and body (HTML as text). Redirects are reported, not followed; the run's network policy applies.",
            json!({"type": "object", "properties": {"url": {"type": "string"}, "prompt": {"type": "string"}}, "required": ["url"]}),
        ),
        Tool::ReadImage => (
            "Look at a PNG, JPEG, GIF or WebP image of the workspace (up to 5 MiB). The path is relative to the workspace.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        Tool::Sleep => (
            "Pause for duration_ms milliseconds (0 to 300000).",
            json!({"type": "object", "properties": {"duration_ms": {"type": "integer"}}, "required": ["duration_ms"]}),
        ),
        Tool::TodoWrite => (
            "Read (action=read) or replace (action=write) your task list. Each item: content, status (pending, in_progress, completed), optional id, priority, activeForm.",
            json!({"type": "object", "properties": {
                "action": {"type": "string", "enum": ["read", "write"]},
                "todos": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "string"}, "content": {"type": "string"},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "done"]},
                    "priority": {"type": "string"}, "activeForm": {"type": "string"}},
                    "required": ["content", "status"]}}},
                "required": ["action"]}),
        ),
        Tool::StructuredOutput => (
            "Return structured data: pass your object under \"payload\"; it is echoed back as-is.",
            json!({"type": "object", "properties": {"payload": {"type": "object"}}, "required": ["payload"]}),
        ),
        Tool::SendUserMessage => (
            "Send a message to the operator (recorded with the run), with optional workspace files as attachments.",
            json!({"type": "object", "properties": {"message": {"type": "string"}, "status": {"type": "string"}, "attachments": {"type": "array", "items": {"type": "string"}}}, "required": ["message"]}),
        ),
    };
    ToolSpec {
        name: tool.as_str().to_owned(),
        description: description.to_owned(),
        input_schema: schema,
    }
}

/// The spec of `ask_user`.
pub fn ask_user_spec() -> ToolSpec {
    ToolSpec {
        name: ASK_USER.to_owned(),
        description: "Ask the operator a question and wait for the answer. Use it only when you cannot proceed without a human decision.".to_owned(),
        input_schema: json!({"type": "object", "properties": {
            "question": {"type": "string"},
            "options": {"type": "array", "items": {"type": "string"}}
        }, "required": ["question"]}),
    }
}

/// Text clamped to `max` bytes (on a char boundary) with the §13.1 suffix.
pub(crate) fn clamp_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let head = crate::text::truncate_bytes(text, max);
    format!(
        "{head}…[iterion: {} bytes omitted]",
        text.len() - head.len()
    )
}

/// What a tool gives back: text, and for `read_image` the image.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolReply {
    /// The text for the model.
    pub text: String,
    /// An image for the model.
    pub image: Option<Image>,
}

/// The workspace tools, rooted at one directory.
pub struct LocalTools {
    root: PathBuf,
    shell: Arc<dyn Shell>,
    env: Vec<(String, String)>,
    /// `web_fetch`'s client: the node's route (under a sandbox, the run's proxy). `None`: the
    /// tool is unavailable.
    web: Option<HttpClient>,
    todos: TodoList,
}

impl LocalTools {
    /// Tools rooted at `root` (canonicalised), running `bash` through `shell` with `env` added.
    pub fn new(root: &Path, shell: Arc<dyn Shell>, env: Vec<(String, String)>) -> LocalTools {
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
        LocalTools {
            root,
            shell,
            env,
            web: None,
            todos: TodoList::default(),
        }
    }

    /// These tools with `web_fetch` going through `client`.
    pub fn with_web(mut self, client: HttpClient) -> LocalTools {
        self.web = Some(client);
        self
    }

    /// Runs `name` on `input`: `Ok(text)` or `Err(why)`, both given back to the model (the error
    /// as its text). An image `read_image` read is dropped: use [`LocalTools::call_reply`].
    pub async fn call(&self, name: &str, input: &Value) -> Result<String, ToolError> {
        self.call_reply(name, input).await.map(|r| r.text)
    }

    /// Runs `name` on `input`: its text (and image), or why not.
    pub async fn call_reply(&self, name: &str, input: &Value) -> Result<ToolReply, ToolError> {
        let Some(tool) = Tool::ALL.into_iter().find(|t| t.as_str() == name) else {
            return Err(ToolError::UnknownTool(name.to_owned()));
        };
        let text = match tool {
            Tool::ReadImage => {
                let rel = str_arg(input, "path")?;
                let path = self.resolve(rel)?;
                let (text, image) = claw_tools::read_image(&path, rel)
                    .await
                    .map_err(ToolError::Input)?;
                return Ok(ToolReply {
                    text,
                    image: Some(image),
                });
            }
            Tool::WebFetch => claw_tools::web_fetch(self.web.as_ref(), input)
                .await
                .map_err(ToolError::Input)?,
            Tool::Sleep => claw_tools::sleep(input).await.map_err(ToolError::Input)?,
            Tool::TodoWrite => self.todos.call(input).map_err(ToolError::Input)?,
            Tool::StructuredOutput => {
                claw_tools::structured_output(input).map_err(ToolError::Input)?
            }
            Tool::SendUserMessage => claw_tools::send_user_message(input, |rel| {
                self.resolve(rel).map_err(|e| e.to_string())
            })
            .map_err(ToolError::Input)?,
            Tool::Bash => self.bash(str_arg(input, "command")?).await?,
            Tool::ReadFile => {
                let path = self.resolve(str_arg(input, "path")?)?;
                read_text(&path).await?
            }
            Tool::WriteFile => {
                let rel = str_arg(input, "path")?;
                let path = self.resolve(rel)?;
                let content = str_arg(input, "content")?;
                if let Some(parent) = path.parent() {
                    tokio::fs::create_dir_all(parent)
                        .await
                        .map_err(|e| ToolError::io("create", parent.display(), e))?;
                }
                // The parent now exists: check again that it did not lead out (a symlink).
                let path = self.resolve(rel)?;
                tokio::fs::write(&path, content)
                    .await
                    .map_err(|e| ToolError::io("write", rel, e))?;
                format!("wrote {} bytes to {rel}", content.len())
            }
            Tool::FileEdit => {
                let rel = str_arg(input, "path")?;
                let path = self.resolve(rel)?;
                let old = str_arg(input, "old_string")?;
                let new = str_arg(input, "new_string")?;
                let all = input
                    .get("replace_all")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let text = read_text(&path).await?;
                let n = if old.is_empty() {
                    0
                } else {
                    text.matches(old).count()
                };
                let edited = match (n, all) {
                    (0, _) => return Err(ToolError::NoOccurrence(rel.to_owned())),
                    (1, _) | (_, true) => text.replace(old, new),
                    (n, false) => {
                        return Err(ToolError::AmbiguousEdit {
                            occurrences: n,
                            path: rel.to_owned(),
                        });
                    }
                };
                tokio::fs::write(&path, edited)
                    .await
                    .map_err(|e| ToolError::io("write", rel, e))?;
                format!("replaced {n} occurrence(s) in {rel}")
            }
            Tool::GitDiff => {
                let mut args = vec!["diff".to_owned(), "--no-color".to_owned()];
                self.revision_and_path(&mut args, input, "base")?;
                self.git(args).await?
            }
            Tool::GitLog => {
                let count = match input.get("max_count") {
                    None | Some(Value::Null) => GIT_LOG_DEFAULT,
                    Some(v) => v
                        .as_u64()
                        .filter(|n| (1..=GIT_LOG_MAX).contains(n))
                        .ok_or_else(|| {
                            ToolError::Git(format!(
                                "max_count {v} is not an integer from 1 to {GIT_LOG_MAX}"
                            ))
                        })?,
                };
                // A fixed format without signature placeholders and no signature check: a
                // repository's `log.showSignature` or `format.pretty` cannot make git run its
                // `gpg.program`.
                let mut args = vec![
                    "log".to_owned(),
                    "--no-color".to_owned(),
                    "--no-show-signature".to_owned(),
                    "--no-ext-diff".to_owned(),
                    "--no-textconv".to_owned(),
                    "--format=commit %H%nAuthor: %an <%ae>%nDate:   %aI%n%n%w(0,4,4)%B".to_owned(),
                    format!("--max-count={count}"),
                ];
                self.revision_and_path(&mut args, input, "revision")?;
                self.git(args).await?
            }
            Tool::GitStatus => {
                self.git(vec![
                    "status".to_owned(),
                    "--porcelain=v1".to_owned(),
                    "--untracked-files=all".to_owned(),
                ])
                .await?
            }
            Tool::Glob => {
                let glob = Glob::new(str_arg(input, "pattern")?);
                let root = self.root.clone();
                let found = tokio::task::spawn_blocking(move || {
                    let mut out = Vec::new();
                    walk(&root, &mut |rel, _| {
                        if glob.matches(rel) {
                            out.push(rel.to_owned());
                        }
                        out.len() < LIST_MAX
                    });
                    out
                })
                .await
                .map_err(|e| ToolError::Task("glob", e.to_string()))?;
                if found.is_empty() {
                    "no matches".to_owned()
                } else {
                    found.join("\n")
                }
            }
            Tool::Grep => {
                let re = regex::Regex::new(str_arg(input, "pattern")?)
                    .map_err(|e| ToolError::BadPattern(e.to_string()))?;
                let start = match input.get("path").and_then(Value::as_str) {
                    Some(p) => self.resolve(p)?,
                    None => self.root.clone(),
                };
                let filter = input.get("glob").and_then(Value::as_str).map(Glob::new);
                let root = self.root.clone();
                let lines = tokio::task::spawn_blocking(move || grep(&root, &start, &re, filter))
                    .await
                    .map_err(|e| ToolError::Task("grep", e.to_string()))?;
                if lines.is_empty() {
                    "no matches".to_owned()
                } else {
                    lines.join("\n")
                }
            }
        };
        Ok(ToolReply {
            text: clamp_text(&text, TOOL_OUTPUT_MAX),
            image: None,
        })
    }

    /// The repository's filter driver commands (`filter.NAME.clean`, `smudge`, `process`), read
    /// with `git config` (which runs nothing) under the same switches as `base`.
    async fn filter_keys(
        &self,
        base: &[String],
        env: &[(String, String)],
    ) -> Result<Vec<String>, ToolError> {
        let mut argv: Vec<String> = base
            .iter()
            .take_while(|a| *a != "--no-pager")
            .cloned()
            .collect();
        argv.extend(
            [
                "config",
                "-z",
                "--name-only",
                "--get-regexp",
                r"^filter\..*\.(clean|smudge|process)$",
            ]
            .map(str::to_owned),
        );
        let out = BoundedSink::new(TOOL_OUTPUT_MAX);
        let code = self
            .shell
            .exec(Command {
                argv: &argv,
                env: env.to_vec(),
                workdir: &self.root,
                stdout: out.clone(),
                stderr: BoundedSink::new(TOOL_OUTPUT_MAX / 4),
            })
            .await
            .map_err(ToolError::Shell)?;
        // 1: no such key; anything else but 0 is a config git cannot read, so nothing runs.
        match code {
            0 => Ok(out
                .text()
                .split('\0')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()),
            1 => Ok(Vec::new()),
            c => Err(ToolError::Git(format!("git config exited with {c}"))),
        }
    }

    /// `git ARGS` in the workspace with what the repository configures turned off where git has
    /// a switch for it: no external diff or text conversion drivers, no fsmonitor, no hooks, no
    /// pager, no prompts, and no filter drivers (set to nothing, see `filter_keys`); the
    /// repository is the workflow's input and may be hostile.
    /// A git tool's optional revision (the input field `key`, a revision name, never an
    /// option), then `--`, then its optional `path` (which must stay in the workspace).
    fn revision_and_path(
        &self,
        args: &mut Vec<String>,
        input: &Value,
        key: &str,
    ) -> Result<(), ToolError> {
        if let Some(revision) = input.get(key).and_then(Value::as_str) {
            args.push(git_revision(revision)?.to_owned());
        }
        args.push("--".to_owned());
        if let Some(rel) = input.get("path").and_then(Value::as_str) {
            self.resolve(rel)?;
            args.push(rel.to_owned());
        }
        Ok(())
    }

    async fn git(&self, args: Vec<String>) -> Result<String, ToolError> {
        let mut argv: Vec<String> = [
            "git",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "diff.external=",
            "-c",
            "core.pager=cat",
            "--no-pager",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        let diff = args.first().is_some_and(|a| a == "diff");
        let mut args = args.into_iter();
        if let Some(sub) = args.next() {
            argv.push(sub);
        }
        if diff {
            argv.extend(["--no-ext-diff".to_owned(), "--no-textconv".to_owned()]);
        }
        argv.extend(args);
        let out = BoundedSink::new(TOOL_OUTPUT_MAX);
        let err = BoundedSink::new(TOOL_OUTPUT_MAX / 4);
        let mut env = self.env.clone();
        env.extend(
            [
                ("GIT_TERMINAL_PROMPT", "0"),
                ("GIT_PAGER", "cat"),
                ("GIT_EXTERNAL_DIFF", ""),
                ("GIT_CONFIG_NOSYSTEM", "1"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        // Filter drivers have no switch: every `filter.*.{clean,smudge,process}` the repository's
        // config (with its includes) names is set to nothing for this call, through
        // GIT_CONFIG_COUNT so that no name is parsed out of a `-c` argument.
        let neutral = self.filter_keys(&argv, &env).await?;
        env.push(("GIT_CONFIG_COUNT".to_owned(), neutral.len().to_string()));
        for (i, key) in neutral.into_iter().enumerate() {
            env.push((format!("GIT_CONFIG_KEY_{i}"), key));
            env.push((format!("GIT_CONFIG_VALUE_{i}"), String::new()));
        }
        let exit_code = self
            .shell
            .exec(Command {
                argv: &argv,
                env,
                workdir: &self.root,
                stdout: out.clone(),
                stderr: err.clone(),
            })
            .await
            .map_err(ToolError::Shell)?;
        if exit_code != 0 {
            return Err(ToolError::Git(format!(
                "git exited with {exit_code}: {}",
                err.text()
            )));
        }
        let text = out.text();
        Ok(if text.is_empty() {
            "no changes".to_owned()
        } else {
            text
        })
    }

    async fn bash(&self, command: &str) -> Result<String, ToolError> {
        let out = BoundedSink::new(TOOL_OUTPUT_MAX);
        let err = BoundedSink::new(TOOL_OUTPUT_MAX / 4);
        let argv = ["bash".to_owned(), "-c".to_owned(), command.to_owned()];
        let exit_code = self
            .shell
            .exec(Command {
                argv: &argv,
                env: self.env.clone(),
                workdir: &self.root,
                stdout: out.clone(),
                stderr: err.clone(),
            })
            .await
            .map_err(ToolError::Shell)?;
        Ok(format!(
            "exit code: {}\nstdout:\n{}\nstderr:\n{}",
            exit_code,
            out.text(),
            err.text()
        ))
    }

    /// `rel` as a path inside the workspace, or a refusal. The deepest existing ancestor is
    /// canonicalised, so a symlink cannot lead out.
    pub(crate) fn resolve(&self, rel: &str) -> Result<PathBuf, ToolError> {
        if rel.is_empty() || rel.contains('\0') {
            return Err(ToolError::BadPath);
        }
        let joined = self.root.join(rel);
        let mut clean = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::ParentDir => {
                    clean.pop();
                }
                Component::CurDir => {}
                other => clean.push(other),
            }
        }
        let outside = || ToolError::OutsideWorkspace(rel.to_owned());
        if !clean.starts_with(&self.root) {
            return Err(outside());
        }
        let mut existing = clean.as_path();
        let mut rest = Vec::new();
        while !existing.exists() {
            let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                return Err(outside());
            };
            rest.push(name.to_owned());
            existing = parent;
        }
        let real = std::fs::canonicalize(existing).map_err(|_| outside())?;
        if !real.starts_with(&self.root) {
            return Err(outside());
        }
        let mut full = real;
        for name in rest.into_iter().rev() {
            full.push(name);
        }
        Ok(full)
    }
}

/// A `git_diff` base: a revision name (letters, digits, `._/~^@{}-`), never an option.
/// How many commits `git_log` shows unless asked, and the most it shows.
const GIT_LOG_DEFAULT: u64 = 20;
const GIT_LOG_MAX: u64 = 200;

fn git_revision(base: &str) -> Result<&str, ToolError> {
    let ok = !base.is_empty()
        && !base.starts_with('-')
        && base.len() <= 256
        && base
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/~^@{}-".contains(c));
    if ok {
        Ok(base)
    } else {
        Err(ToolError::Git(format!(
            "base {base:?} is not a revision name"
        )))
    }
}

fn str_arg<'a>(input: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    input
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::MissingInput(key.to_owned()))
}

async fn read_text(path: &Path) -> Result<String, ToolError> {
    let meta = tokio::fs::metadata(path)
        .await
        .map_err(|e| ToolError::io("read", path.display(), e))?;
    if !meta.is_file() {
        return Err(ToolError::NotAFile(path.to_owned()));
    }
    if meta.len() > READ_MAX {
        return Err(ToolError::TooLarge {
            path: path.to_owned(),
            bytes: meta.len(),
        });
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| ToolError::io("read", path.display(), e))?;
    String::from_utf8(bytes).map_err(|_| ToolError::NotText(path.to_owned()))
}

/// Why a workspace tool call failed. Its text is what the model is given back.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A name that is none of the workspace tools.
    #[error("tool {0:?} is not a workspace tool")]
    UnknownTool(String),
    /// A required string input is missing.
    #[error("input field {0:?} (a string) is required")]
    MissingInput(String),
    /// An empty path, or one with a NUL byte.
    #[error("the path is empty or holds a NUL byte")]
    BadPath,
    /// A path that leads out of the workspace (`..`, an absolute path, a symlink).
    #[error("path {0:?} resolves outside the workspace")]
    OutsideWorkspace(String),
    /// Reading, writing or creating failed.
    #[error("cannot {verb} {path}: {source}")]
    Io {
        /// `read`, `write` or `create`.
        verb: &'static str,
        /// The path as the tool names it.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `read_file` on something that is not a regular file.
    #[error("{} is not a file", .0.display())]
    NotAFile(PathBuf),
    /// `read_file` on a file over the read bound.
    #[error("{} is {bytes} bytes; read_file reads files up to {READ_MAX} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// `read_file` or `file_edit` on a file that is not UTF-8.
    #[error("{} is not UTF-8 text", .0.display())]
    NotText(PathBuf),
    /// `file_edit`'s `old_string` is not in the file.
    #[error("old_string does not occur in {0}")]
    NoOccurrence(String),
    /// `file_edit`'s `old_string` occurs more than once, without `replace_all`.
    #[error("old_string occurs {occurrences} times in {path}; make it unique or pass replace_all")]
    AmbiguousEdit {
        /// How often it occurs.
        occurrences: usize,
        /// The file.
        path: String,
    },
    /// `grep`'s pattern is not a regular expression.
    #[error("bad regular expression: {0}")]
    BadPattern(String),
    /// The blocking search task (`glob`, `grep`) failed.
    #[error("{0} failed: {1}")]
    Task(&'static str, String),
    /// `bash` could not be started.
    #[error("bash could not be run: {0}")]
    Shell(ShellError),
    /// `git_diff` / `git_status`: a bad argument, or git failed.
    #[error("{0}")]
    Git(String),
    /// A claw tool refused its input or failed (`web_fetch`, `read_image`, `sleep`, …).
    #[error("{0}")]
    Input(String),
}

impl ToolError {
    fn io(verb: &'static str, path: impl std::fmt::Display, source: std::io::Error) -> Self {
        ToolError::Io {
            verb,
            path: path.to_string(),
            source,
        }
    }
}

/// Visits files under `root` (not following symlinks, skipping `.git`), calling `visit` with the
/// path relative to `root` until it returns false.
fn walk(root: &Path, visit: &mut dyn FnMut(&str, &Path) -> bool) {
    let mut stack = vec![root.to_owned()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        let mut subdirs = Vec::new();
        for entry in entries {
            seen += 1;
            if seen > WALK_MAX {
                return;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if entry.file_name() != ".git" {
                    subdirs.push(path);
                }
                continue;
            }
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let rel = rel.to_string_lossy();
            if !visit(&rel, &path) {
                return;
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
}

fn grep(root: &Path, start: &Path, re: &regex::Regex, filter: Option<Glob>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut search = |rel: &str, path: &Path| {
        if filter.as_ref().is_some_and(|g| !g.matches(rel)) {
            return true;
        }
        let Ok(meta) = std::fs::metadata(path) else {
            return true;
        };
        if meta.len() > READ_MAX {
            return true;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            return true;
        };
        for (i, line) in text.lines().enumerate() {
            if re.is_match(line) {
                lines.push(format!(
                    "{rel}:{}:{}",
                    i + 1,
                    crate::text::truncate_bytes(line, 500)
                ));
                if lines.len() >= LIST_MAX {
                    return false;
                }
            }
        }
        true
    };
    if start.is_file() {
        let rel = start
            .strip_prefix(root)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        search(&rel, start);
    } else {
        walk(start, &mut |rel, path| {
            let full = path
                .strip_prefix(root)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_else(|_| rel.to_owned());
            search(&full, path)
        });
    }
    lines
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
