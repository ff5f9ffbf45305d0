//! `--listen ADDR=SOCKET`, the egress bridge's one argument: parsed and checked here, before
//! anything is bound.

use std::net::SocketAddr;
use std::path::PathBuf;

/// One `--listen ADDR=SOCKET` pair: a loopback TCP address inside the container and the Unix
/// socket its connections are carried to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenSpec {
    /// The TCP address to listen on (loopback only).
    pub addr: SocketAddr,
    /// The Unix socket each accepted connection is spliced to.
    pub socket: PathBuf,
}

/// Why a `--listen` value is refused (clap prints it and exits 2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ListenError {
    /// No `=` between the address and the socket.
    #[error("expected ADDR=SOCKET (e.g. 127.0.0.1:3128=/run/iterion/net/proxy.sock), got {0:?}")]
    NotAPair(String),
    /// The address is not an `ip:port` literal (names are never resolved).
    #[error("{0:?} is not an ip:port address (e.g. 127.0.0.1:3128)")]
    NotAnAddress(String),
    /// The address is not loopback: it would offer the route out to the whole namespace.
    #[error("{0} is not a loopback address: the bridge listens on loopback only")]
    NotLoopback(SocketAddr),
    /// Port 0.
    #[error("{0}: the port must be fixed, not 0")]
    PortZero(SocketAddr),
    /// The socket path is relative.
    #[error("{:?} is not an absolute socket path", .0.display())]
    RelativeSocket(PathBuf),
}

/// Parses `ADDR=SOCKET`, e.g. `127.0.0.1:3128=/run/iterion/net/proxy.sock` (the clap value parser
/// of `--listen`). The address must be a loopback `ip:port` literal (no names: nothing is
/// resolved), the socket path absolute.
pub fn parse_listen(value: &str) -> Result<ListenSpec, ListenError> {
    let Some((addr, socket)) = value.split_once('=') else {
        return Err(ListenError::NotAPair(value.to_owned()));
    };
    let addr: SocketAddr = addr
        .parse()
        .map_err(|_| ListenError::NotAnAddress(addr.to_owned()))?;
    if !addr.ip().is_loopback() {
        return Err(ListenError::NotLoopback(addr));
    }
    if addr.port() == 0 {
        return Err(ListenError::PortZero(addr));
    }
    let socket = PathBuf::from(socket);
    if !socket.is_absolute() {
        return Err(ListenError::RelativeSocket(socket));
    }
    Ok(ListenSpec { addr, socket })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn listen_pair_parses_into_address_and_socket() {
        assert_eq!(
            parse_listen("127.0.0.1:3128=/run/iterion/net/proxy.sock"),
            Ok(ListenSpec {
                addr: "127.0.0.1:3128".parse().unwrap(),
                socket: PathBuf::from("/run/iterion/net/proxy.sock"),
            })
        );
        assert_eq!(
            parse_listen("[::1]:3129=/a=b.sock"),
            Ok(ListenSpec {
                addr: "[::1]:3129".parse().unwrap(),
                socket: PathBuf::from("/a=b.sock"),
            })
        );
    }

    #[test]
    fn listen_pair_refuses_what_would_open_or_misroute_a_route() {
        let refused = |value: &str| parse_listen(value).unwrap_err().to_string();
        assert_eq!(
            refused("0.0.0.0:3128=/s.sock"),
            "0.0.0.0:3128 is not a loopback address: the bridge listens on loopback only"
        );
        assert_eq!(
            refused("127.0.0.1:3128"),
            "expected ADDR=SOCKET (e.g. 127.0.0.1:3128=/run/iterion/net/proxy.sock), got \"127.0.0.1:3128\""
        );
        assert_eq!(
            refused("localhost:3128=/s.sock"),
            "\"localhost:3128\" is not an ip:port address (e.g. 127.0.0.1:3128)"
        );
        assert_eq!(
            refused("127.0.0.1:0=/s.sock"),
            "127.0.0.1:0: the port must be fixed, not 0"
        );
        assert_eq!(
            refused("127.0.0.1:3128=proxy.sock"),
            "\"proxy.sock\" is not an absolute socket path"
        );
    }
}
