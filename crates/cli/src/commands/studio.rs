//! `iterion studio [--listen ADDR] [--json]`: the run viewer (docs/studio.md) over this store.
//!
//! The token comes from ITERION_STUDIO_TOKEN or is generated; off loopback it is printed once
//! (in the URL). Answering a paused run resumes it in this process, through the same engine
//! `iterion resume --answer` builds; Ctrl-C or SIGTERM interrupts those runs (resumable) and
//! waits for their sandboxes to be torn down before the process exits.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iterion_engine::{Engine, NoObserver, ResumeRequest, RunControl};
use iterion_store::{Run, Store};
use iterion_studio::{Access, ActionError, Actions};
use iterion_vocab::Environment;

use crate::args::StudioArgs;
use crate::commands::{Failure, open_store, product_setup};
use crate::exit::Exit;

/// The variable that sets the studio's token.
pub const ITERION_STUDIO_TOKEN: &str = "ITERION_STUDIO_TOKEN";

/// How long shutdown waits for resumed runs to wind down.
const DRAIN: Duration = Duration::from_secs(60);

/// Runs the command.
pub async fn run(args: StudioArgs, env: &Environment) -> Exit {
    match studio(args, env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

/// The studio's write actions: a resume per answer, in this process.
struct EngineActions {
    engine: Arc<Engine>,
    tasks: Mutex<tokio::task::JoinSet<()>>,
    controls: Mutex<Vec<RunControl>>,
}

#[iterion_engine::async_trait]
impl Actions for EngineActions {
    async fn answer(&self, run: &Run, answer: String) -> Result<(), ActionError> {
        let control = RunControl::default();
        if let Ok(mut controls) = self.controls.lock() {
            controls.push(control.clone());
        }
        let engine = self.engine.clone();
        let request = ResumeRequest {
            run_id: run.id.to_string(),
            force: false,
            answer: Some(answer),
            from: None,
        };
        let id = run.id.to_string();
        let mut tasks = self
            .tasks
            .lock()
            .map_err(|_| ActionError::Failed("the studio's task set is poisoned".to_owned()))?;
        tasks.spawn(async move {
            match engine.resume(request, control, Arc::new(NoObserver)).await {
                Ok(summary) => eprintln!(
                    "studio: run {id} answered and resumed: {}",
                    summary.status.as_str()
                ),
                Err(e) => eprintln!(
                    "studio: run {id}: resume failed: {}",
                    crate::terminal::terminal_safe(&e.to_string())
                ),
            }
        });
        Ok(())
    }
}

impl EngineActions {
    /// Interrupts every resumed run still going and waits (at most [`DRAIN`]) for them.
    async fn drain(&self) {
        if let Ok(controls) = self.controls.lock() {
            for c in controls.iter() {
                c.interrupt.cancel();
            }
        }
        let mut tasks = match self.tasks.lock() {
            Ok(mut guard) => std::mem::take(&mut *guard),
            Err(_) => return,
        };
        let _ =
            tokio::time::timeout(DRAIN, async { while tasks.join_next().await.is_some() {} }).await;
    }
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

async fn studio(args: StudioArgs, env: &Environment) -> Result<Exit, Failure> {
    let (home, store): (_, Arc<dyn Store>) = open_store(env).await?;
    let loopback = args.listen.ip().is_loopback();
    let (token, generated) = match env.get(ITERION_STUDIO_TOKEN).filter(|t| !t.is_empty()) {
        Some(t) if t.len() < 16 => {
            return Err(Failure::bad_input(anyhow::anyhow!(
                "ITERION_STUDIO_TOKEN is {} characters: a token needs at least 16",
                t.len()
            )));
        }
        Some(t) => (t, false),
        None => (
            iterion_studio::generate_token()
                .map_err(|e| Failure::failed(anyhow::anyhow!("cannot generate a token: {e}")))?,
            true,
        ),
    };
    let listener = tokio::net::TcpListener::bind(args.listen).await.map_err(|e| {
        Failure::failed(anyhow::anyhow!(
            "cannot listen on {}: {e} (choose another with --listen ADDR, port 0 for a free one)",
            args.listen
        ))
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::failed(anyhow::anyhow!("cannot read the listening address: {e}")))?;
    let engine =
        Arc::new(Engine::new(store.clone(), home).with_preflight_setup(product_setup(env)?));
    let actions = Arc::new(EngineActions {
        engine,
        tasks: Mutex::new(tokio::task::JoinSet::new()),
        controls: Mutex::new(Vec::new()),
    });
    let base = format!("http://{bound}/");
    // Off loopback a generated token is shown once, in the URL to open; one from the
    // environment is the operator's and is not echoed.
    let shown_token = (!loopback && generated).then(|| token.clone());
    let url = match &shown_token {
        Some(t) => format!("{base}?token={t}"),
        None => base,
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "url": url,
                "listen": bound.to_string(),
                "token_required": !loopback,
                "token": shown_token,
            })
        );
    } else {
        println!("iterion studio: {url}");
        if !loopback && !generated {
            println!("(off loopback: every request needs the token from ITERION_STUDIO_TOKEN)");
        }
    }
    let access = Access::new(token, bound);
    let served =
        iterion_studio::serve(listener, store, actions.clone(), access, shutdown_signal()).await;
    eprintln!("studio: stopping");
    actions.drain().await;
    match served {
        Ok(()) => Ok(Exit::Success),
        Err(e) => Err(Failure::failed(anyhow::anyhow!(
            "the studio's server failed: {e}"
        ))),
    }
}
