//! What the battery is asked ([`PreflightRequest`]); what it is given is the engine's
//! `PreflightSetup` (`launcher/setup.rs`).

use std::time::Duration;

use iterion_dsl::ir;
use iterion_sandbox::Trust;

use crate::launcher::launch::LaunchOptions;
use crate::preflight::report::Target;

/// What the battery is asked about.
#[derive(Clone, Copy, Debug)]
pub struct PreflightRequest<'a> {
    /// The workflow's `sandbox:` block; the default block for "no workflow" (the doctor without
    /// `FILE`).
    pub sandbox: &'a ir::Sandbox,
    /// The run's flags and working directory, as `iterion run` would pass them.
    pub options: &'a LaunchOptions,
    /// The run's trust (an untrusted run's host_state is `none`).
    pub trust: Trust,
    /// Which battery: `auto` follows the selected driver.
    pub target: Target,
    /// The bound of each probe.
    pub timeout: Duration,
}
