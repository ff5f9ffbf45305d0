//! `iterion __egress-probe HOST:PORT` (hidden; SANDBOX.md §5.7 step 9): run inside a kubernetes
//! sandbox pod right after start, it makes one **direct** TCP connection (no proxy) with a 3 s
//! timeout. Exit 0: the connection succeeded, so egress is NOT enforced and the driver fails the
//! run; exit 1: it was blocked (refused, unreachable, timed out), which is what the NetworkPolicy
//! should do; exit 2: the address does not parse or resolve — the driver treats anything but 0
//! and 1 as inconclusive. Reads no env, prints one line to stderr.
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::exit::Exit;

/// The probe's connect timeout.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs the probe against `target` (`host:port`).
pub fn run(target: &str) -> Exit {
    let addresses: Vec<SocketAddr> = match target.to_socket_addrs() {
        Ok(addresses) => addresses.collect(),
        Err(error) => {
            eprintln!("egress probe: {target}: {error}");
            return Exit::BadInput;
        }
    };
    let Some(address) = addresses.first() else {
        eprintln!("egress probe: {target}: no address");
        return Exit::BadInput;
    };
    match TcpStream::connect_timeout(address, PROBE_TIMEOUT) {
        Ok(_) => {
            eprintln!("egress probe: direct connection to {target} succeeded");
            Exit::Success
        }
        Err(error) => {
            eprintln!("egress probe: direct connection to {target} blocked: {error}");
            Exit::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_port_connects_and_a_closed_one_is_blocked() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap().to_string();
        let closed = {
            let spare = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            spare.local_addr().unwrap().to_string()
        };
        assert_eq!(
            [run(&open), run(&closed), run("not an address")],
            [Exit::Success, Exit::Failed, Exit::BadInput]
        );
    }
}
