//! C044 and C902: `sandbox:` and `network:` blocks (DSL.md §7.1–§7.3), on the workflow and on
//! nodes alike.
use super::netrule;
use crate::{
    Code,
    ast::{self, SandboxDecl, Span},
    diag::Diagnostic,
    ir::{NetworkInherit, NetworkMode, NetworkPreset, SandboxMode},
};

/// The network words, which get their own C044 message when written as a sandbox mode.
const NETWORK_WORDS: [&str; 3] = ["open", "allowlist", "denylist"];

/// The outcome of checking one `sandbox:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Checked {
    /// It drew C044, so later checks treat it as absent (DSL.md §7.2).
    Dropped,
    /// It passed C044 with this mode.
    Valid(SandboxMode),
}

/// Reports C044/C902 for one `sandbox:`; `node` is the node whose property it is.
pub(super) fn check(decl: &SandboxDecl, node: Option<&str>, out: &mut Vec<Diagnostic>) -> Checked {
    let mut cx = Cx {
        node,
        out,
        dropped: false,
    };
    let mode = match decl {
        SandboxDecl::Short(w) => {
            let mode = cx.mode_word(w);
            if mode == Some(SandboxMode::Inline) {
                cx.c044(w.span, "an inline sandbox needs image or build")
                    .hint("write a block with image or build, or use sandbox: auto");
            }
            mode
        }
        SandboxDecl::Block(b) => cx.block(b),
    };
    match mode {
        Some(m) if !cx.dropped => Checked::Valid(m),
        _ => Checked::Dropped,
    }
}

/// Whether a sandbox value holds a devcontainer-style reference the sandbox resolver expands at
/// run time (SANDBOX.md §7.4): path-shape checks skip it.
fn has_devcontainer_ref(value: &str) -> bool {
    value.contains("${localWorkspaceFolder") || value.contains("${localEnv:")
}

/// Whether a build path leaves the workspace: absolute, or with a `..` component.
fn leaves_workspace(path: &str) -> bool {
    path.starts_with('/') || path.starts_with('\\') || path.split(['/', '\\']).any(|c| c == "..")
}

struct Cx<'o, 'n> {
    node: Option<&'n str>,
    out: &'o mut Vec<Diagnostic>,
    dropped: bool,
}

/// A just-pushed diagnostic, to attach a hint to.
struct Pushed<'a>(&'a mut Diagnostic);

impl Pushed<'_> {
    fn hint(self, hint: &str) {
        self.0.hint = Some(hint.to_owned());
    }
}

impl Cx<'_, '_> {
    fn push(&mut self, code: Code, span: Span, message: String) -> Pushed<'_> {
        let mut d = Diagnostic::new(code, span, message);
        d.node = self.node.map(str::to_owned);
        if code == Code::C044 {
            self.dropped = true;
        }
        self.out.push(d);
        let last = self.out.len() - 1;
        Pushed(&mut self.out[last])
    }

    fn c044(&mut self, span: Span, message: impl Into<String>) -> Pushed<'_> {
        self.push(Code::C044, span, message.into())
    }

    /// A sandbox `mode` word; `None` (after C044) when it is not a mode.
    fn mode_word(&mut self, w: &ast::Word) -> Option<SandboxMode> {
        if let Some(m) = SandboxMode::from_word(&w.text) {
            return Some(m);
        }
        let m = &w.text;
        if NETWORK_WORDS.contains(&m.as_str()) {
            self.c044(
                w.span,
                format!("\"{m}\" is a network mode, not a sandbox mode"),
            )
            .hint(&format!(
                "set the egress policy inside the block: sandbox: / network: / mode: {m}"
            ));
        } else {
            self.c044(w.span, format!("unknown sandbox mode \"{m}\""))
                .hint("expected none, auto or inline");
        }
        None
    }

    fn block(&mut self, b: &ast::SandboxBlock) -> Option<SandboxMode> {
        let mode = match &b.mode {
            Some(w) => self.mode_word(w),
            None => Some(SandboxMode::Inline),
        };
        match mode {
            Some(SandboxMode::None) => {
                // Every other field is an error, and its own shape is not worth checking.
                for span in other_fields(b) {
                    self.c044(span, "mode none takes no other field")
                        .hint("remove the other fields, or choose mode auto or inline");
                }
                return mode;
            }
            Some(SandboxMode::Auto) => {
                if let Some(image) = &b.image {
                    self.c044(image.span, "mode auto takes no image").hint(
                        "auto uses the repository's devcontainer or the default image; \
                         remove mode: auto for an inline sandbox",
                    );
                }
                if let Some(build) = &b.build {
                    self.c044(build.key, "mode auto takes no build").hint(
                        "auto uses the repository's devcontainer or the default image; \
                         remove mode: auto for an inline sandbox",
                    );
                }
            }
            Some(SandboxMode::Inline) => match (&b.image, &b.build) {
                (None, None) => {
                    let anchor = b.mode.as_ref().map_or(b.key, |w| w.span);
                    self.c044(anchor, "an inline sandbox needs image or build")
                        .hint("add image: \"…\" or a build: block, or use sandbox: auto");
                }
                (Some(image), Some(build)) => {
                    let later = image.span.max(build.key);
                    self.c044(later, "image and build are mutually exclusive")
                        .hint("keep one of them");
                }
                _ => {}
            },
            // `sandbox.mode` of a block is never `Inherit`; an unknown word was reported.
            Some(SandboxMode::Inherit) | None => {}
        }
        self.fields(b);
        mode
    }

    fn fields(&mut self, b: &ast::SandboxBlock) {
        if let Some(w) = &b.host_state
            && !matches!(w.text.as_str(), "auto" | "none")
        {
            self.c044(w.span, format!("invalid host_state \"{}\"", w.text))
                .hint("expected auto or none");
        }
        if let Some(user) = &b.user {
            let v = &user.value;
            if !has_devcontainer_ref(v) && (v.is_empty() || v.chars().any(char::is_whitespace)) {
                self.c044(user.span, format!("invalid user \"{v}\""))
                    .hint("expected a uid, uid:gid or a user name");
            }
        }
        if let Some(folder) = &b.workspace_folder {
            let v = &folder.value;
            if !has_devcontainer_ref(v) && !v.starts_with('/') {
                self.c044(folder.span, format!("invalid workspace_folder \"{v}\""))
                    .hint("expected an absolute path in the container");
            }
        }
        if let Some(build) = &b.build {
            for (field, value) in [
                ("dockerfile", &build.dockerfile),
                ("context", &build.context),
            ] {
                let Some(value) = value else { continue };
                let v = &value.value;
                if !has_devcontainer_ref(v) && leaves_workspace(v) {
                    self.c044(value.span, format!("invalid {field} \"{v}\""))
                        .hint(
                            "build paths are relative to the workspace and may not leave it \
                         (no absolute path, no ..)",
                        );
                }
            }
        }
        if let Some(n) = &b.network {
            self.network(n);
        }
    }

    fn network(&mut self, n: &ast::NetworkBlock) {
        let mode = match &n.mode {
            Some(w) => {
                let mode = NetworkMode::from_word(&w.text);
                if mode.is_none() {
                    self.c044(w.span, format!("invalid network mode \"{}\"", w.text))
                        .hint("expected open, allowlist or denylist");
                }
                mode
            }
            None => {
                let no_rules = n.rules.as_ref().is_none_or(|r| r.items.is_empty());
                let mut message = "network block has no mode: treated as allowlist".to_owned();
                if no_rules && n.preset.is_none() {
                    message.push_str(" with no rules: all egress refused");
                }
                self.push(Code::C902, n.key, message);
                Some(NetworkMode::Allowlist)
            }
        };
        let open = mode == Some(NetworkMode::Open);
        if let Some(preset) = &n.preset {
            if open {
                self.c044(preset.span, "mode open ignores preset")
                    .hint("remove it, or choose mode allowlist or denylist");
            } else if NetworkPreset::from_name(&preset.value).is_none() {
                self.c044(
                    preset.span,
                    format!("unknown network preset \"{}\"", preset.value),
                )
                .hint("the only preset is \"iterion-default\"");
            }
        }
        if let Some(rules) = &n.rules {
            if open {
                self.c044(rules.span, "mode open ignores rules")
                    .hint("remove them, or choose mode allowlist or denylist");
            } else {
                for rule in &rules.items {
                    if has_devcontainer_ref(&rule.value) {
                        continue;
                    }
                    if let Err(why) = netrule::check_rule(&rule.value) {
                        self.c044(
                            rule.span,
                            format!("invalid network rule \"{}\": {why}", rule.value),
                        );
                    }
                }
            }
        }
        if let Some(w) = &n.inherit
            && NetworkInherit::from_word(&w.text).is_none()
        {
            self.c044(w.span, format!("invalid inherit \"{}\"", w.text))
                .hint("want replace or append; omit it to merge");
        }
    }
}

/// The anchors of every field of a block other than `mode`, in source order.
fn other_fields(b: &ast::SandboxBlock) -> Vec<Span> {
    let mut spans: Vec<Span> = [
        b.image.as_ref().map(|s| s.span),
        b.build.as_ref().map(|x| x.key),
        b.user.as_ref().map(|s| s.span),
        b.workspace_folder.as_ref().map(|s| s.span),
        b.host_state.as_ref().map(|w| w.span),
        b.post_create.as_ref().map(|s| s.span),
        b.env.as_ref().map(|m| m.span),
        b.mounts.as_ref().map(|l| l.span),
        b.network.as_ref().map(|n| n.key),
    ]
    .into_iter()
    .flatten()
    .collect();
    spans.sort();
    spans
}

/// The C128 anchor: the short form's value, or the block's key.
pub(super) fn anchor(decl: &SandboxDecl) -> Span {
    match decl {
        SandboxDecl::Short(w) => w.span,
        SandboxDecl::Block(b) => b.key,
    }
}
