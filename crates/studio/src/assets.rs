//! The embedded script and stylesheet (no build step outside cargo).

/// `/static/studio.js`.
pub(crate) const JS: &str = include_str!("../assets/studio.js");
/// `/static/studio.css`.
pub(crate) const CSS: &str = include_str!("../assets/studio.css");
