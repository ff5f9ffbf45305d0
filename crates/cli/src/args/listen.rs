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

/// Parses `ADDR=SOCKET`, e.g. `127.0.0.1:3128=/run/iterion/net/proxy.sock` (the clap value parser
/// of `--listen`). The address must be a loopback `ip:port` literal (no names: nothing is
/// resolved), the socket path absolute.
pub fn parse_listen(value: &str) -> Result<ListenSpec, String> {
    let Some((addr, socket)) = value.split_once('=') else {
        return Err(format!(
            "expected ADDR=SOCKET (e.g. 127.0.0.1:3128=/run/iterion/net/proxy.sock), got {value:?}"
        ));
    };
    let addr: SocketAddr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an ip:port address (e.g. 127.0.0.1:3128)"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "{addr} is not a loopback address: the bridge listens on loopback only"
        ));
    }
    if addr.port() == 0 {
        return Err(format!("{addr}: the port must be fixed, not 0"));
    }
    let socket = PathBuf::from(socket);
    if !socket.is_absolute() {
        return Err(format!(
            "{:?} is not an absolute socket path",
            socket.display()
        ));
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
        let refused = |value: &str| parse_listen(value).unwrap_err();
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
