//! The drivers. Each lives in its own module and is reached through the [`Driver`](crate::Driver)
//! trait and a [`DriverConstructor`](crate::DriverConstructor) registered with the factory:
//!
//! - [`noop`]: host passthrough, always constructible, isolates nothing;
//! - `docker` (docker and podman through the Engine API, bollard) and `kubernetes` plug in here.

pub(crate) mod noop;
