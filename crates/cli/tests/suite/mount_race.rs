//! Issue 15 item 1, end to end: the parent's own container — which writes the shared workspace
//! — flips `./sub` between a directory and a symlink to a host stand-in for `/var/run` (a dir
//! whose `docker.sock` is a marker file, never the real socket), in a loop of rename(2)s running
//! in the background, while a subbot child that declares its own sandbox with
//! `mounts: ["type=bind,source=./sub,target=/x"]` (SANDBOX.md §14 rule 1) starts. The child
//! either is refused (the swap was seen) or mounts the real directory; it never sees the marker.
//! Without the staging mount, the engine resolves `./sub` again at mount time: it then shows
//! the marker, or fails to start on the absent moment between two renames.
use std::time::Duration;

use crate::suite::support::{Env, IMAGE, docker_or_skip};

const MARKER: &str = "HOST-DOCKER-SOCKET-STAND-IN";

#[test]
fn docker_a_child_mount_flipped_by_the_parents_container_never_yields_the_socket() {
    if !docker_or_skip("cli::mount_race::child_flip") {
        return;
    }
    let fake_run = tempfile::tempdir().unwrap();
    let fake_run = std::fs::canonicalize(fake_run.path()).unwrap();
    std::fs::write(fake_run.join("docker.sock"), MARKER).unwrap();
    let (mut started, mut refused, mut total_flips) = (0, 0, 0);
    for attempt in 0..10 {
        let env = Env::new();
        // The flip: `sub` is the real dir, (absent), the symlink, (absent), the dir again, …;
        // the loop counts its renames so the test can check it ran.
        let flip = format!(
            "mkdir -p sub && echo real > sub/ok && ln -sfn {link} other && \
             setsid sh -c 'n=0; while :; do mv -T sub tmp; mv -T other sub; sleep 0.005; \
             mv -T sub other; mv -T tmp sub; sleep 0.005; n=$((n+4)); echo $n > flips.new; mv -T flips.new flips; done' \
             >/dev/null 2>&1 < /dev/null & sleep 1
",
            link = fake_run.display()
        );
        env.write(
            "parent.iter",
            &format!(
                "tool flip:\n  command: `{flip}`\n\nsubbot child:\n  source: \"child.iter\"\n\nworkflow parent:\n  entry: flip\n  flip -> child\n  child -> done\n"
            ),
        );
        env.write(
            "child.iter",
            &format!(
                "tool look:\n  command: `(cat /x/docker.sock 2>/dev/null; ls /x) > seen-{attempt}.txt`\n\nworkflow child:\n  entry: look\n  sandbox:\n    image: \"{IMAGE}\"\n    mounts: [\"type=bind,source=./sub,target=/x\"]\n  look -> done\n"
            ),
        );
        let out = env
            .std_cmd()
            .args(["run", "parent.iter", "--sandbox-default-image", IMAGE])
            .output()
            .unwrap();
        let flips: u64 = std::fs::read_to_string(env.path("flips"))
            .unwrap_or_default()
            .trim()
            .parse()
            .unwrap_or(0);
        let seen = env.path(&format!("seen-{attempt}.txt"));
        if let Ok(seen) = std::fs::read_to_string(&seen) {
            assert!(!seen.contains(MARKER), "the child saw the socket: {seen}");
        }
        assert!(
            flips > 0,
            "attempt {attempt}: the flip never ran; {}",
            String::from_utf8_lossy(&out.stderr)
        );
        total_flips += flips;
        match out.status.code() {
            Some(0) => {
                started += 1;
                let seen = std::fs::read_to_string(&seen).unwrap();
                assert!(!seen.contains(MARKER), "the child saw the socket: {seen}");
                assert!(seen.contains("ok"), "the real dir is not mounted: {seen}");
            }
            _ => {
                refused += 1;
                let runs = env.runs();
                let child = runs.iter().find(|r| r.parent_run_id.is_some()).unwrap();
                assert_eq!(
                    child.failure_code.as_deref(),
                    Some("SANDBOX_SETUP_FAILED"),
                    "{child:#?}"
                );
                let message = child.failure_message.clone().unwrap_or_default();
                #[allow(clippy::print_stderr)]
                {
                    eprintln!("attempt {attempt}: {message}");
                }
                assert!(message.contains("mount refused"), "{message}");
                if let Ok(seen) = std::fs::read_to_string(&seen) {
                    assert!(!seen.contains(MARKER), "the child saw the socket: {seen}");
                }
            }
        }
        assert_eq!(env.containers(), Vec::<String>::new(), "nothing is left");
        std::thread::sleep(Duration::from_millis(100));
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("child flip: {started} started, {refused} refused, {total_flips} renames");
    }
    assert!(total_flips >= 200, "only {total_flips} renames");
}
