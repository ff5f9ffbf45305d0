//! The one choke point between a run and its record (issue 15 item 8): every byte a run writes
//! into the [`Store`] passes its [`Redactor`] here, whoever the writer is (event sink, run log,
//! admission, checkpoints, the final save, child records). Callers may redact earlier (the
//! executor does, to bound tails after redaction); this layer is the guarantee, not a
//! convenience.
//!
//! What is redacted: event payloads, run-log lines, node output, and on a run record the failure message, the
//! admission reason, the checkpoint and the variables. Identity fields (ids, workflow name and
//! hash, paths, status) are written as given: the store checks them against the stored row, and
//! none of them is produced by the run's own code.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iterion_store::{
    Claim, Event, Lease, Liveness, LogLine, LogStream, NewEvent, NewLogLine, NewNodeLog, NewRun,
    NodeLog, NodeLogQuery, Result, Run, RunId, RunQuery, Store,
};
use serde_json::{Map, Value};

use crate::records::secrets::Redactor;

/// A [`Store`] that redacts what it writes through its run's [`Redactor`], and passes reads and
/// lease calls through untouched.
pub(crate) struct RedactingStore {
    inner: Arc<dyn Store>,
    redactor: Arc<Redactor>,
}

impl std::fmt::Debug for RedactingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedactingStore")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl RedactingStore {
    /// `inner`, with everything written through it redacted by `redactor`.
    pub(crate) fn wrap(inner: Arc<dyn Store>, redactor: Arc<Redactor>) -> Arc<dyn Store> {
        Arc::new(RedactingStore { inner, redactor })
    }

    fn event(&self, mut event: NewEvent) -> NewEvent {
        event.data = self.redactor.redact_json(&event.data);
        event
    }

    fn line(&self, mut line: NewLogLine) -> NewLogLine {
        line.line = self.redactor.redact(&line.line);
        line
    }

    fn vars(&self, vars: &Map<String, Value>) -> Map<String, Value> {
        match self.redactor.redact_json(&Value::Object(vars.clone())) {
            Value::Object(map) => map,
            _ => vars.clone(),
        }
    }

    fn run(&self, run: &Run) -> Run {
        let mut run = run.clone();
        let r = &self.redactor;
        run.failure_message = run.failure_message.as_deref().map(|m| r.redact(m));
        run.checkpoint = run.checkpoint.as_ref().map(|c| r.redact_json(c));
        if let Some(admission) = &mut run.admission {
            admission.reason = r.redact(&admission.reason);
        }
        run.vars = self.vars(&run.vars);
        run
    }
}

#[async_trait]
impl Store for RedactingStore {
    fn store_id(&self) -> &str {
        self.inner.store_id()
    }

    async fn create_run(&self, mut new: NewRun) -> Result<Run> {
        new.vars = self.vars(&new.vars);
        self.inner.create_run(new).await
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<Run>> {
        self.inner.get_run(id).await
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<Run>> {
        self.inner.list_runs(query).await
    }

    async fn runs_by_id_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<Run>> {
        self.inner.runs_by_id_prefix(prefix, limit).await
    }

    async fn runs_finished_before(
        &self,
        before: iterion_store::Timestamp,
        limit: usize,
    ) -> Result<Vec<Run>> {
        self.inner.runs_finished_before(before, limit).await
    }

    async fn delete_run(&self, id: &RunId) -> Result<Vec<RunId>> {
        self.inner.delete_run(id).await
    }

    async fn save_run(&self, run: &Run, expected_version: u64) -> Result<u64> {
        self.inner.save_run(&self.run(run), expected_version).await
    }

    async fn claim_next_queued(&self, holder: &str, ttl: Duration) -> Result<Option<Claim>> {
        self.inner.claim_next_queued(holder, ttl).await
    }

    async fn append_event(&self, run_id: &RunId, event: NewEvent) -> Result<Event> {
        self.inner.append_event(run_id, self.event(event)).await
    }

    async fn append_events(&self, run_id: &RunId, events: Vec<NewEvent>) -> Result<Range<u64>> {
        let events = events.into_iter().map(|e| self.event(e)).collect();
        self.inner.append_events(run_id, events).await
    }

    async fn events(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        self.inner.events(run_id, after_seq).await
    }

    async fn append_log(&self, run_id: &RunId, stream: LogStream, line: String) -> Result<LogLine> {
        let line = self.redactor.redact(&line);
        self.inner.append_log(run_id, stream, line).await
    }

    async fn append_logs(&self, run_id: &RunId, lines: Vec<NewLogLine>) -> Result<Range<u64>> {
        let lines = lines.into_iter().map(|l| self.line(l)).collect();
        self.inner.append_logs(run_id, lines).await
    }

    async fn logs(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<LogLine>> {
        self.inner.logs(run_id, after_seq).await
    }

    async fn append_node_logs(
        &self,
        run_id: &RunId,
        chunks: Vec<NewNodeLog>,
    ) -> Result<Range<u64>> {
        let chunks = chunks
            .into_iter()
            .map(|mut c| {
                c.text = self.redactor.redact(&c.text);
                c
            })
            .collect();
        self.inner.append_node_logs(run_id, chunks).await
    }

    async fn node_logs(&self, run_id: &RunId, query: &NodeLogQuery) -> Result<Vec<NodeLog>> {
        self.inner.node_logs(run_id, query).await
    }

    async fn acquire_lease(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        self.inner.acquire_lease(run_id, holder, ttl).await
    }

    async fn heartbeat(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        self.inner.heartbeat(run_id, holder, ttl).await
    }

    async fn release_lease(&self, run_id: &RunId, holder: &str) -> Result<bool> {
        self.inner.release_lease(run_id, holder).await
    }

    async fn lease_held(&self, run_id: &RunId) -> Result<bool> {
        self.inner.lease_held(run_id).await
    }

    async fn liveness(&self, run_id: &RunId) -> Result<Liveness> {
        self.inner.liveness(run_id).await
    }
}

#[cfg(test)]
#[path = "redacting_store_tests.rs"]
mod tests;
