//! What the driver and its runs share: the engine API, the engine's kind, the settings and the
//! run log ([`Shared`]).

use std::sync::Arc;
use std::time::Duration;

use iterion_sandbox::{Error, LogLevel, RunLog};

use crate::api::{ApiError, ContainerApi, EngineKind};
use crate::settings::DockerSettings;

/// The bound of each remove call in cleanup (SANDBOX.md §4.8).
pub(crate) const REMOVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Shared by the driver and its runs.
pub(crate) struct Shared {
    pub(crate) api: Arc<dyn ContainerApi>,
    pub(crate) engine: EngineKind,
    pub(crate) settings: DockerSettings,
    pub(crate) log: Arc<dyn RunLog>,
    /// The warm pool, one per driver and shared by its run-log copies.
    pub(crate) pool: Arc<crate::warm::WarmPool>,
}

impl Shared {
    pub(crate) fn log(&self, level: LogLevel, line: &str) {
        self.log.line(level, line);
    }

    pub(crate) fn engine_error(
        &self,
        operation: impl Into<String>,
    ) -> impl FnOnce(ApiError) -> Error {
        let driver = self.engine.as_str().to_owned();
        let operation = operation.into();
        move |source| Error::Engine {
            driver,
            operation,
            source: Box::new(source),
        }
    }
}
