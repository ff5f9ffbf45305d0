mod attacks;
mod encodings;
mod inspection;
mod policy;
mod server;
mod support;
