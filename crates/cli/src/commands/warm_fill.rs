//! `iterion __warm-fill` (hidden; issue 18 item 4): a docker warm pool's detached filler. A run
//! that teaches or drains a pool starts it in a process group of its own and writes the job to
//! its stdin (the shape's create template, the engine's endpoint, the pool's size); it makes
//! entries until the shape has that many unclaimed ones running, then exits. It outlives the run
//! that started it, so the next `iterion run` of the same shape claims what it made. It prints
//! nothing (its stdout and stderr are closed by the starter); exit 1 when the job failed.
use std::io::Read;

use crate::exit::Exit;

/// Reads the job from stdin and runs it.
pub fn run() -> Exit {
    let mut job = String::new();
    if std::io::stdin()
        .take(4 * 1024 * 1024)
        .read_to_string(&mut job)
        .is_err()
    {
        return Exit::Failed;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Exit::Failed;
    };
    match runtime.block_on(iterion_engine::run_warm_fill_job(&job)) {
        Ok(_) => Exit::Success,
        Err(error) => {
            eprintln!("warm pool filler: {error}");
            Exit::Failed
        }
    }
}
