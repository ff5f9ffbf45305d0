//! The agent and its client over in-memory pipes: the fake run's exec serves the agent in this
//! process (its commands are real host processes), so the whole contract is tested without an
//! engine; the container-level tests are in the engine's and the cli's suites.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

use super::frame::{Frame, PROTOCOL_VERSION};
use super::{AgentRun, serve, start_exec_agent};
use crate::{ExecOpts, ExecResult, Result, SandboxRun};

/// A run whose `agent` exec serves the agent in-process, whose `liar` exec greets and then
/// sends a frame over the bound, and whose every other exec is the "driver's" exec: it counts
/// and answers 42.
#[derive(Default)]
struct InProcess {
    driver_execs: AtomicUsize,
    kill_agent: Notify,
    /// The exit code the agent's exec reports when `kill_agent` ends it.
    killed_code: std::sync::atomic::AtomicI64,
}

#[async_trait]
impl SandboxRun for InProcess {
    fn driver(&self) -> &str {
        "fake"
    }

    fn id(&self) -> &str {
        "fake-1"
    }

    async fn exec(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult> {
        match argv[0].as_str() {
            "agent" => {
                let (Some(input), Some(output)) = (opts.stdin, opts.stdout) else {
                    panic!("the agent is started with both streams");
                };
                let code = tokio::select! {
                    ended = serve(input, output) => i64::from(ended.is_err()),
                    () = self.kill_agent.notified() => self.killed_code.load(Ordering::SeqCst),
                };
                Ok(ExecResult {
                    exit_code: code,
                    ..ExecResult::default()
                })
            }
            "liar" => {
                let mut output = opts.stdout.expect("stdout");
                Frame::Hello(PROTOCOL_VERSION)
                    .write(&mut output)
                    .await
                    .unwrap();
                // A header announcing 4 GiB.
                output
                    .write_all(&[0x11, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff])
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(ExecResult::default())
            }
            "mute" => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(ExecResult::default())
            }
            _ => {
                self.driver_execs.fetch_add(1, Ordering::SeqCst);
                Ok(ExecResult {
                    exit_code: 42,
                    ..ExecResult::default()
                })
            }
        }
    }

    async fn cleanup(&self) -> Result<()> {
        Ok(())
    }
}

async fn agent() -> (AgentRun, Arc<InProcess>) {
    let fake = Arc::new(InProcess::default());
    let run = start_exec_agent(
        Arc::clone(&fake) as Arc<dyn SandboxRun>,
        vec!["agent".to_owned()],
        Duration::from_secs(5),
    )
    .await
    .expect("the agent greets");
    (run, fake)
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()]
}

#[tokio::test]
async fn an_exec_through_the_agent_buffers_both_streams_and_keeps_the_exit_code() {
    let (run, fake) = agent().await;
    let result = run
        .exec(&sh("echo out; echo err >&2; exit 3"), ExecOpts::default())
        .await
        .unwrap();
    assert_eq!(result.exit_code, 3);
    assert_eq!(result.stdout.as_deref(), Some(&b"out\n"[..]));
    assert_eq!(result.stderr.as_deref(), Some(&b"err\n"[..]));
    assert_eq!(
        fake.driver_execs.load(Ordering::SeqCst),
        0,
        "nothing fell back"
    );
}

#[tokio::test]
async fn env_workdir_and_stdin_reach_the_process() {
    let (run, _) = agent().await;
    let dir = tempfile::tempdir().unwrap();
    let opts = ExecOpts {
        env: vec![("GREETING".to_owned(), "hi".to_owned())],
        workdir: Some(dir.path().display().to_string()),
        stdin: Some(Box::new(&b"from stdin"[..])),
        ..ExecOpts::default()
    };
    let result = run
        .exec(&sh("printf '%s %s ' \"$GREETING\" \"$PWD\"; cat"), opts)
        .await
        .unwrap();
    let want = format!("hi {} from stdin", dir.path().display());
    assert_eq!(
        String::from_utf8_lossy(result.stdout.as_deref().unwrap()),
        want
    );
}

#[tokio::test]
async fn a_process_killed_by_a_signal_reports_128_plus_the_signal() {
    let (run, _) = agent().await;
    let result = run
        .exec(&sh("kill -9 $$"), ExecOpts::default())
        .await
        .unwrap();
    assert_eq!(result.exit_code, 137);
}

#[tokio::test]
async fn a_program_that_does_not_exist_exits_127_and_says_so() {
    let (run, _) = agent().await;
    let argv = vec!["/nonexistent/prog".to_owned()];
    let result = run.exec(&argv, ExecOpts::default()).await.unwrap();
    assert_eq!(result.exit_code, 127);
    let stderr = String::from_utf8_lossy(result.stderr.as_deref().unwrap()).into_owned();
    assert!(stderr.contains("/nonexistent/prog"), "{stderr}");
}

/// A sink that counts what it is given.
struct Counter(Arc<AtomicUsize>);

impl tokio::io::AsyncWrite for Counter {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.fetch_add(buf.len(), Ordering::SeqCst);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn fifty_megabytes_of_output_stream_through_whole() {
    let (run, _) = agent().await;
    let count = Arc::new(AtomicUsize::new(0));
    let opts = ExecOpts {
        stdout: Some(Box::new(Counter(Arc::clone(&count)))),
        ..ExecOpts::default()
    };
    let result = run
        .exec(&sh("head -c 52428800 /dev/zero"), opts)
        .await
        .unwrap();
    assert_eq!(result.exit_code, 0);
    assert_eq!(result.stdout, None, "streamed, not buffered");
    assert_eq!(count.load(Ordering::SeqCst), 50 * 1024 * 1024);
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

#[tokio::test]
async fn a_dropped_exec_kills_its_process_group() {
    let (run, _) = agent().await;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "sleep 300 & echo $! > {p}; echo $$ >> {p}; wait",
        p = pids.display()
    );
    let argv = sh(&script);
    let exec = run.exec(&argv, ExecOpts::default());
    assert!(
        tokio::time::timeout(Duration::from_millis(700), exec)
            .await
            .is_err(),
        "the command hangs"
    );
    let pids: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Reaped by nobody in this test process: a zombie still answers kill(0); read its state.
    for pid in pids {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            state.is_empty() || state.contains(") Z "),
            "process {pid} still runs: {state}"
        );
    }
}

#[tokio::test]
async fn concurrent_execs_get_their_own_output() {
    let (run, _) = agent().await;
    let run = Arc::new(run);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let run = Arc::clone(&run);
        tasks.push(tokio::spawn(async move {
            let script = format!("for n in 1 2 3 4 5; do echo {i}-$n; sleep 0.01; done; exit {i}");
            let result = run.exec(&sh(&script), ExecOpts::default()).await.unwrap();
            (i, result)
        }));
    }
    for task in tasks {
        let (i, result) = task.await.unwrap();
        assert_eq!(result.exit_code, i);
        let want: String = (1..=5).map(|n| format!("{i}-{n}\n")).collect();
        assert_eq!(
            String::from_utf8_lossy(result.stdout.as_deref().unwrap()),
            want
        );
    }
}

#[tokio::test]
async fn an_exec_for_another_user_uses_the_driver() {
    let (run, fake) = agent().await;
    let opts = ExecOpts {
        user: Some("0:0".to_owned()),
        ..ExecOpts::default()
    };
    let result = run.exec(&sh("exit 0"), opts).await.unwrap();
    assert_eq!(result.exit_code, 42);
    assert_eq!(fake.driver_execs.load(Ordering::SeqCst), 1);
}

/// The agent's exec ends while `sleep 30` runs through it, with `code`; returns what the
/// running exec got, and checks that a later exec falls back to the driver.
async fn agent_ends_mid_exec(code: i64) -> Result<ExecResult> {
    let (run, fake) = agent().await;
    fake.killed_code.store(code, Ordering::SeqCst);
    let run = Arc::new(run);
    let running = {
        let run = Arc::clone(&run);
        tokio::spawn(async move { run.exec(&sh("sleep 30"), ExecOpts::default()).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    fake.kill_agent.notify_one();
    let got = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the running exec ends when the agent is gone")
        .unwrap();
    assert!(!run.agent_alive());
    let result = run.exec(&sh("exit 0"), ExecOpts::default()).await.unwrap();
    assert_eq!(result.exit_code, 42, "the driver's exec answered");
    assert_eq!(fake.driver_execs.load(Ordering::SeqCst), 1);
    got
}

#[tokio::test]
async fn an_agent_killed_by_a_signal_reports_that_signal_for_what_ran_and_execs_fall_back() {
    // The container killed: docker's exec of the command would have said 137 too.
    let got = agent_ends_mid_exec(137).await.unwrap();
    assert_eq!(got.exit_code, 137);
}

#[tokio::test]
async fn an_agent_that_exits_fails_what_ran_and_execs_fall_back() {
    let got = agent_ends_mid_exec(1).await;
    let error = got.expect_err("no exit code to report");
    assert!(
        error.to_string().contains("exec agent went away"),
        "{error}"
    );
}

#[tokio::test]
async fn a_frame_over_the_bound_ends_the_channel_not_the_engine() {
    let fake = Arc::new(InProcess::default());
    let run = start_exec_agent(
        Arc::clone(&fake) as Arc<dyn SandboxRun>,
        vec!["liar".to_owned()],
        Duration::from_secs(5),
    )
    .await
    .expect("it greets");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while run.agent_alive() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!run.agent_alive(), "the oversized frame was refused");
    let result = run.exec(&sh("exit 0"), ExecOpts::default()).await.unwrap();
    assert_eq!(result.exit_code, 42);
}

#[tokio::test]
async fn an_agent_that_never_greets_is_not_used() {
    let fake = Arc::new(InProcess::default());
    let started = start_exec_agent(
        Arc::clone(&fake) as Arc<dyn SandboxRun>,
        vec!["mute".to_owned()],
        Duration::from_millis(200),
    )
    .await;
    let Err(why) = started else {
        panic!("a mute agent was accepted");
    };
    assert!(why.contains("not ready within 200 ms"), "{why}");
}

#[tokio::test]
async fn frames_round_trip_and_a_malformed_one_is_refused() {
    let frames = [
        Frame::Greet(super::frame::Greeting {
            env: vec![("K".to_owned(), "v".to_owned())],
        }),
        Frame::Hello(PROTOCOL_VERSION),
        Frame::Stdout(7, b"abc".to_vec()),
        Frame::Exit(7, -1),
        Frame::Kill(3),
    ];
    let mut wire = Vec::new();
    for frame in &frames {
        frame.write(&mut wire).await.unwrap();
    }
    let mut source = wire.as_slice();
    for frame in &frames {
        assert_eq!(
            Frame::read(&mut source).await.unwrap().as_ref(),
            Some(frame)
        );
    }
    assert!(Frame::read(&mut source).await.unwrap().is_none());
    let unknown = [0x7f_u8, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(Frame::read(&mut &unknown[..]).await.is_err());
    let short_exit = [0x13_u8, 0, 0, 0, 1, 0, 0, 0, 1, 9];
    assert!(Frame::read(&mut &short_exit[..]).await.is_err());
    let empty_argv = br#"{"argv":[],"env":[],"workdir":null,"stdin":false}"#;
    let mut start = vec![0x02_u8, 0, 0, 0, 1];
    start.extend_from_slice(&u32::try_from(empty_argv.len()).unwrap().to_be_bytes());
    start.extend_from_slice(empty_argv);
    assert!(Frame::read(&mut start.as_slice()).await.is_err());
}

#[tokio::test]
async fn an_exec_ends_with_its_process_even_when_a_background_job_holds_its_pipes() {
    let (run, _) = agent().await;
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        run.exec(
            &sh("echo before; (sleep 30; echo late) & exit 5"),
            ExecOpts::default(),
        ),
    )
    .await
    .expect("the exec ended with its process")
    .unwrap();
    assert_eq!(result.exit_code, 5);
    assert_eq!(result.stdout.as_deref(), Some(&b"before\n"[..]));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// The agent over in-memory pipes, driven by hand: `(to agent, from agent, its serve task)`.
fn served() -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<std::result::Result<(), super::frame::FrameError>>,
) {
    let (to_agent, agent_in) = tokio::io::duplex(1 << 16);
    let (agent_out, from_agent) = tokio::io::duplex(1 << 16);
    let task = tokio::spawn(serve(agent_in, agent_out));
    (to_agent, from_agent, task)
}

#[tokio::test]
async fn the_agent_says_nothing_until_greeted_and_then_applies_the_greetings_env() {
    use super::frame::Greeting;
    let (mut to_agent, mut from_agent, _task) = served();
    // A pool entry's agent, nobody attached yet: not one byte.
    let early =
        tokio::time::timeout(Duration::from_millis(300), Frame::read(&mut from_agent)).await;
    assert!(
        early.is_err(),
        "the agent wrote before its greeting: {early:?}"
    );
    let greeting = Greeting {
        env: vec![
            ("ITERION_T_RUN_ENV".to_owned(), "from-the-claim".to_owned()),
            ("ITERION_T_BOTH".to_owned(), "greeting".to_owned()),
        ],
    };
    super::handshake(
        &mut to_agent,
        &mut from_agent,
        &greeting,
        Duration::from_secs(5),
    )
    .await
    .expect("the agent answers the greeting");
    let request = super::frame::StartRequest {
        argv: sh("echo \"$ITERION_T_RUN_ENV $ITERION_T_BOTH\""),
        env: vec![("ITERION_T_BOTH".to_owned(), "exec".to_owned())],
        workdir: None,
        stdin: false,
    };
    Frame::Start(1, request).write(&mut to_agent).await.unwrap();
    let mut out = Vec::new();
    loop {
        match Frame::read(&mut from_agent).await.unwrap().unwrap() {
            Frame::Stdout(1, bytes) => out.extend(bytes),
            Frame::Exit(1, code) => {
                assert_eq!(code, 0);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "from-the-claim exec\n",
        "the run's env reaches the command, and the exec's own pair wins"
    );
    // Put in front of each command, never into the agent's own environment.
    assert!(std::env::var_os("ITERION_T_RUN_ENV").is_none());
}

#[tokio::test]
async fn an_agent_whose_first_frame_is_not_a_greeting_ends_the_channel_unanswered() {
    let (mut to_agent, mut from_agent, task) = served();
    Frame::Start(
        1,
        super::frame::StartRequest {
            argv: sh("touch /tmp/never"),
            env: Vec::new(),
            workdir: None,
            stdin: false,
        },
    )
    .write(&mut to_agent)
    .await
    .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the agent gave up")
        .unwrap();
    assert!(ended.is_err(), "{ended:?}");
    assert!(
        Frame::read(&mut from_agent).await.unwrap().is_none(),
        "nothing was said, nothing was run"
    );
}

#[tokio::test]
async fn a_garbage_or_foreign_greeting_answer_is_refused_quickly() {
    use super::frame::Greeting;
    let within = Duration::from_secs(5);
    // Text where a hello should be: its "header" announces ~541 MB, over the bound.
    let mut text: &[u8] = b"hello I am not an agent\n";
    let mut sink = Vec::new();
    let why = super::handshake(&mut sink, &mut text, &Greeting::default(), within)
        .await
        .unwrap_err();
    assert!(why.contains("over the"), "{why}");
    // The greeting was written whole, and first.
    assert!(matches!(
        Frame::read(&mut sink.as_slice()).await.unwrap(),
        Some(Frame::Greet(_))
    ));
    // Output before any hello.
    let mut wire = Vec::new();
    Frame::Stdout(1, b"x".to_vec())
        .write(&mut wire)
        .await
        .unwrap();
    let why = super::handshake(
        &mut Vec::new(),
        &mut wire.as_slice(),
        &Greeting::default(),
        within,
    )
    .await
    .unwrap_err();
    assert!(why.contains("did not answer the greeting"), "{why}");
    // Another version.
    let mut wire = Vec::new();
    Frame::Hello(PROTOCOL_VERSION + 7)
        .write(&mut wire)
        .await
        .unwrap();
    let why = super::handshake(
        &mut Vec::new(),
        &mut wire.as_slice(),
        &Greeting::default(),
        within,
    )
    .await
    .unwrap_err();
    assert!(why.contains("speaks version"), "{why}");
    // A truncated frame, then the end.
    let mut cut: &[u8] = &[0x01, 0, 0, 0, 0, 0, 0, 0, 4, 0];
    let why = super::handshake(&mut Vec::new(), &mut cut, &Greeting::default(), within)
        .await
        .unwrap_err();
    assert!(!why.is_empty());
}
