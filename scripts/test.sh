#!/usr/bin/env bash
# The one test command (README, CI via .ci/run): everything a fresh Debian 12 machine needs, then
# every check the workspace has.
#
#   1. installs what the tests need when it is missing (as root, via apt): the Docker engine from
#      Debian's docker.io package, busybox-static and debootstrap;
#   2. starts dockerd in the background when no engine answers, and waits for it;
#   3. builds the local test images (scripts/build-test-images.sh; cached by tag);
#   4. cargo fmt --check, cargo clippy -D warnings, the test suite with cargo-nextest and
#      ITERION_IT_DOCKER=1 (so a missing engine fails the container tests instead of skipping them),
#      and the doctests (which nextest does not run).
#
# Exits non-zero on the first failure. Safe to run again: installed packages, a running engine and
# existing images are reused, so a warm run spends its time in cargo only.
#
# Environment:
#   ITERION_DOCKERD_LOG      where a dockerd started by this script logs
#                            (default /var/log/iterion-dockerd.log)
#   ITERION_DOCKERD_TIMEOUT  seconds to wait for that dockerd to answer (default 60)
#   ITERION_DOCKERD_FLAGS    extra flags for that dockerd (default none; see below)
#   NEXTEST_PROFILE          nextest profile (default ci, see .config/nextest.toml)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_ROOT
readonly DOCKERD_LOG="${ITERION_DOCKERD_LOG:-/var/log/iterion-dockerd.log}"
readonly DOCKERD_TIMEOUT="${ITERION_DOCKERD_TIMEOUT:-60}"

section() { printf '\n==> %s\n' "$*" >&2; }
die() {
    printf 'test.sh: error: %s\n' "$*" >&2
    exit 1
}
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "need root to run: $*"
    fi
}

# ---------------------------------------------------------------------------------------------
section "system packages"
missing=()
# Debian's docker.io ships dockerd; /usr/local/bin/docker may be a lone client, so test for dockerd.
command -v dockerd >/dev/null || missing+=(docker.io)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ((${#missing[@]})); then
    printf 'installing: %s\n' "${missing[*]}" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
else
    echo "docker.io, busybox-static and debootstrap already installed" >&2
fi

# ---------------------------------------------------------------------------------------------
section "container engine"
if docker info >/dev/null 2>&1; then
    echo "engine answers: $(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')" >&2
else
    # Debian's docker.io does not start on install here (no init system runs services, and
    # policy-rc.d forbids it), so start the daemon ourselves, detached so that it outlives this
    # script and later runs reuse it.
    #
    # Flags: none. Checked on the CI machine (Debian 12 VM, kernel 6.x with nf_tables built in,
    # cgroup v1, no systemd): plain `dockerd` starts its own containerd, uses overlay2 on ext4, and
    # sets up docker0 plus NAT through iptables-nft (docker.io depends on iptables), so containers
    # get bridge networking and egress; --iptables=false would only take that away. On a kernel
    # without netfilter dockerd dies with "failed to create NAT chain DOCKER": pass
    # ITERION_DOCKERD_FLAGS="--iptables=false --ip6tables=false" there.
    read -r -a dockerd_flags <<<"${ITERION_DOCKERD_FLAGS:-}"
    echo "starting dockerd ${dockerd_flags[*]} (log: $DOCKERD_LOG)" >&2
    [[ $EUID -eq 0 ]] || die "no container engine answers, and starting dockerd needs root"
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    # exec in a subshell, so that $! is dockerd itself and no shell lingers waiting for it; setsid
    # (which does not fork here: a background job of a script is no group leader) and nohup take it
    # out of our session, so neither Ctrl-C nor the end of this script stops the engine.
    (exec setsid nohup dockerd "${dockerd_flags[@]}" >>"$DOCKERD_LOG" 2>&1 </dev/null) &
    dockerd_pid=$!
    started=$SECONDS
    deadline=$((started + DOCKERD_TIMEOUT))
    until docker info >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            echo "--- last lines of $DOCKERD_LOG ---" >&2
            tail -n 40 "$DOCKERD_LOG" >&2 || true
            die "dockerd did not answer within ${DOCKERD_TIMEOUT}s (see $DOCKERD_LOG)"
        fi
        # (an exited child stays a zombie until reaped, so look at its state, not just its pid)
        if [[ ! -r /proc/$dockerd_pid/status ]] || grep -q '^State:[[:space:]]*Z' "/proc/$dockerd_pid/status"; then
            echo "--- last lines of $DOCKERD_LOG ---" >&2
            tail -n 40 "$DOCKERD_LOG" >&2 || true
            die "dockerd exited during startup (see $DOCKERD_LOG)"
        fi
        sleep 0.5
    done
    echo "engine up after $((SECONDS - started))s:" \
        "$(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')" >&2
fi

# ---------------------------------------------------------------------------------------------
section "test images"
as_root "$REPO_ROOT/scripts/build-test-images.sh"

# ---------------------------------------------------------------------------------------------
cd "$REPO_ROOT"

section "cargo fmt --all -- --check"
cargo fmt --all -- --check

section "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

section "cargo nextest run --workspace (ITERION_IT_DOCKER=1)"
ITERION_IT_DOCKER=1 cargo nextest run --workspace --profile "${NEXTEST_PROFILE:-ci}"

section "cargo test --workspace --doc"
ITERION_IT_DOCKER=1 cargo test --workspace --doc

section "all checks passed"
