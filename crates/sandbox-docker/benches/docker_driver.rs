//! The docker/podman driver against the engine's own CLI, side by side in one run
//! (ARCHITECTURE.md §6): ratios, not absolute times, are what this measures.
//!
//! - `start`: `Driver::start` (screening, create, start; the container is `sleep infinity`
//!   with the workspace bound) vs `docker run -d IMAGE sleep infinity`. Goal ≤ 1.0×.
//! - `exec`: `SandboxRun::exec(["true"])` vs `docker exec CONTAINER true`, into the same
//!   container. Goal ≤ 0.6×.
//!
//! - `lifecycle`: a one-command sandbox from nothing to gone — `start`, `exec(["true"])`,
//!   `cleanup` — cold, and warm (`ITERION_SANDBOX_WARM=1`: `start` claims a pre-started entry;
//!   the refill between rounds is not timed), vs `docker run --rm IMAGE true`. Goal warm ≤ 0.3×.
//!
//! The two sides alternate (ABAB, then BABA, …) so drift on a shared machine hits both. Teardown
//! (`cleanup`, `docker rm -f`) is not timed. Prints a Markdown table for BENCHMARKS.md.
//!
//! ```text
//! cargo bench -p iterion-sandbox-docker --bench docker_driver -- [--runs 30] [--engine docker|podman] [--image REF]
//! ```
//!
//! With `--engine podman` both sides go through podman's API service (`podman --remote`), and
//! the CLI side gets the ulimits the driver sets on podman.
//!
//! Not part of the test suite: it needs an engine and the `iterion-test/busybox:1` image
//! (scripts/test.sh builds both), and makes no assertion.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::error::Error;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use iterion_sandbox::{Driver, DriverKind, ExecOpts, Mode, NoProgress, RunInfo, SandboxRun, Spec};
use iterion_sandbox_docker::{BollardApi, ContainerApi, DockerDriver, DockerSettings, ExecRequest};
use tokio::process::Command;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

struct Options {
    runs: usize,
    engine: DriverKind,
    image: String,
}

fn options() -> Result<Options> {
    let mut options = Options {
        runs: 30,
        engine: DriverKind::Docker,
        image: "iterion-test/busybox:1".to_owned(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => options.runs = args.next().ok_or("--runs needs a value")?.parse()?,
            "--engine" => {
                options.engine = match args.next().as_deref() {
                    Some("docker") => DriverKind::Docker,
                    Some("podman") => DriverKind::Podman,
                    other => return Err(format!("--engine docker|podman, not {other:?}").into()),
                }
            }
            "--image" => options.image = args.next().ok_or("--image needs a value")?,
            // cargo bench passes --bench; ignore anything else libtest-ish.
            _ => {}
        }
    }
    Ok(options)
}

fn endpoint(engine: DriverKind) -> String {
    match engine {
        DriverKind::Podman => std::env::var("CONTAINER_HOST")
            .unwrap_or_else(|_| "unix:///run/podman/podman.sock".to_owned()),
        _ => std::env::var("DOCKER_HOST")
            .unwrap_or_else(|_| "unix:///var/run/docker.sock".to_owned()),
    }
}

/// Runs the engine's CLI and returns its trimmed stdout; an exit other than 0 is an error.
/// podman's CLI is pointed at the same API service the driver uses (`--remote`), so both sides
/// go through the same REST hop, as docker's do.
async fn cli(program: &str, args: &[&str]) -> Result<String> {
    let remote = if program == "podman" {
        vec![
            "--remote".to_owned(),
            "--url".to_owned(),
            endpoint(DriverKind::Podman),
        ]
    } else {
        vec![]
    };
    let output = Command::new(program)
        .args(remote)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await?;
    if !output.status.success() {
        return Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn push(&mut self, sample: Duration) {
        self.0.push(sample);
    }

    /// Nearest-rank percentile.
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

fn ratio(ours: Duration, theirs: Duration) -> String {
    format!("{:.2}×", ours.as_secs_f64() / theirs.as_secs_f64())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let options = options()?;
    let program = options.engine.as_str();
    let settings = DockerSettings::default()
        .persist_nix(false)
        .extra_label("iterion.io/bench", "docker_driver");
    let driver =
        DockerDriver::connect(options.engine, &[endpoint(options.engine)], settings).await?;
    let workspace = tempfile::tempdir()?;
    let run_dirs = tempfile::tempdir()?;
    let spec = Spec {
        mode: Mode::Inline,
        image: Some(options.image.clone()),
        ..Spec::default()
    };
    let prepared = driver.prepare(&spec, &NoProgress).await?;
    let version = cli(program, &["version", "--format", "{{.Server.Version}}"]).await?;
    eprintln!(
        "benchmarking {} {version} ({} runs each, interleaved, image {})",
        driver.name(),
        options.runs,
        options.image
    );

    let run_info = |n: usize| {
        let run_id = format!("bench-{}-{n}", std::process::id());
        RunInfo::new(
            run_id.clone(),
            "bench",
            workspace.path(),
            run_dirs.path().join(run_id),
        )
    };

    // start: driver vs `docker run -d IMAGE sleep infinity`.
    let warmup = 3;
    let (mut ours, mut theirs) = (Samples::default(), Samples::default());
    for n in 0..options.runs + warmup {
        let record = n >= warmup;
        for side in if n % 2 == 0 { [0, 1] } else { [1, 0] } {
            if side == 0 {
                let started = Instant::now();
                let run = driver.start(prepared.clone(), run_info(n)).await?;
                let took = started.elapsed();
                run.cleanup().await?;
                if record {
                    ours.push(took);
                }
            } else {
                let started = Instant::now();
                let mut args = vec!["run", "-d", "--label", "iterion.io/bench=docker_driver"];
                if options.engine == DriverKind::Podman {
                    // The ulimits the driver's create plan sets on podman (SANDBOX.md §4.5):
                    // without them runc cannot start the container here at all.
                    args.extend([
                        "--ulimit",
                        "nofile=16384:16384",
                        "--ulimit",
                        "nproc=16384:16384",
                    ]);
                }
                args.extend([options.image.as_str(), "sleep", "infinity"]);
                let id = cli(program, &args).await?;
                let took = started.elapsed();
                cli(program, &["rm", "-f", &id]).await?;
                if record {
                    theirs.push(took);
                }
            }
        }
    }
    let start_rows = (ours, theirs);

    // exec `true`: driver vs `docker exec CONTAINER true`, into one container.
    let run: Box<dyn SandboxRun> = driver.start(prepared.clone(), run_info(usize::MAX)).await?;
    let argv = ["true".to_owned()];
    let (mut ours, mut theirs) = (Samples::default(), Samples::default());
    for n in 0..options.runs + warmup {
        let record = n >= warmup;
        for side in if n % 2 == 0 { [0, 1] } else { [1, 0] } {
            let started = Instant::now();
            if side == 0 {
                let result = run.exec(&argv, ExecOpts::default()).await?;
                if result.exit_code != 0 {
                    return Err(format!("exec true exited {}", result.exit_code).into());
                }
            } else {
                cli(program, &["exec", run.id(), "true"]).await?;
            }
            let took = started.elapsed();
            if record {
                if side == 0 {
                    ours.push(took);
                } else {
                    theirs.push(took);
                }
            }
        }
    }
    // Where an exec's time goes: the driver's exec alone (not interleaved with the CLI), then the
    // three Engine API calls it makes, timed one by one.
    let (api, _) = BollardApi::connect(&endpoint(options.engine), Duration::from_secs(10)).await?;
    let mut solo = Samples::default();
    for _ in 0..options.runs {
        let t = Instant::now();
        run.exec(&argv, ExecOpts::default()).await?;
        solo.push(t.elapsed());
    }
    let (mut create, mut attach, mut inspect) =
        (Samples::default(), Samples::default(), Samples::default());
    let mut retries = 0usize;
    for _ in 0..options.runs {
        let t0 = Instant::now();
        let exec_id = api
            .create_exec(
                run.id(),
                ExecRequest {
                    cmd: argv.to_vec(),
                    working_dir: Some(workspace.path().canonicalize()?.display().to_string()),
                    ..ExecRequest::default()
                },
            )
            .await?;
        let t1 = Instant::now();
        let mut attached = api.start_exec(&exec_id).await?;
        while let Some(chunk) = attached.output.next().await {
            chunk?;
        }
        let t2 = Instant::now();
        loop {
            let state = api.inspect_exec(&exec_id).await?;
            if !state.running && state.exit_code.is_some() {
                break;
            }
            retries += 1;
        }
        let t3 = Instant::now();
        create.push(t1 - t0);
        attach.push(t2 - t1);
        inspect.push(t3 - t2);
    }
    run.cleanup().await?;
    let exec_rows = (ours, theirs);

    // lifecycle: cold vs warm vs `docker run --rm IMAGE true`, rotating.
    let warm_driver = DockerDriver::connect(
        options.engine,
        &[endpoint(options.engine)],
        DockerSettings::default()
            .persist_nix(false)
            .extra_label("iterion.io/bench", "docker_driver")
            .warm(1),
    )
    .await?;
    let warm_prepared = warm_driver.prepare(&spec, &NoProgress).await?;
    let (mut cold, mut warm, mut plain) =
        (Samples::default(), Samples::default(), Samples::default());
    let mut claimed = 0usize;
    for n in 0..options.runs + warmup {
        let record = n >= warmup;
        for side in [0, 1, 2].into_iter().cycle().skip(n % 3).take(3) {
            match side {
                0 | 1 => {
                    let (driver, prepared) = if side == 0 {
                        (&driver, &prepared)
                    } else {
                        // Not timed: the background refill of the previous claim.
                        let deadline = Instant::now() + Duration::from_secs(60);
                        while n > 0 && warm_driver.warm_ready().is_empty() {
                            if Instant::now() > deadline {
                                return Err("the warm pool did not refill within 60 s".into());
                            }
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        (&warm_driver, &warm_prepared)
                    };
                    let ready = warm_driver.warm_ready();
                    let started = Instant::now();
                    let run = driver
                        .start(prepared.clone(), run_info(1_000_000 + n * 3 + side))
                        .await?;
                    run.exec(&argv, ExecOpts::default()).await?;
                    run.cleanup().await?;
                    let took = started.elapsed();
                    if side == 1 && ready.iter().any(|id| id == run.id()) {
                        claimed += 1;
                    }
                    if record {
                        if side == 0 {
                            cold.push(took)
                        } else {
                            warm.push(took)
                        }
                    }
                }
                _ => {
                    let mut args = vec!["run", "--rm", "--label", "iterion.io/bench=docker_driver"];
                    if options.engine == DriverKind::Podman {
                        args.extend([
                            "--ulimit",
                            "nofile=16384:16384",
                            "--ulimit",
                            "nproc=16384:16384",
                        ]);
                    }
                    args.extend([options.image.as_str(), "true"]);
                    let started = Instant::now();
                    cli(program, &args).await?;
                    if record {
                        plain.push(started.elapsed());
                    }
                }
            }
        }
    }
    for id in warm_driver.warm_ready() {
        let _ = warm_driver.remove(&id).await;
    }
    let lifecycle_cold = (cold, Samples(plain.0.clone()));
    let lifecycle_warm = (warm, plain);

    println!(
        "| operation | iterion driver (median / p95) | `{program}` CLI (median / p95) | ratio median | ratio p95 | goal |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, cli_form, (ours, theirs), goal) in [
        (
            "start",
            format!("`{program} run -d IMAGE sleep infinity`"),
            &start_rows,
            "≤ 1.0×",
        ),
        (
            "exec `true`",
            format!("`{program} exec CONTAINER true`"),
            &exec_rows,
            "≤ 0.6×",
        ),
        (
            "lifecycle, cold",
            format!("`{program} run --rm IMAGE true`"),
            &lifecycle_cold,
            "≤ 1.0×",
        ),
        (
            "lifecycle, warm",
            format!("`{program} run --rm IMAGE true`"),
            &lifecycle_warm,
            "≤ 0.3×",
        ),
    ] {
        let (om, op) = (ours.percentile(50.0), ours.percentile(95.0));
        let (tm, tp) = (theirs.percentile(50.0), theirs.percentile(95.0));
        println!(
            "| {name} vs {cli_form} | {} / {} | {} / {} | {} | {} | {goal} |",
            ms(om),
            ms(op),
            ms(tm),
            ms(tp),
            ratio(om, tm),
            ratio(op, tp)
        );
    }
    println!();
    println!(
        "warm lifecycle rounds that claimed a ready entry: {claimed} of {}",
        options.runs + warmup
    );
    println!();
    println!(
        "driver exec `true` alone, not interleaved (median / p95 of {} runs): {} / {}",
        options.runs,
        ms(solo.percentile(50.0)),
        ms(solo.percentile(95.0))
    );
    println!();
    println!(
        "exec `true` through the API, call by call (median / p95 of {} runs): create_exec {} / {}, \
         start_exec until the output ends {} / {}, inspect_exec until the exit code is there {} / {} \
         ({retries} extra inspects in all)",
        options.runs,
        ms(create.percentile(50.0)),
        ms(create.percentile(95.0)),
        ms(attach.percentile(50.0)),
        ms(attach.percentile(95.0)),
        ms(inspect.percentile(50.0)),
        ms(inspect.percentile(95.0)),
    );
    Ok(())
}
