mod attacks;
mod encodings;
mod inspection;
mod policy;
mod protocols;
mod server;
mod support;
mod tunnel_attacks;
