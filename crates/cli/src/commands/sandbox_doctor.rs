//! `iterion sandbox doctor [--strict] [--json] [--target auto|local|cloud] [--sandbox auto|none]
//! [--sandbox-host-state auto|none] [--sandbox-default-image REF] [FILE]` (SANDBOX.md §11).
//!
//! The report and the battery are the engine's ([`iterion_engine::build_basic_report`],
//! [`iterion_engine::build_strict_report`]); this file parses, renders and maps the exit code:
//! 1 when a strict check fails, 2 on bad input (an unreadable or non-compiling file, a bad flag
//! or `ITERION_SANDBOX_*` value), 0 otherwise. Warnings never change the exit code.
use std::fmt::Write as _;

use iterion_engine::{
    BasicReport, CheckStatus, PreflightRequest, StrictReport, Target, build_basic_report,
    build_strict_report, doctor_timeout_from_env,
};
use iterion_sandbox::Trust;

use crate::args::{DoctorArgs, SandboxArgs, SandboxCommand, TargetArg};
use crate::commands::run::{compile_workflow, launch_options};
use crate::commands::{Failure, product_setup};
use crate::exit::Exit;

/// Runs the command.
pub async fn run(args: SandboxArgs, env: &iterion_vocab::Environment) -> Exit {
    let SandboxCommand::Doctor(args) = args.command;
    match doctor(args, env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

async fn doctor(args: DoctorArgs, env: &iterion_vocab::Environment) -> Result<Exit, Failure> {
    let setup = product_setup(env)?;
    let timeout = doctor_timeout_from_env(env);
    if !args.strict {
        let report =
            build_basic_report(&setup, args.flags.sandbox_default_image.as_deref(), timeout).await;
        if args.json {
            crate::output::outln!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_else(|_| "{}".to_owned())
            );
        } else {
            crate::output::out!("{}", crate::terminal::terminal_safe(&render_basic(&report)));
        }
        return Ok(Exit::Success);
    }
    let (sandbox, needs) = match &args.file {
        Some(file) => {
            let workflow = compile_workflow(file)?.0;
            let needs = iterion_engine::ContainerNeeds::of(&workflow);
            (workflow.sandbox, needs)
        }
        None => (
            iterion_dsl::ir::Sandbox::default(),
            iterion_engine::ContainerNeeds::default(),
        ),
    };
    let options = launch_options(
        &args.flags,
        &[],
        std::env::current_dir().map_err(Failure::bad_input)?,
        env,
    )?;
    let report = build_strict_report(
        &setup,
        &PreflightRequest {
            sandbox: &sandbox,
            options: &options,
            trust: Trust::Trusted,
            target: match args.target {
                TargetArg::Auto => Target::Auto,
                TargetArg::Local => Target::Local,
                TargetArg::Cloud => Target::Cloud,
            },
            timeout,
            needs,
        },
    )
    .await
    .map_err(Failure::bad_input)?;
    if args.json {
        crate::output::outln!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_else(|_| "{}".to_owned())
        );
    } else {
        // Rows name what the repository asked for (images, paths): hostile text.
        crate::output::out!(
            "{}",
            crate::terminal::terminal_safe(&render_strict(&report))
        );
    }
    Ok(if report.has_failures() {
        Exit::Failed
    } else {
        Exit::Success
    })
}

/// The basic report as an aligned key/value list, then its notes.
pub fn render_basic(report: &BasicReport) -> String {
    let opt = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".to_owned());
    let caps = report.capabilities;
    let capabilities: Vec<&str> = [
        ("image", caps.supports_image),
        ("build", caps.supports_build),
        ("mounts", caps.supports_mounts),
        ("host_bind_mounts", caps.supports_host_bind_mounts),
        ("network_policy", caps.supports_network_policy),
        ("post_create", caps.supports_post_create),
        ("remote_user", caps.supports_remote_user),
        ("tls_inspection", caps.supports_tls_inspection),
        ("resource_limits", caps.supports_resource_limits),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(name, _)| *name)
    .collect();
    let mut rows: Vec<(&str, String)> = vec![
        ("host", report.host.clone()),
        ("os", report.os.clone()),
        ("arch", report.arch.clone()),
        ("container_runtime", report.container_runtime.clone()),
        ("engine_version", opt(&report.engine_version)),
        ("api_version", opt(&report.api_version)),
        ("sandbox_default", report.sandbox_default.clone()),
        (
            "sandbox_default_source",
            report.sandbox_default_source.clone(),
        ),
        ("selected_driver", report.selected_driver.clone()),
        ("available_drivers", report.available_drivers.join(", ")),
        (
            "capabilities",
            if capabilities.is_empty() {
                "none".to_owned()
            } else {
                capabilities.join(", ")
            },
        ),
    ];
    if let Some(policy) = &report.scheduling_policy {
        rows.push(("scheduling_policy", policy.clone()));
    }
    rows.extend([
        ("engine_binary", opt(&report.engine_binary)),
        ("engine_binary_link", report.engine_binary_link.clone()),
        ("default_image", report.default_image.clone()),
        (
            "default_image_present",
            match report.default_image_present {
                Some(true) => "yes".to_owned(),
                Some(false) => "no".to_owned(),
                None => "unknown (no engine answered)".to_owned(),
            },
        ),
    ]);
    if let Some(error) = &report.driver_error {
        rows.push(("driver_error", error.clone()));
    }
    if let Some(userns) = &report.user_namespaces {
        rows.push((
            "user_namespaces",
            if userns.usable {
                "usable (the namespace driver can run sandboxes with no engine)".to_owned()
            } else {
                format!("NOT usable — {}", userns.remedy.clone().unwrap_or_default())
            },
        ));
        rows.push(("userns_checks", userns.findings.join("; ")));
        rows.push(("namespace_limits", userns.resource_limits.clone()));
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in rows {
        let _ = writeln!(out, "{key:<width$}  {value}");
    }
    for note in &report.notes {
        let _ = writeln!(out, "\nnote: {note}");
    }
    out
}

/// The strict report as a table of `[pass]`/`[warn]`/`[FAIL]` rows, a `hint:` under each row that
/// did not pass, and a count line.
pub fn render_strict(report: &StrictReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sandbox doctor --strict: host {}, target {}, driver {}, mode {}",
        report.host,
        report.target.as_str(),
        report.driver,
        report.mode
    );
    if !report.source.is_empty() {
        let _ = writeln!(out, "  source: {}", report.source);
    }
    if let Some(image) = &report.image {
        let _ = writeln!(out, "  image:  {image}");
    }
    out.push('\n');
    let width = report
        .checks
        .iter()
        .map(|c| c.id.as_str().len())
        .max()
        .unwrap_or(0);
    for check in &report.checks {
        let tag = match check.status {
            CheckStatus::Pass => "[pass]",
            CheckStatus::Warn => "[warn]",
            CheckStatus::Fail => "[FAIL]",
        };
        let _ = writeln!(
            out,
            "{tag} {id:<width$}  {summary}",
            id = check.id.as_str(),
            summary = check.summary
        );
        if check.status != CheckStatus::Pass && !check.remediation.is_empty() {
            let _ = writeln!(out, "       {:<width$}  hint: {}", "", check.remediation);
        }
    }
    let counts = report.counts;
    let _ = writeln!(
        out,
        "\nchecks: {} pass, {} warn, {} fail",
        counts.pass, counts.warn, counts.fail
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iterion_engine::{Check, CheckId, Counts, HostClass, SCHEMA_VERSION};
    use pretty_assertions::assert_eq;

    #[test]
    fn the_strict_table_has_a_hint_under_each_row_that_did_not_pass_and_a_count_line() {
        let checks = vec![
            Check::pass(
                CheckId::SpecResolution,
                "mode auto, source cli flag --sandbox",
            ),
            Check::warn(
                CheckId::EngineBinary,
                "/x/iterion: dynamically linked",
                "use a static build",
            ),
            Check::fail(CheckId::DockerDaemon, "no engine answered", "start Docker"),
        ];
        let report = StrictReport {
            schema_version: SCHEMA_VERSION,
            host: "local".to_owned(),
            target: HostClass::Local,
            driver: "docker".to_owned(),
            mode: "auto".to_owned(),
            source: "cli flag --sandbox".to_owned(),
            image: Some("busybox:1".to_owned()),
            counts: Counts::of(&checks),
            checks,
        };
        assert_eq!(
            render_strict(&report),
            "sandbox doctor --strict: host local, target local, driver docker, mode auto\n\
             \x20 source: cli flag --sandbox\n\
             \x20 image:  busybox:1\n\
             \n\
             [pass] spec-resolution  mode auto, source cli flag --sandbox\n\
             [warn] engine-binary    /x/iterion: dynamically linked\n\
             \x20                       hint: use a static build\n\
             [FAIL] docker-daemon    no engine answered\n\
             \x20                       hint: start Docker\n\
             \n\
             checks: 1 pass, 1 warn, 1 fail\n"
        );
    }
}
