//! A recording [`ContainerApi`] for the driver's unit tests (STYLE.md §5.4): every call is
//! recorded as a typed [`Call`], and answered by the next scripted [`Reply`]. A call with no
//! reply scripted, or whose next reply is for another call, gets [`ApiError::Unscripted`] — an
//! error, never a panic — so a missing or extra call fails the test through the driver's own
//! error path.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use async_trait::async_trait;
use bollard::models::ContainerCreateBody;
use bytes::Bytes;
use futures_util::StreamExt;
use iterion_sandbox::{ImageConfig, ListedResource, PullProgress};
use tokio::io::AsyncWrite;

use crate::api::{
    ApiError, ApiResult, ApiStream, BuildRequest, ContainerApi, ExecAttachment, ExecChunk,
    ExecRequest, ExecState,
};

/// One call the driver made.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Call {
    InspectImage(String),
    PullImage(String),
    /// The request and the names in the context tar, sorted.
    BuildImage(BuildRequest, Vec<String>),
    RemoveImage(String),
    ListImages(Vec<String>),
    CreateVolume(String, BTreeMap<String, String>),
    ListVolumes(Vec<String>),
    RemoveVolume(String),
    CreateContainer(String, Box<ContainerCreateBody>),
    StartContainer(String),
    RemoveContainer(String),
    PauseContainer(String),
    ListContainers(Vec<String>),
    ListRunningContainers(Vec<String>),
    CreateExec(String, ExecRequest),
    StartExec(String),
    InspectExec(String),
}

/// The answer to the next call.
#[derive(Debug)]
pub(crate) enum Reply {
    InspectImage(ApiResult<Option<ImageConfig>>),
    Pull(Vec<ApiResult<PullProgress>>),
    /// A pull whose stream never ends (an unreachable registry).
    PullHangs,
    Build(Vec<ApiResult<String>>),
    RemoveImage(ApiResult<()>),
    ListImages(ApiResult<Vec<ListedResource>>),
    CreateVolume(ApiResult<()>),
    ListVolumes(ApiResult<Vec<ListedResource>>),
    RemoveVolume(ApiResult<()>),
    CreateContainer(ApiResult<String>),
    StartContainer(ApiResult<()>),
    RemoveContainer(ApiResult<()>),
    ListContainers(ApiResult<Vec<ListedResource>>),
    ListRunningContainers(ApiResult<Vec<ListedResource>>),
    CreateExec(ApiResult<String>),
    /// The exec's output chunks; its stdin is captured.
    StartExec(ApiResult<Vec<ExecChunk>>),
    /// An exec whose output never ends.
    StartExecHangs,
    InspectExec(ApiResult<ExecState>),
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    calls: Vec<Call>,
    stdin: Vec<u8>,
    stdin_closed: bool,
}

#[derive(Clone, Default)]
pub(crate) struct FakeContainerApi {
    state: Arc<Mutex<State>>,
}

impl FakeContainerApi {
    pub(crate) fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        let fake = FakeContainerApi::default();
        fake.state().replies.extend(replies);
        fake
    }

    fn state(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// What the driver wrote to exec stdins, and whether it closed the last one.
    pub(crate) fn stdin(&self) -> (Vec<u8>, bool) {
        let state = self.state();
        (state.stdin.clone(), state.stdin_closed)
    }

    /// Replies not consumed.
    pub(crate) fn unused(&self) -> usize {
        self.state().replies.len()
    }

    fn next(&self, call: Call) -> (String, Option<Reply>) {
        let mut state = self.state();
        let name = format!("{call:?}");
        state.calls.push(call);
        (name, state.replies.pop_front())
    }
}

fn unscripted(call: String, reply: Option<Reply>) -> ApiError {
    ApiError::Unscripted {
        call: match reply {
            None => call,
            Some(reply) => format!("{call} (the next reply is {reply:?})"),
        },
    }
}

fn stream_of<T: Send + 'static>(items: Vec<ApiResult<T>>) -> ApiStream<T> {
    futures_util::stream::iter(items).boxed()
}

struct CapturedStdin(Arc<Mutex<State>>);

impl CapturedStdin {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        match self.0.lock() {
            Ok(mut guard) => f(&mut guard),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

impl AsyncWrite for CapturedStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.with(|state| state.stdin.extend_from_slice(buf));
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.with(|state| state.stdin_closed = true);
        Poll::Ready(Ok(()))
    }
}

#[async_trait]
impl ContainerApi for FakeContainerApi {
    async fn inspect_image(&self, image: &str) -> ApiResult<Option<ImageConfig>> {
        match self.next(Call::InspectImage(image.to_owned())) {
            (_, Some(Reply::InspectImage(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    fn pull_image(&self, image: &str) -> ApiStream<PullProgress> {
        match self.next(Call::PullImage(image.to_owned())) {
            (_, Some(Reply::Pull(items))) => stream_of(items),
            (_, Some(Reply::PullHangs)) => futures_util::stream::pending().boxed(),
            (call, other) => stream_of(vec![Err(unscripted(call, other))]),
        }
    }

    fn build_image(&self, request: BuildRequest, context: Bytes) -> ApiStream<String> {
        let mut names: Vec<String> = tar::Archive::new(context.as_ref())
            .entries()
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok())
                    .filter_map(|entry| entry.path().ok().map(|p| p.display().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        match self.next(Call::BuildImage(request, names)) {
            (_, Some(Reply::Build(items))) => stream_of(items),
            (call, other) => stream_of(vec![Err(unscripted(call, other))]),
        }
    }

    async fn remove_image(&self, image: &str) -> ApiResult<()> {
        match self.next(Call::RemoveImage(image.to_owned())) {
            (_, Some(Reply::RemoveImage(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn list_images(&self, filters: Vec<String>) -> ApiResult<Vec<ListedResource>> {
        match self.next(Call::ListImages(filters)) {
            (_, Some(Reply::ListImages(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn create_volume(&self, name: &str, labels: BTreeMap<String, String>) -> ApiResult<()> {
        match self.next(Call::CreateVolume(name.to_owned(), labels)) {
            (_, Some(Reply::CreateVolume(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn list_volumes(&self, filters: Vec<String>) -> ApiResult<Vec<ListedResource>> {
        match self.next(Call::ListVolumes(filters)) {
            (_, Some(Reply::ListVolumes(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn remove_volume(&self, name: &str) -> ApiResult<()> {
        match self.next(Call::RemoveVolume(name.to_owned())) {
            (_, Some(Reply::RemoveVolume(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn create_container(&self, name: &str, body: ContainerCreateBody) -> ApiResult<String> {
        match self.next(Call::CreateContainer(name.to_owned(), Box::new(body))) {
            (_, Some(Reply::CreateContainer(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn start_container(&self, id: &str) -> ApiResult<()> {
        match self.next(Call::StartContainer(id.to_owned())) {
            (_, Some(Reply::StartContainer(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn remove_container(&self, id: &str) -> ApiResult<()> {
        match self.next(Call::RemoveContainer(id.to_owned())) {
            (_, Some(Reply::RemoveContainer(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    /// Recorded, never scripted: the fake cannot freeze, so a caller takes its fallback.
    async fn pause_container(&self, id: &str) -> ApiResult<()> {
        self.state().calls.push(Call::PauseContainer(id.to_owned()));
        Err(ApiError::Unscripted {
            call: format!("PauseContainer({id:?})"),
        })
    }

    async fn list_containers(&self, filters: Vec<String>) -> ApiResult<Vec<ListedResource>> {
        match self.next(Call::ListContainers(filters)) {
            (_, Some(Reply::ListContainers(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn list_running_containers(
        &self,
        filters: Vec<String>,
    ) -> ApiResult<Vec<ListedResource>> {
        match self.next(Call::ListRunningContainers(filters)) {
            (_, Some(Reply::ListRunningContainers(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn create_exec(&self, container: &str, request: ExecRequest) -> ApiResult<String> {
        match self.next(Call::CreateExec(container.to_owned(), request)) {
            (_, Some(Reply::CreateExec(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn start_exec(&self, exec_id: &str) -> ApiResult<ExecAttachment> {
        let input = Box::pin(CapturedStdin(Arc::clone(&self.state)));
        match self.next(Call::StartExec(exec_id.to_owned())) {
            (_, Some(Reply::StartExec(reply))) => reply.map(|chunks| ExecAttachment {
                output: stream_of(chunks.into_iter().map(Ok).collect()),
                input,
            }),
            (_, Some(Reply::StartExecHangs)) => Ok(ExecAttachment {
                output: futures_util::stream::pending().boxed(),
                input,
            }),
            (call, other) => Err(unscripted(call, other)),
        }
    }

    async fn inspect_exec(&self, exec_id: &str) -> ApiResult<ExecState> {
        match self.next(Call::InspectExec(exec_id.to_owned())) {
            (_, Some(Reply::InspectExec(reply))) => reply,
            (call, other) => Err(unscripted(call, other)),
        }
    }
}
