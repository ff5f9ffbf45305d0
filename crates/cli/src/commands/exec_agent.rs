//! `iterion __exec-agent` (hidden; issue 18 item 3): the in-sandbox exec agent. It runs once per
//! sandbox from the read-only engine binary — as the container's own command (a warm pool entry's
//! too, waiting unattached until a run claims it), or started through the driver's exec — and
//! says nothing until the engine greets it (with the run's env when the container was made
//! without it); then the engine sends every node command to it as a frame on stdin; output and exit codes come back as frames
//! on stdout ([`iterion_sandbox::exec_agent`] holds the protocol and both sides). It reads no
//! environment variable of its own (the commands it starts inherit the sandbox's) and writes
//! nothing but frames to stdout; a broken channel is one line on stderr and exit 1. As the
//! sandbox's own command (PID 1, docker and podman) it never exits: once the channel ends it
//! idles and reaps, so the sandbox stays up for the driver's exec until the driver removes it.
use crate::exit::Exit;

/// Serves the engine on this process's stdin/stdout until stdin ends.
pub fn run() -> Exit {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("exec agent: cannot start the async runtime: {e}");
            return Exit::Failed;
        }
    };
    let served = runtime.block_on(iterion_sandbox::exec_agent::serve(
        tokio::io::stdin(),
        tokio::io::stdout(),
    ));
    if std::process::id() == 1 {
        if let Err(error) = &served {
            eprintln!("exec agent: {error}");
        }
        drop(runtime);
        iterion_sandbox::exec_agent::idle_as_init();
    }
    match served {
        Ok(()) => Exit::Success,
        Err(error) => {
            eprintln!("exec agent: {error}");
            Exit::Failed
        }
    }
}
