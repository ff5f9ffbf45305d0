//! The seam between the kubernetes driver and the API server (STYLE.md §5.4).
//!
//! [`KubeApi`] has one method per API call the driver (and the cloud reaper, `reap.rs`) makes,
//! over small typed values; [`KubeRsApi`] is the real implementation on a `kube::Client`. The
//! driver's tests run [`KubeRsApi`] itself against a fake API server on loopback
//! (`tests/support/fake_kube.rs` of this crate, which the engine's reaper tests and benchmark
//! include by path), so the kube-rs request building, server-side apply and the exec websocket
//! are exercised for real; only the cluster is fake.
//!
//! Errors are classified once, here, into [`KubeError`]: callers branch on *what happened* (not
//! found, forbidden), never on a message.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use iterion_sandbox::ListedResource;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, DeleteParams, ListParams, Patch, PatchParams};
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncWrite};

/// The field manager of every server-side apply (SANDBOX.md §5.7).
pub(crate) const FIELD_MANAGER: &str = "iterion";

/// What an API call answered when it did not succeed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// 404.
    #[error("not found: {message}")]
    NotFound {
        /// The server's message.
        message: String,
    },
    /// 401/403: the runner's service account lacks a verb (see `deploy/rbac.yaml`).
    #[error("forbidden: {message}")]
    Forbidden {
        /// The server's message.
        message: String,
    },
    /// Any other status.
    #[error("API server answered {code}: {message}")]
    Status {
        /// The HTTP status.
        code: u16,
        /// The server's message.
        message: String,
    },
    /// No answer: connection refused, TLS, websocket upgrade, a dropped exec stream.
    #[error("transport: {message}")]
    Transport {
        /// What the client saw.
        message: String,
    },
}

impl KubeError {
    /// Whether the object does not exist (404).
    pub fn is_not_found(&self) -> bool {
        matches!(self, KubeError::NotFound { .. })
    }
}

/// `Result` of a [`KubeApi`] call.
pub(crate) type KubeResult<T> = std::result::Result<T, KubeError>;

/// The object kinds the driver creates (and the reaper lists and deletes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// `v1/Pod`.
    Pod,
    /// `v1/Secret`.
    Secret,
    /// `networking.k8s.io/v1/NetworkPolicy`.
    NetworkPolicy,
}

impl ObjectKind {
    /// Every kind, in the order the reaper walks them.
    pub const ALL: [ObjectKind; 3] = [
        ObjectKind::Pod,
        ObjectKind::Secret,
        ObjectKind::NetworkPolicy,
    ];

    /// `pod`, `secret`, `networkpolicy` (as `kubectl` spells them).
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Pod => "pod",
            ObjectKind::Secret => "secret",
            ObjectKind::NetworkPolicy => "networkpolicy",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One object to server-side apply.
#[derive(Clone, Debug)]
pub enum KubeObject {
    /// A Secret (file secrets, the CA). `Debug` of a Secret shows its bytes: never log this.
    Secret(Box<Secret>),
    /// The run's pod.
    Pod(Box<Pod>),
    /// The run's NetworkPolicy.
    NetworkPolicy(Box<NetworkPolicy>),
}

impl KubeObject {
    /// Its kind.
    pub fn kind(&self) -> ObjectKind {
        match self {
            KubeObject::Secret(_) => ObjectKind::Secret,
            KubeObject::Pod(_) => ObjectKind::Pod,
            KubeObject::NetworkPolicy(_) => ObjectKind::NetworkPolicy,
        }
    }

    /// Its name (empty when unnamed).
    pub fn name(&self) -> &str {
        let meta = match self {
            KubeObject::Secret(o) => &o.metadata,
            KubeObject::Pod(o) => &o.metadata,
            KubeObject::NetworkPolicy(o) => &o.metadata,
        };
        meta.name.as_deref().unwrap_or("")
    }
}

/// A byte sink for an exec's stdin.
pub(crate) type ExecWriter = Box<dyn AsyncWrite + Send + Unpin>;
/// A byte source for an exec's stdout or stderr.
pub(crate) type ExecReader = Box<dyn AsyncRead + Send + Unpin>;
/// Resolves to the exit code once the process has ended.
pub(crate) type ExitFuture = Pin<Box<dyn Future<Output = KubeResult<i64>> + Send>>;

/// A started exec: its streams and its exit code. Read stdout and stderr while writing stdin
/// (the transport's buffers are bounded).
pub struct ExecSession {
    /// The process's stdin, when asked for.
    pub stdin: Option<ExecWriter>,
    /// Its stdout.
    pub stdout: ExecReader,
    /// Its stderr.
    pub stderr: ExecReader,
    /// Its exit code, from the status channel.
    pub exit: ExitFuture,
}

impl fmt::Debug for ExecSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecSession")
            .field("stdin", &self.stdin.is_some())
            .finish_non_exhaustive()
    }
}

/// The API calls of the kubernetes driver and the cloud reaper, in one namespace.
#[async_trait]
pub trait KubeApi: Send + Sync {
    /// The namespace every call is scoped to.
    fn namespace(&self) -> &str;

    /// Server-side apply (field manager `FIELD_MANAGER`, force).
    async fn apply(&self, object: &KubeObject) -> KubeResult<()>;

    /// Deletes an object with background propagation and grace 0, without waiting. A missing
    /// object is [`KubeError::NotFound`]; callers that do not care ignore it.
    async fn delete(&self, kind: ObjectKind, name: &str) -> KubeResult<()>;

    /// Reads a pod.
    async fn get_pod(&self, name: &str) -> KubeResult<Pod>;

    /// Lists objects of `kind` matching `label_selector` (name as id, labels).
    async fn list(&self, kind: ObjectKind, label_selector: &str)
    -> KubeResult<Vec<ListedResource>>;

    /// Starts `argv` in `container` of `pod`, stdin attached when `stdin`.
    async fn exec(
        &self,
        pod: &str,
        container: &str,
        argv: Vec<String>,
        stdin: bool,
    ) -> KubeResult<ExecSession>;
}

/// [`KubeApi`] on a `kube::Client`.
#[derive(Clone)]
pub struct KubeRsApi {
    client: kube::Client,
    namespace: String,
}

impl fmt::Debug for KubeRsApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeRsApi")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

fn classify(error: kube::Error) -> KubeError {
    match error {
        kube::Error::Api(status) => {
            let message = if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            };
            match status.code {
                404 => KubeError::NotFound { message },
                401 | 403 => KubeError::Forbidden { message },
                code => KubeError::Status { code, message },
            }
        }
        other => KubeError::Transport {
            message: other.to_string(),
        },
    }
}

/// The exit code a finished exec's status carries: 0 on `Success`, the `ExitCode` cause of a
/// `NonZeroExitCode` failure; anything else is a transport error.
pub(crate) fn exit_code_of(status: Option<&Status>) -> KubeResult<i64> {
    let Some(status) = status else {
        return Err(KubeError::Transport {
            message: "the exec stream ended without a status".to_owned(),
        });
    };
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    let cause = status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|causes| {
            causes
                .iter()
                .find(|c| c.reason.as_deref() == Some("ExitCode"))
        })
        .and_then(|c| c.message.as_deref())
        .and_then(|m| m.trim().parse::<i64>().ok());
    let reason = status.reason.as_deref().unwrap_or("");
    match (reason, cause) {
        ("NonZeroExitCode", Some(code)) => Ok(code),
        _ => Err(KubeError::Transport {
            message: format!(
                "exec failed: {reason} {}",
                status.message.as_deref().unwrap_or("")
            ),
        }),
    }
}

impl KubeRsApi {
    /// Wraps a client scoped to `namespace`.
    pub fn new(client: kube::Client, namespace: impl Into<String>) -> KubeRsApi {
        KubeRsApi {
            client,
            namespace: namespace.into(),
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn list_of<K>(&self, selector: &str) -> KubeResult<Vec<ListedResource>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let api: Api<K> = self.api();
        let mut params = ListParams::default().labels(selector).limit(500);
        let mut listed = Vec::new();
        loop {
            let page = api.list_metadata(&params).await.map_err(classify)?;
            for item in &page.items {
                let name = item.metadata.name.clone().unwrap_or_default();
                listed.push(ListedResource {
                    id: name.clone(),
                    name,
                    labels: item.metadata.labels.clone().unwrap_or_default(),
                });
            }
            match page.metadata.continue_.as_deref().filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(token),
                None => return Ok(listed),
            }
        }
    }

    async fn delete_of<K>(&self, name: &str) -> KubeResult<()>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let api: Api<K> = self.api();
        let params = DeleteParams::background().grace_period(0);
        api.delete(name, &params).await.map(drop).map_err(classify)
    }
}

#[async_trait]
impl KubeApi for KubeRsApi {
    fn namespace(&self) -> &str {
        &self.namespace
    }

    async fn apply(&self, object: &KubeObject) -> KubeResult<()> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let name = object.name();
        match object {
            KubeObject::Secret(secret) => self
                .api::<Secret>()
                .patch(name, &params, &Patch::Apply(secret.as_ref()))
                .await
                .map(drop),
            KubeObject::Pod(pod) => self
                .api::<Pod>()
                .patch(name, &params, &Patch::Apply(pod.as_ref()))
                .await
                .map(drop),
            KubeObject::NetworkPolicy(policy) => self
                .api::<NetworkPolicy>()
                .patch(name, &params, &Patch::Apply(policy.as_ref()))
                .await
                .map(drop),
        }
        .map_err(classify)
    }

    async fn delete(&self, kind: ObjectKind, name: &str) -> KubeResult<()> {
        match kind {
            ObjectKind::Pod => self.delete_of::<Pod>(name).await,
            ObjectKind::Secret => self.delete_of::<Secret>(name).await,
            ObjectKind::NetworkPolicy => self.delete_of::<NetworkPolicy>(name).await,
        }
    }

    async fn get_pod(&self, name: &str) -> KubeResult<Pod> {
        self.api::<Pod>().get(name).await.map_err(classify)
    }

    async fn list(
        &self,
        kind: ObjectKind,
        label_selector: &str,
    ) -> KubeResult<Vec<ListedResource>> {
        match kind {
            ObjectKind::Pod => self.list_of::<Pod>(label_selector).await,
            ObjectKind::Secret => self.list_of::<Secret>(label_selector).await,
            ObjectKind::NetworkPolicy => self.list_of::<NetworkPolicy>(label_selector).await,
        }
    }

    async fn exec(
        &self,
        pod: &str,
        container: &str,
        argv: Vec<String>,
        stdin: bool,
    ) -> KubeResult<ExecSession> {
        let params = AttachParams::default()
            .container(container)
            .stdin(stdin)
            .stdout(true)
            .stderr(true);
        let mut attached = self
            .api::<Pod>()
            .exec(pod, argv, &params)
            .await
            .map_err(classify)?;
        let (Some(stdout), Some(stderr), Some(status)) =
            (attached.stdout(), attached.stderr(), attached.take_status())
        else {
            return Err(KubeError::Transport {
                message: "the exec stream offered no stdout, stderr or status".to_owned(),
            });
        };
        let stdin_writer = attached.stdin().map(|w| Box::new(w) as ExecWriter);
        let exit: ExitFuture = Box::pin(async move {
            let status = status.await;
            if let Err(error) = attached.join().await {
                tracing::debug!(%error, "kubernetes exec: message loop ended with an error");
            }
            exit_code_of(status.as_ref())
        });
        Ok(ExecSession {
            stdin: stdin_writer,
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
            exit,
        })
    }
}
