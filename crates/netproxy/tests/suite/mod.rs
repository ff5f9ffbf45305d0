mod attacks;
mod inspection;
mod policy;
mod server;
mod support;
