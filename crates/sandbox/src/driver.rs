//! The driver contract (SANDBOX.md §4.1): [`Driver`] turns a [`Spec`] into a running sandbox,
//! [`SandboxRun`] executes commands in it and cleans it up.
//!
//! The traits use `async_trait` so that `Arc<dyn Driver>` and `Box<dyn SandboxRun>` stay usable:
//! the factory hands drivers out as trait objects, and the engine holds runs of any driver.
//! Optional abilities are methods returning `Option<&dyn Trait>`, so a caller asks for the
//! ability rather than the driver's name.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::capabilities::Capabilities;
use crate::error::{Error, Result};
use crate::mode::Trust;
use crate::spec::{SecretBytes, Spec};

/// One progress report of an image pull (layer, status, bytes so far, total when known). The CLI
/// draws these as a progress bar.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PullProgress {
    /// The layer id (or the engine's status line when it names no layer).
    pub layer: String,
    /// The engine's status for that layer (`Downloading`, `Pull complete`, …); may be empty.
    pub status: String,
    /// Bytes done.
    pub current: u64,
    /// Bytes in all, when the engine says.
    pub total: Option<u64>,
}

/// Receives pull progress. Any `Fn(&PullProgress) + Send + Sync` closure is one.
pub trait Progress: Send + Sync {
    /// Called for each progress report, in order.
    fn pull(&self, update: &PullProgress);
}

impl<F: Fn(&PullProgress) + Send + Sync> Progress for F {
    fn pull(&self, update: &PullProgress) {
        self(update);
    }
}

/// A [`Progress`] that ignores every report.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn pull(&self, _update: &PullProgress) {}
}

/// The level of a run-log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Node execs and other detail.
    Debug,
    /// Driver operations in readable `docker …` form, post_create stdout, `sandbox active`.
    Info,
    /// post_create stderr, fallbacks.
    Warn,
    /// Failures.
    Error,
}

/// The run log a driver writes its operations to (SANDBOX.md §4.9). The engine's implementation
/// tees into the store and redacts known secret values; a driver still renders proxy tokens as
/// `***` itself ([`redact_proxy_url`]).
pub trait RunLog: Send + Sync {
    /// Appends one line.
    fn line(&self, level: LogLevel, line: &str);
}

/// A [`RunLog`] that drops every line (a driver not wrapped by `select_sandbox_driver`).
#[derive(Clone, Copy, Debug, Default)]
pub struct NullRunLog;

impl RunLog for NullRunLog {
    fn line(&self, _level: LogLevel, _line: &str) {}
}

/// The parts of an image's config the engine uses after Prepare (SANDBOX.md §4.1, §8.10).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ImageConfig {
    /// The image id (`sha256:…`).
    pub id: String,
    /// The image's `Env`, as `K=V` strings.
    pub env: Vec<String>,
    /// The image's architecture (`amd64`, `arm64`).
    pub architecture: String,
}

/// The result of [`Driver::prepare`]: the spec, validated, with its image resolved and
/// (docker/podman) inspected. `start` refuses one prepared by another driver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PreparedSpec {
    /// The driver that prepared it.
    pub driver: String,
    /// The validated spec.
    pub spec: Spec,
    /// The image to run (after any fallback or build).
    pub image: Option<String>,
    /// The image's config, when the driver inspected it.
    pub image_config: Option<ImageConfig>,
    /// Why nothing will be isolated (noop with an active mode).
    pub skipped_reason: Option<String>,
}

impl PreparedSpec {
    /// A prepared spec with the spec's own image and nothing inspected.
    pub fn new(driver: &str, spec: Spec) -> Self {
        let image = spec.image_ref().map(str::to_owned);
        PreparedSpec {
            driver: driver.to_owned(),
            spec,
            image,
            image_config: None,
            skipped_reason: None,
        }
    }

    /// Checks that `driver` prepared this spec.
    ///
    /// # Errors
    ///
    /// [`Error::ForeignPreparedSpec`] when another driver did.
    pub fn check_driver(&self, driver: &str) -> Result<()> {
        if self.driver == driver {
            Ok(())
        } else {
            Err(Error::ForeignPreparedSpec {
                driver: driver.to_owned(),
                prepared_by: self.driver.clone(),
            })
        }
    }
}

/// How the sandbox reaches the run's egress proxy (SANDBOX.md §4.1, §6.2). `Debug` hides the
/// token in `endpoint`.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyAttachment {
    /// The in-sandbox proxy URL, `http://t:<token>@host:port`. Holds the bearer token.
    pub endpoint: String,
    /// The host-side Unix socket the proxy listens on (docker/podman: `<run dir>/net/proxy.sock`).
    pub host_socket: Option<PathBuf>,
    /// The TCP port the proxy listens on, when it does.
    pub port: Option<u16>,
}

impl fmt::Debug for ProxyAttachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyAttachment")
            .field("endpoint", &redact_proxy_url(&self.endpoint))
            .field("host_socket", &self.host_socket)
            .field("port", &self.port)
            .finish()
    }
}

/// A proxy URL with its credentials rendered `***` (`http://t:***@127.0.0.1:3128`), for logs and
/// `Debug` (SANDBOX.md §4.9).
pub fn redact_proxy_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let authority_end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    match url[scheme_end..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &url[scheme_end..scheme_end + at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!(
                "{}{user}:***{}",
                &url[..scheme_end],
                &url[scheme_end + at..]
            )
        }
        None => url.to_owned(),
    }
}

/// What `start` (and `Builder::build`) need to know about the run (SANDBOX.md §4.1). The proxy
/// endpoint and the CA reach the driver only through here: `prepare` takes the spec alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunInfo {
    /// The run id (UUIDv7). Names and labels every resource (invariant I5).
    pub run_id: String,
    /// A human name for the run; empty = none. Becomes the `iterion.io/run-name` label.
    pub friendly_name: String,
    /// The store's id, labelled on every resource so two stores never reap each other's.
    pub store_id: String,
    /// The host workspace: absolute, canonical, already screened (§5.3).
    pub workspace_path: PathBuf,
    /// The run's trust; untrusted runs get no shared nix store and no build egress.
    pub trust: Trust,
    /// The per-run host dir (`<runtime root>/<run id>`), created by the engine at L8.
    pub run_dir: PathBuf,
    /// The egress proxy, when one is active. Default: none.
    pub proxy: Option<ProxyAttachment>,
    /// Whether a per-run ask-user listener will be bound (it shapes the container's network).
    /// Default: false.
    pub listener_planned: bool,
    /// The run's time budget in seconds; 0 = unbounded (the default).
    pub max_duration_seconds: u64,
    /// The proxy's ephemeral CA (PEM), when TLS inspection is on. Default: none.
    pub proxy_ca_pem: Option<String>,
    /// Transparent egress (issue 22): the egress bridge serves DNS on `127.0.0.1:53` and the
    /// synthetic addresses it hands out, so the driver binds [`RESOLV_CONF`] read-only at
    /// [`RESOLV_CONF_TARGET`] and lets the sandbox's own network namespace bind ports below
    /// 1024 without a capability ([`UNPRIVILEGED_PORT_SYSCTL`] = 0). Only set with a bridged
    /// proxy (`proxy.host_socket`). Default: false.
    pub transparent_egress: bool,
    /// Extra `NO_PROXY` entries. Default: none.
    pub no_proxy_extra: Option<String>,
    /// What no author mount may reach (the store, the runtime root) and what live sandboxes
    /// can write (issue 15 items 1 and 3). Default: empty (the driver still protects what
    /// [`ScreenContext::from_env`](crate::ScreenContext::from_env) finds).
    pub mount_scope: crate::mounts::MountScope,
}

impl RunInfo {
    /// A run with the required fields and every optional one at its default (trusted, no proxy,
    /// no listener, unbounded).
    pub fn new(
        run_id: impl Into<String>,
        store_id: impl Into<String>,
        workspace_path: impl Into<PathBuf>,
        run_dir: impl Into<PathBuf>,
    ) -> Self {
        RunInfo {
            run_id: run_id.into(),
            friendly_name: String::new(),
            store_id: store_id.into(),
            workspace_path: workspace_path.into(),
            trust: Trust::Trusted,
            run_dir: run_dir.into(),
            proxy: None,
            listener_planned: false,
            max_duration_seconds: 0,
            proxy_ca_pem: None,
            transparent_egress: false,
            no_proxy_extra: None,
            mount_scope: crate::mounts::MountScope::default(),
        }
    }
}

/// Where a driver binds the sandbox's resolver configuration under transparent egress.
pub const RESOLV_CONF_TARGET: &str = "/etc/resolv.conf";
/// The file a driver writes [`RESOLV_CONF`] to, inside the per-run dir (bound read-only at
/// [`RESOLV_CONF_TARGET`]).
pub const RESOLV_CONF_RUN_DIR_FILE: &str = "dns/resolv.conf";
/// The sandbox's resolver configuration under transparent egress: the bridge's DNS stub on
/// loopback and nothing else; no search domains (a bare name is asked as it is, once), a short
/// timeout (the stub answers from the proxy's policy, never from the network).
pub const RESOLV_CONF: &str = "# iterion: transparent egress; the egress bridge answers from the run's network policy\nnameserver 127.0.0.1\noptions ndots:1 timeout:2 attempts:2\n";
/// The per-network-namespace sysctl that lets the bridge (with every capability dropped) bind
/// the DNS stub on 53 and the synthetic listeners on 80/443: set to 0 in the sandbox's own
/// namespace only (docker's default for a container network namespace; podman's is 1024).
pub const UNPRIVILEGED_PORT_SYSCTL: &str = "net.ipv4.ip_unprivileged_port_start";

/// Where a driver binds the proxy's ephemeral CA in the sandbox, when TLS inspection is on.
pub const PROXY_CA_TARGET: &str = "/run/iterion/ca/egress-ca.pem";

/// The sandbox env a proxy attachment sets (SANDBOX.md §6.11), the one owner of its keys for
/// every driver that builds an env map: the four proxy variables point at the endpoint,
/// `NO_PROXY`/`no_proxy` are loopback plus the run's extra entries, `ALL_PROXY`/`all_proxy`
/// are removed; with TLS inspection the usual CA variables point at [`PROXY_CA_TARGET`]. Later
/// tiers win: call it after the spec's and the secrets' env.
pub fn plant_proxy_env(env: &mut std::collections::BTreeMap<String, String>, info: &RunInfo) {
    plant_proxy_env_with(env, info, &[]);
}

/// [`plant_proxy_env`] with driver-local `NO_PROXY` entries (kubernetes: the pod's own IP),
/// listed after loopback and before the run's extra entries; empty entries are dropped.
pub fn plant_proxy_env_with(
    env: &mut std::collections::BTreeMap<String, String>,
    info: &RunInfo,
    local_no_proxy: &[&str],
) {
    const PROXY_KEYS: [&str; 4] = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"];
    const CA_KEYS: [&str; 6] = [
        "NODE_EXTRA_CA_CERTS",
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "REQUESTS_CA_BUNDLE",
        "NIX_SSL_CERT_FILE",
    ];
    if let Some(proxy) = &info.proxy {
        for key in PROXY_KEYS {
            env.insert(key.to_owned(), proxy.endpoint.clone());
        }
        let mut no_proxy = "localhost,127.0.0.1,::1".to_owned();
        let extras = local_no_proxy
            .iter()
            .copied()
            .chain(info.no_proxy_extra.as_deref())
            .filter(|e| !e.is_empty());
        for extra in extras {
            no_proxy.push(',');
            no_proxy.push_str(extra);
        }
        env.insert("NO_PROXY".to_owned(), no_proxy.clone());
        env.insert("no_proxy".to_owned(), no_proxy);
        env.remove("ALL_PROXY");
        env.remove("all_proxy");
    }
    if info.proxy_ca_pem.is_some() {
        for key in CA_KEYS {
            env.insert(key.to_owned(), PROXY_CA_TARGET.to_owned());
        }
    }
}

/// A byte source for an exec's stdin.
pub type ExecInput = Box<dyn AsyncRead + Send + Unpin>;
/// A byte sink for an exec's stdout or stderr.
pub type ExecOutput = Box<dyn AsyncWrite + Send + Unpin>;

/// Options of one exec (SANDBOX.md §4.1). Streams the caller supplies are used as they are; an
/// output the caller did not supply is buffered into the [`ExecResult`].
#[derive(Default)]
pub struct ExecOpts {
    /// Appended to the sandbox env, in order; empty values are honoured.
    pub env: Vec<(String, String)>,
    /// Working directory. Default: the workspace folder.
    pub workdir: Option<String>,
    /// Fed to the process's stdin, which is closed at its end unless `keep_stdin_open`.
    /// Default: no stdin.
    pub stdin: Option<ExecInput>,
    /// Receives stdout as it is produced. Default: buffered into the result.
    pub stdout: Option<ExecOutput>,
    /// Receives stderr as it is produced. Default: buffered into the result.
    pub stderr: Option<ExecOutput>,
    /// Keep stdin attached after `stdin` is exhausted (or with no `stdin`), until the process
    /// exits. Default: false.
    pub keep_stdin_open: bool,
    /// Run as this user (docker/podman; the namespace driver runs only its one mapped user and
    /// refuses another, [`SandboxRun::only_user`]; kubernetes ignores it). Default: the spec's
    /// user.
    pub user: Option<String>,
}

impl fmt::Debug for ExecOpts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.env.iter().map(|(key, _)| key.as_str()).collect();
        f.debug_struct("ExecOpts")
            .field("env_keys", &keys)
            .field("workdir", &self.workdir)
            .field("stdin", &self.stdin.is_some())
            .field("stdout", &self.stdout.is_some())
            .field("stderr", &self.stderr.is_some())
            .field("keep_stdin_open", &self.keep_stdin_open)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// The outcome of an exec. A non-zero exit code is not an error; only transport and API
/// failures are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecResult {
    /// The process's exit code (128 + signal when killed by one).
    pub exit_code: i64,
    /// Buffered stdout, when the caller supplied no stream.
    pub stdout: Option<Bytes>,
    /// Buffered stderr, when the caller supplied no stream.
    pub stderr: Option<Bytes>,
}

/// A driver: turns a spec into a running sandbox (SANDBOX.md §4.1). Drivers are `Send + Sync` and
/// safe for concurrent runs. They report capability ([`Error::DriverUnavailable`]), never policy.
#[async_trait]
pub trait Driver: Send + Sync {
    /// `docker`, `podman`, `kubernetes` or `noop`.
    fn name(&self) -> &str;

    /// What this driver can do.
    fn capabilities(&self) -> Capabilities;

    /// Why this driver leaves [`Spec::limits`](crate::Spec::limits) unapplied, or `None` when it
    /// applies them ([`Capabilities::supports_resource_limits`]). A driver that knows more (the
    /// namespace driver reads the host's cgroup state) says so here.
    fn resource_limits_refusal(&self) -> Option<String> {
        (!self.capabilities().supports_resource_limits)
            .then(|| format!("the {} driver does not apply resource limits", self.name()))
    }

    /// Validates the spec ([`Spec::validate`] first) and does the slow I/O (pull). Creates
    /// nothing.
    async fn prepare(&self, spec: &Spec, progress: &dyn Progress) -> Result<PreparedSpec>;

    /// Creates and starts the sandbox. The returned run is an allocated resource: the caller must
    /// call [`SandboxRun::cleanup`]. A failure after creation cleans up before returning.
    async fn start(&self, prepared: PreparedSpec, info: RunInfo) -> Result<Box<dyn SandboxRun>>;

    /// Builds `build:` specs (docker/podman).
    fn builder(&self) -> Option<&dyn Builder> {
        None
    }

    /// Where this driver's proxy binds and how the sandbox reaches it.
    fn proxy_configurer(&self) -> Option<&dyn ProxyConfigurer> {
        None
    }

    /// The scheduling policy summary (kubernetes), or its parse error.
    fn scheduling_policy(&self) -> Option<Result<String>> {
        None
    }

    /// This driver writing its operations to `log` (SANDBOX.md §3.6), or `None` when it writes
    /// nothing worth keeping (noop).
    fn with_run_log(&self, _log: Arc<dyn RunLog>) -> Option<Arc<dyn Driver>> {
        None
    }
}

/// Constructs one driver, probing its engine. Returning [`Error::Unavailable`] means "skip me":
/// the factory records the reason and tries the next driver.
#[async_trait]
pub trait DriverConstructor: Send + Sync {
    /// Connects to the engine and returns a ready driver.
    async fn construct(&self) -> Result<Arc<dyn Driver>>;
}

/// A running sandbox (SANDBOX.md §4.1).
#[async_trait]
pub trait SandboxRun: Send + Sync {
    /// The driver's name.
    fn driver(&self) -> &str;

    /// The container id or pod name.
    fn id(&self) -> &str;

    /// What the driver verified itself about egress enforcement (`sandbox_started
    /// .egress_enforced`, SANDBOX.md §5.7): `Some(true)` when a probe proved a direct connection
    /// fails, `None` when it could not tell. Default: `None` (the engine knows the bridged shape
    /// of docker/podman on its own).
    fn egress_enforced(&self) -> Option<bool> {
        None
    }

    /// Whether [`SandboxRun::exec`] is already a direct spawn by a process of the sandbox (no
    /// runtime or API round trip per exec), so that the in-sandbox exec agent
    /// ([`crate::exec_agent`]) would only add its own start to the run. Default: `false`.
    fn exec_spawns_directly(&self) -> bool {
        false
    }

    /// Whether a process fed through [`ExecOpts::stdin`] reads end-of-file once the bytes are
    /// written (its stdin closed). Kubernetes answers `false`: there a close would end the whole
    /// exec on the v4 protocol, so stdin stays open until the process exits and a caller whose
    /// command reads to the end must tell it a length (`head -c N`). Default: `true`.
    fn exec_stdin_reaches_eof(&self) -> bool {
        true
    }

    /// The channel to an exec agent the driver started as the sandbox's own command
    /// ([`Spec::exec_agent`]), already greeted; taken once (later calls answer `None`). Default:
    /// `None` (the engine starts the agent through [`SandboxRun::exec`]).
    fn take_attached_agent(&self) -> Option<crate::exec_agent::AttachedAgent> {
        None
    }

    /// The one user every exec runs as, when the sandbox has only one (the namespace driver
    /// maps a single uid and gid): an [`ExecOpts::user`] naming another is refused, never
    /// ignored. `None` (the default): an exec may name any user the sandbox has.
    fn only_user(&self) -> Option<String> {
        None
    }

    /// Runs `argv` in the sandbox and waits for it. A non-zero exit is not an error.
    ///
    /// # Errors
    ///
    /// Transport and API failures; [`Error::SandboxClosed`] after [`SandboxRun::cleanup`].
    async fn exec(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult>;

    /// Stops and removes the sandbox. Idempotent; errors are logged, not returned, once the
    /// resource is gone.
    async fn cleanup(&self) -> Result<()>;

    /// Rewrites file secrets in place (docker, kubernetes).
    fn secret_file_refresher(&self) -> Option<&dyn SecretFileRefresher> {
        None
    }

    /// Writes workspace files into a copy-based sandbox (kubernetes). Its presence is what makes
    /// a run copy-based.
    fn workspace_file_refresher(&self) -> Option<&dyn WorkspaceFileRefresher> {
        None
    }

    /// Exports a copy-based workspace back to the host (kubernetes).
    fn workspace_exporter(&self) -> Option<&dyn WorkspaceExporter> {
        None
    }

    /// Reads the sandbox workspace's git HEAD (kubernetes).
    fn workspace_head_capturer(&self) -> Option<&dyn WorkspaceHeadCapturer> {
        None
    }

    /// Drains the run files out of a sandbox whose run-files bind was dropped (kubernetes).
    fn run_files_drainer(&self) -> Option<&dyn RunFilesDrainer> {
        None
    }
}

/// Builds a `build:` spec into an image (SANDBOX.md §4.4).
#[async_trait]
pub trait Builder: Send + Sync {
    /// Builds `prepared.spec.build` and returns a prepared spec with `image = <tag>` and
    /// `build = None`; returns `prepared` unchanged when there is nothing to build. Bounded by
    /// phase `image build`.
    async fn build(&self, prepared: PreparedSpec, info: &RunInfo) -> Result<PreparedSpec>;
}

/// Where a proxy listens (SANDBOX.md §6.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProxyBind {
    /// A Unix socket at this host path (docker/podman, reached through the egress bridge).
    UnixSocket(PathBuf),
    /// A TCP address (`0.0.0.0:0` on kubernetes, `127.0.0.1:0` by default).
    Tcp(std::net::SocketAddr),
}

/// The port the sandbox dials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdvertisedPort {
    /// A fixed port (3128 inside a docker sandbox).
    Fixed(u16),
    /// Whatever port the TCP listener was given.
    Bound,
}

/// A driver's bind/advertise pair for the proxy (SANDBOX.md §6.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyAddresses {
    /// Where the proxy listens on the host.
    pub bind: ProxyBind,
    /// The host name the sandbox dials.
    pub advertise_host: String,
    /// The port the sandbox dials.
    pub advertise_port: AdvertisedPort,
}

/// Decides the proxy's addresses for a driver (docker/podman, kubernetes).
pub trait ProxyConfigurer: Send + Sync {
    /// The bind/advertise pair for a run whose per-run dir is `run_dir`.
    ///
    /// # Errors
    ///
    /// When the driver cannot offer one (kubernetes without `ITERION_POD_IP`).
    fn proxy_addresses(&self, run_dir: &Path) -> Result<ProxyAddresses>;
}

/// The proxy addresses for `driver`: its [`ProxyConfigurer`]'s, else `127.0.0.1:0` advertised as
/// `127.0.0.1` at the bound port (SANDBOX.md §6.2).
///
/// # Errors
///
/// The configurer's.
pub fn proxy_addresses_for_driver(driver: &dyn Driver, run_dir: &Path) -> Result<ProxyAddresses> {
    match driver.proxy_configurer() {
        Some(configurer) => configurer.proxy_addresses(run_dir),
        None => Ok(ProxyAddresses {
            bind: ProxyBind::Tcp(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
            advertise_host: "127.0.0.1".to_owned(),
            advertise_port: AdvertisedPort::Bound,
        }),
    }
}

/// Rewrites a file secret in a running sandbox (SANDBOX.md §4.8).
#[async_trait]
pub trait SecretFileRefresher: Send + Sync {
    /// Replaces the value of the secret file `name`. An empty value or an unknown name is
    /// refused; there is never an empty-file window.
    async fn refresh_secret_file(&self, name: &str, value: &SecretBytes) -> Result<()>;
}

/// Writes a workspace file into a copy-based sandbox (SANDBOX.md §5.11).
#[async_trait]
pub trait WorkspaceFileRefresher: Send + Sync {
    /// Writes `value` at `rel` (clean, relative, no control characters) in the sandbox
    /// workspace. The value never appears in argv.
    async fn refresh_workspace_file(&self, rel: &str, value: &[u8]) -> Result<()>;
}

/// Exports a copy-based workspace back to the host (SANDBOX.md §5.11).
#[async_trait]
pub trait WorkspaceExporter: Send + Sync {
    /// Streams the sandbox workspace into the host workspace `dest`.
    async fn export_workspace(&self, dest: &Path) -> Result<()>;
}

/// Drains the run files out of a sandbox without host binds, at teardown (SANDBOX.md §5.11).
#[async_trait]
pub trait RunFilesDrainer: Send + Sync {
    /// Copies the sandbox directory `from` (when it exists) into the host directory `dest`
    /// (created when missing), writing only what `screen_member`
    /// accepts. Bounded by [`RUN_FILES_DRAIN_TIMEOUT`](crate::RUN_FILES_DRAIN_TIMEOUT). Never
    /// fails: what went wrong, and every member not written, is in the report.
    async fn drain_run_files(&self, from: &str, dest: &Path) -> crate::DrainReport;
}

/// Reads the sandbox workspace's git HEAD (SANDBOX.md §5.11).
#[async_trait]
pub trait WorkspaceHeadCapturer: Send + Sync {
    /// The commit HEAD points at, or `None` outside a repository.
    async fn capture_workspace_head(&self) -> Result<Option<String>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn proxy_urls_render_their_token_as_stars() {
        let urls = [
            "http://t:0123abcd@127.0.0.1:3128",
            "http://t:0123abcd@10.0.0.7:40111/path",
            "http://127.0.0.1:3128",
            "not a url",
        ];
        let got: Vec<String> = urls.iter().map(|u| redact_proxy_url(u)).collect();
        assert_eq!(
            got,
            vec![
                "http://t:***@127.0.0.1:3128",
                "http://t:***@10.0.0.7:40111/path",
                "http://127.0.0.1:3128",
                "not a url",
            ]
        );
    }

    #[test]
    fn run_info_debug_never_shows_the_proxy_token() {
        let mut info = RunInfo::new("r1", "s1", "/ws", "/run/r1");
        info.proxy = Some(ProxyAttachment {
            endpoint: "http://t:supersecrettoken@127.0.0.1:3128".to_owned(),
            host_socket: None,
            port: Some(3128),
        });
        let debug = format!("{info:?}");
        assert_eq!(
            (debug.contains("supersecrettoken"), debug.contains("t:***@")),
            (false, true)
        );
    }

    #[test]
    fn a_prepared_spec_belongs_to_its_driver() {
        let prepared = PreparedSpec::new("docker", Spec::default());
        assert_eq!(prepared.check_driver("docker").ok(), Some(()));
        assert_eq!(
            prepared
                .check_driver("kubernetes")
                .map_err(|e| (e.code(), e.to_string())),
            Err((
                "SANDBOX_SETUP_FAILED",
                "sandbox: kubernetes: prepared spec comes from driver \"docker\"".to_owned()
            ))
        );
    }
}
