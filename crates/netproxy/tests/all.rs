//! Integration tests of the egress proxy over real loopback sockets.

mod suite;
