//! The basic report (SANDBOX.md §11.2): what this host offers a sandbox, probed within the
//! doctor's budget.

use std::time::Duration;

use iterion_sandbox::{
    Capabilities, Factory, HostKind, HostSignals, ITERION_SANDBOX_DEFAULT, LinkKind, Mode,
    SandboxFlag, Spec, default_image_from_env, link_kind_of,
};
use iterion_sandbox_docker::{EndpointVars, EngineProbe, probe_endpoints};
use iterion_sandbox_kubernetes::SchedulingPolicy;

use super::report::BasicReport;
use crate::launcher::setup::PreflightSetup;

async fn bounded<T>(budget: Duration, future: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(budget, future).await.ok()
}

pub(crate) async fn run(
    setup: &PreflightSetup,
    default_image_flag: Option<&str>,
    budget: Duration,
) -> BasicReport {
    let factory = Factory::new(
        setup.registry(),
        setup.factory_options,
        &HostSignals::from_env(&setup.environment),
    );
    // The selection, the probe of every driver and the engine's own answer, side by side: a
    // hung engine costs one budget, not three.
    let endpoints = probe_endpoints(&EndpointVars::from_env(&setup.environment));
    let (selection, available, probe) = tokio::join!(
        bounded(budget, factory.driver()),
        bounded(budget, factory.probe_available()),
        bounded(budget, EngineProbe::connect(&endpoints, budget)),
    );
    let available = available.unwrap_or_default();
    let probe = probe.and_then(Result::ok);
    let selected = selection.as_ref().and_then(|s| s.as_ref().ok()).cloned();
    // Why an active spec gets no container driver (the factory's tried list), when it gets none:
    // the selection is memoised, so this asks nothing again.
    let driver_error = match selection {
        None => Some(format!(
            "driver selection did not finish within {}",
            iterion_sandbox::format_duration(budget)
        )),
        Some(_) => factory
            .driver_for_spec(Some(&Spec {
                mode: Mode::Auto,
                ..Spec::default()
            }))
            .await
            .err()
            .map(|error| error.obstacle()),
    };
    let default_image = default_image_from_env(&setup.environment, default_image_flag);
    let default_image_present = match &probe {
        Some(probe) => bounded(budget, probe.inspect_image(&default_image.image))
            .await
            .and_then(Result::ok)
            .map(|config| config.is_some()),
        None => None,
    };
    let engine_binary = crate::sandbox::engine_binary::engine_binary_for_run(
        setup.engine_binary.as_deref(),
        &setup.environment,
    );
    let link = match engine_binary.clone() {
        Some(path) => bounded(
            budget,
            tokio::task::spawn_blocking(move || link_kind_of(&path)),
        )
        .await
        .and_then(Result::ok)
        .unwrap_or(LinkKind::Unknown),
        None => LinkKind::Unknown,
    };
    let scheduling_policy = match selected.as_ref().and_then(|d| d.scheduling_policy()) {
        Some(Ok(policy)) => Some(policy),
        Some(Err(error)) => Some(format!("INVALID: {error}")),
        None if factory.host() == HostKind::Cloud => {
            Some(match SchedulingPolicy::from_env(&setup.environment) {
                Ok(policy) => policy.summary(),
                Err(error) => format!("INVALID: {error}"),
            })
        }
        None => None,
    };
    let user_namespaces = if factory.host() == HostKind::Cloud {
        None
    } else {
        bounded(
            budget,
            tokio::task::spawn_blocking(|| {
                iterion_sandbox_namespace::judge_userns(
                    &iterion_sandbox_namespace::read_userns_facts(),
                )
            }),
        )
        .await
        .and_then(Result::ok)
    };
    let selected_name = selected.as_ref().map_or("<none>", |d| d.name()).to_owned();
    let container_driver = !matches!(selected_name.as_str(), "noop" | "<none>");
    let mut notes = Vec::new();
    if link == LinkKind::Dynamic {
        notes.push(
            "the engine binary is dynamically linked: it works only in images with a compatible libc (point ITERION_BIN at a static build: scripts/build-static.sh)"
                .to_owned(),
        );
    }
    if !container_driver {
        notes.push(format!(
            "only noop is available: sandbox: auto will degrade (the run goes on, visibly unsandboxed) and inline will be refused (SANDBOX_DRIVER_UNAVAILABLE); {}",
            if factory.host() == HostKind::Cloud {
                "check the in-cluster config and the service account's RBAC".to_owned()
            } else {
                match user_namespaces.as_ref().and_then(|u| u.remedy.clone()) {
                    Some(remedy) => format!(
                        "install or start Docker or Podman, or allow user namespaces for the embedded namespace driver: {remedy}"
                    ),
                    None => "install or start Docker or Podman".to_owned(),
                }
            }
        ));
    }
    let default_source = match setup.environment.get(ITERION_SANDBOX_DEFAULT) {
        Some(value) if !value.trim().is_empty() => ITERION_SANDBOX_DEFAULT,
        _ => "built-in sandbox-by-default",
    };
    BasicReport {
        host: factory.host().as_str().to_owned(),
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        container_runtime: probe
            .as_ref()
            .map_or("<none>", |p| p.version().kind.as_str())
            .to_owned(),
        engine_version: probe.as_ref().map(|p| p.version().version.clone()),
        api_version: probe.as_ref().map(|p| p.version().api_version.clone()),
        sandbox_default: setup
            .sandbox_default
            .map_or("unset", SandboxFlag::as_str)
            .to_owned(),
        sandbox_default_source: default_source.to_owned(),
        selected_driver: selected_name,
        available_drivers: {
            let mut names: Vec<String> = available.iter().map(|k| k.as_str().to_owned()).collect();
            names.sort();
            names
        },
        capabilities: selected
            .as_ref()
            .map_or(Capabilities::NONE, |d| d.capabilities()),
        scheduling_policy,
        engine_binary: engine_binary.map(|p| p.display().to_string()),
        engine_binary_link: link.as_str().to_owned(),
        default_image: default_image.image,
        default_image_present,
        driver_error: (!container_driver).then_some(driver_error).flatten(),
        user_namespaces,
        notes,
    }
}
