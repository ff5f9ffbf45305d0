//! The one integration-test binary of iterion-sandbox-namespace (STYLE.md §5.12): real
//! sandboxes on this kernel. They need user namespaces and fail (never skip) without them.

mod suite;
