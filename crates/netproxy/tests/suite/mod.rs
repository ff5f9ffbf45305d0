mod attacks;
mod encodings;
mod inspection;
mod names;
mod policy;
mod server;
mod support;
