//! The one integration-test binary of iterion-sandbox-docker (STYLE.md §5.12): each topic is a
//! module in `suite/`. Tests that need the container engine are named `docker_*`; they skip without
//! an engine unless `ITERION_IT_DOCKER=1` (set by scripts/test.sh), which makes a missing engine a
//! failure.

mod suite;
