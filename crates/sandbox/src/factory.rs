//! The host-kind factory (SANDBOX.md §3.3, §3.6, §2.5): which driver a run gets.
//!
//! The factory walks the host's [`preference_order`] through a [`Registry`] of
//! [`DriverConstructor`]s, the seam where engines are probed: tests register fakes, the product
//! registers the docker/podman and kubernetes constructors of the driver crates (the engine
//! builds that registry; this crate names no concrete driver but noop). It reports capability and never
//! policy (invariant I1): an active spec that would land on noop gets
//! [`Error::DriverUnavailable`], for auto and inline alike; the engine decides what that means.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::driver::{Driver, DriverConstructor, RunLog};
use crate::error::{DriverAttempt, Error, Result};
use crate::host::{DriverKind, HostKind, HostSignals, detect_host, preference_order};
use crate::noop::NoopConstructor;
use crate::precedence::{
    ModeInputs, NotSandboxedCause, SandboxVerdict, Sandboxing, SpecResolution,
    verdict_before_driver,
};
use crate::spec::Spec;

/// The constructors a factory may use, by driver kind. Kinds not registered are skipped.
#[derive(Clone, Default)]
pub struct Registry {
    constructors: BTreeMap<DriverKind, Arc<dyn DriverConstructor>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("kinds", &self.kinds())
            .finish()
    }
}

impl Registry {
    /// A registry with no driver at all: the factory then finds none.
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// A registry with only the noop driver (what a host without any engine client offers).
    pub fn with_noop() -> Registry {
        Registry::empty().register(DriverKind::Noop, NoopConstructor)
    }

    /// Registers (or replaces) the constructor of `kind`.
    #[must_use]
    pub fn register(
        mut self,
        kind: DriverKind,
        constructor: impl DriverConstructor + 'static,
    ) -> Registry {
        self.constructors.insert(kind, Arc::new(constructor));
        self
    }

    /// Whether `kind` has a constructor.
    pub fn is_registered(&self, kind: DriverKind) -> bool {
        self.constructors.contains_key(&kind)
    }

    /// The registered kinds, sorted.
    pub fn kinds(&self) -> Vec<DriverKind> {
        self.constructors.keys().copied().collect()
    }
}

/// Factory options (SANDBOX.md §3.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FactoryOptions {
    /// The host kind; `None` (the default) detects it from the [`HostSignals`].
    pub host: Option<HostKind>,
    /// A driver that must construct (an embedder and test seam; no CLI flag sets it). Default:
    /// none, walk the preference order. Pinning noop makes active specs run unsandboxed, loudly.
    pub preferred_driver: Option<DriverKind>,
}

#[derive(Clone)]
struct Selection {
    winner: Option<(DriverKind, Arc<dyn Driver>)>,
    tried: Vec<DriverAttempt>,
}

/// Picks the driver for a host (SANDBOX.md §3.3). The first selection, success or failure, is
/// kept for the factory's lifetime.
pub struct Factory {
    registry: Registry,
    host: HostKind,
    preferred: Option<DriverKind>,
    selection: OnceCell<Selection>,
}

impl std::fmt::Debug for Factory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Factory")
            .field("registry", &self.registry)
            .field("host", &self.host)
            .field("preferred", &self.preferred)
            .finish_non_exhaustive()
    }
}

impl Factory {
    /// A factory over `registry`; the host kind is `options.host`, else [`detect_host`] of
    /// `signals`.
    pub fn new(registry: Registry, options: FactoryOptions, signals: &HostSignals) -> Factory {
        Factory {
            registry,
            host: options.host.unwrap_or_else(|| detect_host(signals)),
            preferred: options.preferred_driver,
            selection: OnceCell::new(),
        }
    }

    /// The host kind in force.
    pub fn host(&self) -> HostKind {
        self.host
    }

    /// The pinned driver, if any.
    pub fn preferred_driver(&self) -> Option<DriverKind> {
        self.preferred
    }

    /// The selected driver, memoised: the pinned driver when one is set (it must construct),
    /// else the first constructor in preference order that succeeds (noop last, when
    /// registered).
    ///
    /// # Errors
    ///
    /// [`Error::DriverUnavailable`] listing each driver tried and its reason.
    pub async fn driver(&self) -> Result<Arc<dyn Driver>> {
        let selection = self.selection().await;
        match &selection.winner {
            Some((_, driver)) => Ok(Arc::clone(driver)),
            None => Err(Error::DriverUnavailable {
                tried: selection.tried.clone(),
            }),
        }
    }

    /// The driver for `spec` (SANDBOX.md §3.3). An absent or inactive spec gets whatever
    /// [`Factory::driver`] gives. An active spec whose selection is noop gets
    /// [`Error::DriverUnavailable`] (unless noop is pinned) — the same answer for auto and inline,
    /// and the one the doctor and the pre-flight read.
    ///
    /// # Errors
    ///
    /// [`Error::DriverUnavailable`].
    pub async fn driver_for_spec(&self, spec: Option<&Spec>) -> Result<Arc<dyn Driver>> {
        let selection = self.selection().await;
        let active = spec.is_some_and(|spec| spec.mode.is_active());
        match &selection.winner {
            Some((DriverKind::Noop, _)) if active && self.preferred != Some(DriverKind::Noop) => {
                Err(Error::DriverUnavailable {
                    tried: selection.tried.clone(),
                })
            }
            // The namespace driver runs the host's root, not an image (issue 18): a spec that
            // names one (or a build) gets the answer it would get with no engine at all, so an
            // auto run degrades and an inline one refuses exactly as before the driver existed.
            Some((DriverKind::Namespace, _))
                if active && spec.is_some_and(|spec| !spec.runs_without_image()) =>
            {
                let mut tried = selection.tried.clone();
                tried.push(DriverAttempt {
                    driver: DriverKind::Namespace.as_str().to_owned(),
                    reason: namespace_refusal(spec),
                });
                Err(Error::DriverUnavailable { tried })
            }
            Some((_, driver)) => Ok(Arc::clone(driver)),
            None => Err(Error::DriverUnavailable {
                tried: selection.tried.clone(),
            }),
        }
    }

    /// Probes every registered driver of this host's order (not memoised), for the doctor's
    /// `available_drivers`. Returns the kinds that constructed, sorted.
    pub async fn probe_available(&self) -> Vec<DriverKind> {
        let mut available = Vec::new();
        for &kind in preference_order(self.host) {
            if let Some(constructor) = self.registry.constructors.get(&kind)
                && constructor.construct().await.is_ok()
            {
                available.push(kind);
            }
        }
        available.sort();
        available
    }

    async fn selection(&self) -> &Selection {
        self.selection.get_or_init(|| self.select()).await
    }

    async fn select(&self) -> Selection {
        let mut tried = Vec::new();
        let order: Vec<DriverKind> = match self.preferred {
            Some(kind) => vec![kind],
            None => preference_order(self.host).to_vec(),
        };
        for kind in order {
            let Some(constructor) = self.registry.constructors.get(&kind) else {
                if self.preferred.is_some() {
                    tried.push(DriverAttempt {
                        driver: kind.as_str().to_owned(),
                        reason: "not registered".to_owned(),
                    });
                }
                continue;
            };
            match constructor.construct().await {
                Ok(driver) => {
                    return Selection {
                        winner: Some((kind, driver)),
                        tried,
                    };
                }
                Err(error) => tried.push(DriverAttempt {
                    driver: kind.as_str().to_owned(),
                    reason: match error {
                        Error::Unavailable { reason, .. } => reason,
                        other => other.to_string(),
                    },
                }),
            }
        }
        Selection {
            winner: None,
            tried,
        }
    }
}

/// Why the namespace driver cannot take `spec`: the image or the build it names.
fn namespace_refusal(spec: Option<&Spec>) -> String {
    match spec.and_then(Spec::image_ref) {
        Some(image) if spec.is_some_and(|s| s.build.is_none()) => format!(
            "runs the host's root, not an image (the workflow names {})",
            crate::text::escape_controls(image)
        ),
        _ => "runs the host's root and cannot build an image (the workflow has build:)".to_owned(),
    }
}

/// Selects the driver for a run (SANDBOX.md §3.6): [`Factory::driver_for_spec`], then the driver
/// bound to the run log ([`Driver::with_run_log`]) so its operations land in `run_logs`.
///
/// # Errors
///
/// The factory's error under [`Error::SelectDriver`] (`sandbox: select driver: …`), keeping its
/// code.
pub async fn select_sandbox_driver(
    spec: Option<&Spec>,
    run_log: Arc<dyn RunLog>,
    factory: &Factory,
) -> Result<Arc<dyn Driver>> {
    let driver = factory
        .driver_for_spec(spec)
        .await
        .map_err(|error| Error::SelectDriver(Box::new(error)))?;
    Ok(driver.with_run_log(run_log).unwrap_or(driver))
}

/// "Will this run be sandboxed?" (SANDBOX.md §2.5): the mode as [`pick_mode`](crate::pick_mode)
/// resolves it, the spec as auto resolution gave it (the caller ran the devcontainer and default
/// image steps), then [`Factory::driver_for_spec`]. Yes only when a driver other than noop comes
/// back.
pub async fn run_will_be_sandboxed(
    inputs: &ModeInputs<'_>,
    resolution: SpecResolution<'_>,
    factory: &Factory,
) -> SandboxVerdict {
    let (mode, source, spec) = match verdict_before_driver(inputs, resolution) {
        Ok(ask) => ask,
        Err(verdict) => return verdict,
    };
    let sandboxed = factory
        .driver_for_spec(Some(spec))
        .await
        .is_ok_and(|driver| driver.name() != DriverKind::Noop.as_str());
    SandboxVerdict {
        answer: if sandboxed {
            Sandboxing::Sandboxed
        } else {
            Sandboxing::NotSandboxed(NotSandboxedCause::NoContainerRuntime)
        },
        mode,
        source,
    }
}

#[cfg(test)]
#[path = "factory_tests.rs"]
mod tests;
