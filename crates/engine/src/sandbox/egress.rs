//! L10 and the egress half of L11 (SANDBOX.md §6.1–§6.2, §4.6): the per-run proxy and the
//! in-container egress bridge.
//!
//! - [`start_network_proxy`] decides whether a proxy is needed (§6.1: not when the policy is
//!   `open` and TLS inspection is off), compiles the policy, mints the token and listens on
//!   `<run dir>/net/proxy.sock`. TLS inspection (§6.9) is on when a resolved secret has `hosts`,
//!   or when `ITERION_SANDBOX_TLS_INSPECT` is truthy (falsy turns it off); it mints the
//!   ephemeral CA and registers the secrets with the rewriter (§6.10). Its `network_blocked`
//!   callback feeds a channel that a task drains into the run's event sink. Whatever the mode,
//!   a running proxy refuses non-public addresses (issue 15 item 9): under `open` with a scoped
//!   secret it is there for rewriting, but it still never reaches the host's loopback.
//! - [`start_egress_bridge`] execs `iterion __egress-bridge` as `0:0` in the started container,
//!   waits up to 10 s for `ready`, and keeps the exec attached and drained until teardown.
//!
//! The token lives only in the endpoint handed to the driver (whose `Debug` and run-log lines
//! redact it) and in the proxy; it is never logged here.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use iterion_netproxy::{
    BlockedEvent, EphemeralCa, ProxyBuilder, ProxyToken, RunningProxy, Secret, SecretRewriter,
    StaticHostsResolver, compile_with_preset,
};
use iterion_sandbox::{
    AdvertisedPort, ExecOpts, LogLevel, NetworkMode, NetworkPolicy, ProxyAddresses, ProxyBind,
    RunLog, SandboxRun,
};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::task::JoinHandle;

use crate::records::events::Event;
use crate::records::sandbox_events::NetworkBlocked;
use crate::records::sink::EventSink;
use crate::sandbox::error::SetupError;
use iterion_vocab::{Environment, FailureCode};

/// How long the bridge has to print `ready` (§4.6).
pub(crate) const BRIDGE_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// The phase of a bridge timeout.
pub(crate) const PHASE_EGRESS_BRIDGE: &str = "egress bridge";
/// The bridge's argv inside the container (§4.6).
pub(crate) const BRIDGE_ARGV: [&str; 4] = [
    "/run/iterion/bin/iterion",
    "__egress-bridge",
    "--listen",
    "127.0.0.1:3128=/run/iterion/net/proxy.sock",
];
/// Transparent egress (issue 22): the bridge's DNS stub, on the address the driver's
/// `/etc/resolv.conf` names; the run's token follows on the bridge's stdin.
pub(crate) const BRIDGE_DNS_ARGV: [&str; 2] = ["--dns", "127.0.0.1:53=/run/iterion/net/proxy.sock"];
/// How much of the bridge's stderr a failure quotes.
const STDERR_TAIL_BYTES: usize = 2048;
/// The static hosts override (§6.6, §17).
const PROXY_HOSTS_ENV: &str = "ITERION_SANDBOX_PROXY_HOSTS";
/// Forces TLS inspection on (truthy) or off (falsy) (§6.9).
const TLS_INSPECT_ENV: &str = "ITERION_SANDBOX_TLS_INSPECT";
/// §6.9: the bound on an inspected request body (default 64 MiB).
const INSPECT_MAX_BODY_ENV: &str = "ITERION_SANDBOX_INSPECT_MAX_BODY";

/// The extra upstream roots `ITERION_SANDBOX_UPSTREAM_CA` names (none when it is unset or
/// empty): for an operator behind a corporate TLS proxy, and for tests with a local HTTPS
/// server. Only the inspecting proxy's own TLS client trusts them.
///
/// # Errors
///
/// The file cannot be read or holds no usable certificate (the error names the variable).
pub(crate) fn upstream_roots_from_env(
    env: &Environment,
) -> Result<Vec<iterion_netproxy::CertificateDer<'static>>, iterion_netproxy::NetProxyError> {
    match env
        .get_os(iterion_netproxy::UPSTREAM_CA_ENV)
        .filter(|v| !v.is_empty())
    {
        Some(path) => iterion_netproxy::load_upstream_roots(std::path::Path::new(&path)),
        None => Ok(Vec::new()),
    }
}

/// A resolved secret as the proxy's rewriter sees it. `Debug` never shows the value.
#[derive(Clone)]
pub(crate) struct EgressSecret {
    pub name: String,
    pub value: String,
    pub hosts: Vec<String>,
    /// An `as: file` secret: never materialised, but still scanned for exfiltration.
    pub file: bool,
}

impl std::fmt::Debug for EgressSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressSecret")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// What L10 needs about the run.
pub(crate) struct ProxyRequest<'a> {
    pub policy: &'a NetworkPolicy,
    pub run_id: &'a str,
    /// An untrusted run: the proxy runs under `open` too (issue 15), so its only route is the
    /// bridge and the resolved-address check refuses the host's loopback, the docker bridge's
    /// gateway, link-local metadata endpoints and every other non-public address.
    pub untrusted: bool,
    /// The driver's bind/advertise pair (§6.2).
    pub addresses: ProxyAddresses,
    pub secrets: &'a [EgressSecret],
    /// The driver's `supports_tls_inspection`.
    pub tls_capable: bool,
    pub max_duration_seconds: u64,
    /// The run's redactor, told the token as soon as it exists.
    pub redactor: &'a crate::records::secrets::Redactor,
    /// The engine's environment: the `ITERION_SANDBOX_*` egress knobs.
    pub env: &'a Environment,
    /// `--allow-host`: names the proxy resolves to the host's loopback (their rules are in
    /// `policy` already).
    pub host_services: &'a [crate::sandbox::host_services::HostService],
}

/// §6.9: whether inspection is on, given the driver and `ITERION_SANDBOX_TLS_INSPECT`.
fn inspection_wanted(request: &ProxyRequest<'_>, forced: Option<bool>) -> bool {
    if !request.tls_capable {
        return false;
    }
    forced.unwrap_or_else(|| request.secrets.iter().any(|s| !s.hosts.is_empty()))
}

/// A running per-run proxy and the task forwarding its `network_blocked` events.
pub(crate) struct EngineProxy {
    proxy: RunningProxy,
    forwarder: JoinHandle<()>,
    /// `http://t:<token>@127.0.0.1:3128`. Holds the token: never log it.
    pub endpoint: String,
    /// The TCP port the proxy listens on, when it does.
    pub port: Option<u16>,
    /// Whether the proxy listens on a Unix socket that the egress bridge splices to (§4.6).
    /// A bridged proxy also gets transparent egress (issue 22): the bridge's DNS stub and
    /// synthetic addresses, for clients that ignore the proxy variables.
    pub bridged: bool,
    /// The run's token, for the bridge's stdin (never argv). Never log it.
    token: String,
}

impl EngineProxy {
    /// Whether TLS inspection is on.
    pub(crate) fn tls_inspection(&self) -> bool {
        self.proxy.tls_inspection()
    }

    /// The ephemeral CA (PEM) the container must trust, when inspection is on.
    pub(crate) fn ca_pem(&self) -> Option<String> {
        self.proxy.ca_pem().map(str::to_owned)
    }

    /// Stops listening (the socket goes away), lets the forwarder record what is queued, and
    /// logs the blocked-request counts (§6.8).
    pub(crate) async fn shutdown(self, run_log: &dyn RunLog) {
        self.proxy.shutdown().await;
        for (host, reason, count) in self.proxy.blocked_counts() {
            run_log.line(
                LogLevel::Info,
                &format!(
                    "sandbox: egress proxy blocked {host} ({}) {count} time(s)",
                    reason.as_str()
                ),
            );
        }
        let beyond = self.proxy.blocked_beyond();
        if beyond > 0 {
            run_log.line(
                LogLevel::Warn,
                &format!(
                    "sandbox: egress proxy blocked {beyond} more request(s) to hosts beyond the first {} (not itemised, no event)",
                    iterion_netproxy::BLOCKED_HOSTS_MAX
                ),
            );
        }
        if let Some(path) = self.proxy.unix_path() {
            let _ = tokio::fs::remove_file(path).await;
        }
        drop(self.proxy);
        let mut forwarder = self.forwarder;
        if tokio::time::timeout(Duration::from_secs(2), &mut forwarder)
            .await
            .is_err()
        {
            forwarder.abort();
        }
    }
}

/// §6.1–§6.2: `None` when the policy is open and inspection is off; otherwise a proxy listening
/// at the driver's bind address (docker/podman: `<run dir>/net/proxy.sock`, its dir created
/// 0755; a driver without a `ProxyConfigurer`: `127.0.0.1:0`). A compile error or a failed start
/// is `SANDBOX_SETUP_FAILED`.
pub(crate) async fn start_network_proxy(
    request: &ProxyRequest<'_>,
    sink: Arc<dyn EventSink>,
    run_log: &dyn RunLog,
) -> Result<Option<EngineProxy>, SetupError> {
    let (policy, run_id) = (request.policy, request.run_id);
    let forced = request
        .env
        .get(TLS_INSPECT_ENV)
        .and_then(|v| iterion_sandbox::parse_switch(&v));
    if !request.tls_capable && request.secrets.iter().any(|s| !s.hosts.is_empty()) {
        run_log.line(
            LogLevel::Warn,
            "sandbox: the driver cannot inspect TLS; secrets with hosts stay placeholders",
        );
    }
    let inspect = inspection_wanted(request, forced);
    if policy.mode == NetworkMode::Open && !inspect && !request.untrusted {
        return Ok(None);
    }
    if let ProxyBind::UnixSocket(path) = &request.addresses.bind
        && let Some(net) = path.parent()
    {
        use std::os::unix::fs::PermissionsExt as _;
        tokio::fs::create_dir_all(net)
            .await
            .map_err(|e| SetupError::failed(format!("cannot create {}: {e}", net.display())))?;
        tokio::fs::set_permissions(net, std::fs::Permissions::from_mode(0o755))
            .await
            .map_err(|e| SetupError::failed(format!("cannot chmod {}: {e}", net.display())))?;
    }
    let compiled = compile_with_preset(
        policy.mode.as_str(),
        policy.preset.as_deref(),
        &policy.rules,
    )
    .map_err(|e| SetupError::failed(format!("sandbox network policy: {e}")))?;
    let token = ProxyToken::generate()
        .map_err(|e| SetupError::failed(format!("sandbox proxy token: {e}")))?;
    // Before anything can print it (the container's env carries it in the proxy URL).
    request.redactor.add_token(token.reveal());
    let bridge_token = token.reveal().to_owned();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<BlockedEvent>();
    let mut builder = ProxyBuilder::new(run_id, compiled, token);
    builder = match &request.addresses.bind {
        ProxyBind::UnixSocket(path) => builder.listen_unix(path.clone()),
        ProxyBind::Tcp(addr) => builder.listen_tcp(*addr),
    };
    let mut builder = builder.on_blocked(Arc::new(move |event| {
        let _ = tx.send(event);
    }));
    let mut static_hosts = match request
        .env
        .get(PROXY_HOSTS_ENV)
        .filter(|v| !v.trim().is_empty())
    {
        Some(value) => iterion_netproxy::parse_static_hosts(&value)
            .map_err(|e| SetupError::failed(format!("{PROXY_HOSTS_ENV}: {e}")))?,
        None => std::collections::HashMap::new(),
    };
    // --allow-host names win over the variable: the operator named them for this run.
    static_hosts.extend(crate::sandbox::host_services::static_hosts(
        request.host_services,
    ));
    if !static_hosts.is_empty() {
        let resolver =
            StaticHostsResolver::new(static_hosts, Arc::new(iterion_netproxy::SystemResolver));
        builder = builder.resolver(Arc::new(resolver));
    }
    if inspect {
        let mut rewriter = SecretRewriter::new();
        for secret in request.secrets {
            let value = Secret::new(secret.value.as_bytes().to_vec());
            let added = if secret.file {
                rewriter.add_file_secret(&secret.name, value, &secret.hosts)
            } else {
                rewriter.add_value_secret(&secret.name, value, &secret.hosts)
            };
            added.map_err(|e| SetupError::failed(format!("secret {}: {e}", secret.name)))?;
        }
        let budget = Duration::from_secs(request.max_duration_seconds);
        let ca = EphemeralCa::new(budget)
            .map_err(|e| SetupError::failed(format!("sandbox egress CA: {e}")))?;
        builder = builder.secrets(rewriter).tls_inspection(Arc::new(ca));
        let roots = upstream_roots_from_env(request.env)
            .map_err(|e| SetupError::failed(format!("sandbox egress proxy: {e}")))?;
        builder = builder.extra_upstream_roots(roots);
        if let Some(value) = request
            .env
            .get(INSPECT_MAX_BODY_ENV)
            .filter(|v| !v.trim().is_empty())
        {
            let bytes = iterion_netproxy::parse_inspect_max_body(&value)
                .map_err(|e| SetupError::failed(format!("{INSPECT_MAX_BODY_ENV}: {e}")))?;
            builder = builder.max_inspected_body(bytes);
        }
    }
    let proxy = builder
        .start()
        .await
        .map_err(|e| SetupError::failed(format!("sandbox egress proxy: {e}")))?;
    let forwarder = tokio::spawn(async move {
        while let Some(blocked) = rx.recv().await {
            sink.emit(Event::NetworkBlocked(NetworkBlocked {
                host: blocked.host,
                reason: blocked.reason.as_str().to_owned(),
                run_id: blocked.run_id,
            }))
            .await;
        }
    });
    let port = match request.addresses.advertise_port {
        AdvertisedPort::Fixed(port) => port,
        AdvertisedPort::Bound => proxy.tcp_addr().map_or(0, |a| a.port()),
    };
    let endpoint = proxy.endpoint_url(&request.addresses.advertise_host, port);
    let bridged = matches!(request.addresses.bind, ProxyBind::UnixSocket(_));
    Ok(Some(EngineProxy {
        proxy,
        forwarder,
        endpoint,
        port: (!bridged).then_some(port),
        bridged,
        token: bridge_token,
    }))
}

/// The rules of `rules` that would let the sandbox reach a non-public address (an allowing IP or
/// CIDR rule naming one, [`iterion_netproxy::Rule::opens_non_public`]), as written. An untrusted
/// run may not have them from its workflow or devcontainer: the host's loopback and private
/// networks are exactly what a hostile working tree wants to reach. A rule that does not parse
/// is left to the policy's compilation, which refuses it with its own error.
pub(crate) fn non_public_rules(rules: &[String]) -> Vec<String> {
    rules
        .iter()
        .enumerate()
        .filter_map(|(i, raw)| iterion_netproxy::Rule::parse(raw, i).ok())
        .filter(iterion_netproxy::Rule::opens_non_public)
        .map(|rule| rule.source)
        .collect()
}

/// The attached bridge exec and the tasks draining it; aborting them detaches (the process ends
/// with the container).
pub(crate) struct EgressBridge {
    tasks: Vec<JoinHandle<()>>,
}

impl EgressBridge {
    pub(crate) fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// The bridge's argv: [`BRIDGE_ARGV`], and [`BRIDGE_DNS_ARGV`] under transparent egress.
pub(crate) fn bridge_argv(transparent: bool) -> Vec<String> {
    let dns: &[&str] = if transparent { &BRIDGE_DNS_ARGV } else { &[] };
    BRIDGE_ARGV
        .iter()
        .chain(dns)
        .map(|s| (*s).to_owned())
        .collect()
}

/// What to add to a bridge failure when the bound engine binary is not statically linked: it
/// then needs a libc the image may lack, and the exec's `no such file or directory` names neither
/// the file nor the fix (issue 19). Empty for a static binary (the failure is something else).
pub(crate) fn dynamic_binary_hint(binary: Option<&std::path::Path>) -> String {
    let Some(binary) = binary else {
        return String::new();
    };
    match iterion_sandbox::link_kind_of(binary) {
        iterion_sandbox::LinkKind::Static => String::new(),
        kind => format!(
            "\nthe egress bridge is the engine binary {} bound at {}; it is not statically linked ({kind}), so it needs a libc this image may lack: {}",
            binary.display(),
            crate::sandbox::mounts::ENGINE_BIN_TARGET,
            crate::sandbox::engine_binary::STATIC_BUILD_REMEDY,
        ),
    }
}

/// §4.6: execs the bridge as `0:0` (so that the sandbox user cannot signal it) and waits for
/// `ready`. A sandbox with one user only ([`SandboxRun::only_user`], the namespace driver) runs
/// it as that user: there is no other, and the bridge reaches nothing the user could not (the
/// proxy socket, behind the run's token).
///
/// With `proxy` (transparent egress, issue 22) the bridge also serves DNS
/// ([`BRIDGE_DNS_ARGV`]), and the run's token is the first line of its stdin.
pub(crate) async fn start_egress_bridge(
    run: Arc<dyn SandboxRun>,
    proxy: Option<&EngineProxy>,
) -> Result<EgressBridge, SetupError> {
    let (out_w, out_r) = tokio::io::duplex(8192);
    let (err_w, mut err_r) = tokio::io::duplex(8192);
    let argv = bridge_argv(proxy.is_some());
    let opts = ExecOpts {
        stdout: Some(Box::new(out_w)),
        stderr: Some(Box::new(err_w)),
        stdin: proxy.map(|p| {
            Box::new(std::io::Cursor::new(format!("{}\n", p.token).into_bytes()))
                as iterion_sandbox::ExecInput
        }),
        user: run.only_user().or_else(|| Some("0:0".to_owned())),
        ..ExecOpts::default()
    };
    let exec = tokio::spawn(async move {
        match run.exec(&argv, opts).await {
            Ok(result) => tracing::debug!("egress bridge exited {}", result.exit_code),
            Err(error) => tracing::debug!("egress bridge exec: {error}"),
        }
    });
    let tail = Arc::new(Mutex::new(Vec::<u8>::new()));
    let err_tail = Arc::clone(&tail);
    let err_task = tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = err_r.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut t = err_tail.lock().unwrap_or_else(PoisonError::into_inner);
            t.extend_from_slice(&buf[..n]);
            let excess = t.len().saturating_sub(STDERR_TAIL_BYTES);
            t.drain(..excess);
        }
    });
    let mut out = BufReader::new(out_r);
    let wait_ready = async {
        let mut line = String::new();
        loop {
            line.clear();
            match out.read_line(&mut line).await {
                Ok(0) | Err(_) => return false,
                Ok(_) if line.trim() == "ready" => return true,
                Ok(_) => {}
            }
        }
    };
    let fail = |tasks: [&JoinHandle<()>; 2]| {
        for task in tasks {
            task.abort();
        }
    };
    match tokio::time::timeout(BRIDGE_READY_TIMEOUT, wait_ready).await {
        Ok(true) => {}
        Ok(false) => {
            // Give stderr a moment to arrive after the exit.
            let _ = tokio::time::timeout(Duration::from_secs(1), exec).await;
            let _ = tokio::time::timeout(Duration::from_secs(1), err_task).await;
            let text =
                String::from_utf8_lossy(&tail.lock().unwrap_or_else(PoisonError::into_inner))
                    .trim()
                    .to_owned();
            return Err(SetupError::failed(format!(
                "egress bridge exited before ready: {}",
                if text.is_empty() {
                    "(no output)"
                } else {
                    &text
                }
            )));
        }
        Err(_) => {
            fail([&exec, &err_task]);
            return Err(SetupError {
                code: FailureCode::SandboxSetupTimeout,
                message: format!(
                    "egress bridge did not become ready within {}s",
                    BRIDGE_READY_TIMEOUT.as_secs()
                ),
                phase: PHASE_EGRESS_BRIDGE.to_owned(),
            });
        }
    }
    let out_task = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut out, &mut tokio::io::sink()).await;
    });
    Ok(EgressBridge {
        tasks: vec![exec, err_task, out_task],
    })
}

#[cfg(test)]
#[path = "egress_tests.rs"]
mod tests;
