#!/usr/bin/env bash
# The one test command (README, CI via .ci/run): everything a fresh Debian 12 machine needs, then
# every check the workspace has.
#
#   1. installs what the tests need when it is missing (as root, via apt): the Docker engine from
#      Debian's docker.io package, podman, busybox-static, debootstrap, postgresql, chromium,
#      nodejs, npm and golang-go (the egress matrix's Go client); then playwright-core (pinned,
#      from npm) into target/node for the studio's browser test;
#   2. starts dockerd in the background when no engine answers, and waits for it; likewise podman's
#      Docker-compatible API service (`podman system service`), which the docker/podman driver
#      suite runs against too;
#   2b. starts the PostgreSQL cluster when it does not answer, (re)creates the test role and
#      database, and exports ITERION_IT_POSTGRES_URL for the store's PostgreSQL tests;
#   3. builds the local test images (scripts/build-test-images.sh; cached by tag), the busybox one
#      in podman's storage as well;
#   4. cargo fmt --check, the house rules no compiler checks (scripts/check-architecture.py, after
#      its --self-test shows each rule can fail: no import circles, crates pointing one way, the
#      environment read only at the edge, the engine's rooms importing downwards), cargo
#      clippy -D warnings, the static engine binary
#      (scripts/build-static.sh, exported as ITERION_STATIC_BIN for the container tests), the test
#      suite with cargo-nextest and ITERION_IT_DOCKER=1 (so a missing engine or static binary
#      fails the container tests instead of skipping them), and the doctests (which nextest does
#      not run).
#
# Exits non-zero on the first failure. Safe to run again: installed packages, a running engine and
# existing images are reused, so a warm run spends its time in cargo only.
#
# Environment:
#   ITERION_DOCKERD_LOG      where a dockerd started by this script logs
#                            (default /var/log/iterion-dockerd.log)
#   ITERION_DOCKERD_TIMEOUT  seconds to wait for that dockerd to answer (default 60)
#   ITERION_DOCKERD_FLAGS    extra flags for that dockerd (default none; see below)
#   ITERION_PODMAN_SOCKET    where podman's API service listens (default /run/podman/podman.sock;
#                            exported to the tests as ITERION_IT_PODMAN_HOST — not CONTAINER_HOST,
#                            which would stop the product's docker constructor from probing
#                            its default socket, SANDBOX.md §4.2)
#   ITERION_PODMAN_LOG       where a podman service started by this script logs
#                            (default /var/log/iterion-podman.log)
#   ITERION_IT_POSTGRES_URL  when set, the PostgreSQL database the store tests use as is (nothing
#                            is installed or started); otherwise a local cluster is started and
#                            postgres://iterion_it:iterion_it@127.0.0.1:<port>/iterion_it is
#                            (re)created. Under ITERION_IT_DOCKER=1 the PostgreSQL tests fail,
#                            not skip, without it.
#   NEXTEST_PROFILE          nextest profile (default ci, see .config/nextest.toml)
#
# `scripts/test.sh --setup-only` stops after step 3 and prints the variables the container tests
# read as `export` lines, for a developer shell: eval "$(scripts/test.sh --setup-only)".
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_ROOT
# With --setup-only, stdout is kept for the export lines alone: everything else goes to stderr.
if [[ ${1:-} == --setup-only ]]; then
    exec 3>&1 1>&2
fi
readonly DOCKERD_LOG="${ITERION_DOCKERD_LOG:-/var/log/iterion-dockerd.log}"
readonly DOCKERD_TIMEOUT="${ITERION_DOCKERD_TIMEOUT:-60}"
readonly PODMAN_SOCKET="${ITERION_PODMAN_SOCKET:-/run/podman/podman.sock}"
readonly PODMAN_LOG="${ITERION_PODMAN_LOG:-/var/log/iterion-podman.log}"

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
command -v podman >/dev/null || missing+=(podman)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
command -v debootstrap >/dev/null || missing+=(debootstrap)
# The delegate test image's CLIs come from npm; codex's host sandbox (the delegate host tests)
# needs bubblewrap.
command -v npm >/dev/null || missing+=(npm)
command -v bwrap >/dev/null || missing+=(bubblewrap)
# scripts/check-architecture.py (tomllib: Python 3.11, Debian 12's).
command -v python3 >/dev/null || missing+=(python3)
[[ -n ${ITERION_IT_POSTGRES_URL:-} ]] || command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
# The studio's browser test (crates/cli/tests/suite/studio.rs): Debian's chromium, driven by
# playwright-core under node.
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
# The egress client matrix's Go client (crates/cli/tests/clients/egress_client.go), built static.
command -v go >/dev/null || missing+=(golang-go)
if ((${#missing[@]})); then
    printf 'installing: %s\n' "${missing[*]}" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
else
    echo "docker.io, podman, busybox-static, debootstrap, npm, bubblewrap, postgresql, chromium, node and go already installed" >&2
fi

# ---------------------------------------------------------------------------------------------
section "playwright-core (the studio's browser test)"
# Pinned (1.57 still runs on Debian 12's node 18); into target/node (the test looks there); no
# browser download (playwright-core fetches none; the test launches /usr/bin/chromium). Its npm
# cache is removed after the install.
readonly PLAYWRIGHT_CORE=1.57.0
node_dir="$REPO_ROOT/target/node"
if grep -qs "\"version\": \"$PLAYWRIGHT_CORE\"" "$node_dir/node_modules/playwright-core/package.json"; then
    echo "playwright-core $PLAYWRIGHT_CORE already in $node_dir" >&2
else
    echo "installing playwright-core $PLAYWRIGHT_CORE into $node_dir" >&2
    mkdir -p "$node_dir"
    [[ -f $node_dir/package.json ]] || printf '{"private": true}\n' >"$node_dir/package.json"
    (cd "$node_dir" && npm install --no-audit --no-fund --silent --cache "$node_dir/.npm-cache" \
        "playwright-core@$PLAYWRIGHT_CORE" >&2)
    rm -rf "$node_dir/.npm-cache"
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
    # `cd /` first: a daemon must not keep this checkout as its working directory. A later run in
    # another clone, after this one was deleted, would otherwise meet a service whose children
    # (podman's conmon) fail with "Failed to get working directory".
    (cd / && exec setsid nohup dockerd "${dockerd_flags[@]}" >>"$DOCKERD_LOG" 2>&1 </dev/null) &
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
section "podman API service"
# The docker/podman driver suite (crates/sandbox-docker/tests/suite/docker_driver.rs) runs against
# podman's Docker-compatible API as well as dockerd. Like dockerd, nothing starts it here, so
# start it detached (--time=0: never exit for idleness) and let later runs reuse it.
#
# Found on the CI machine (podman 4.3, rootful, runc, cgroup v1, CNI): containers need explicit
# nofile/nproc ulimits, or runc fails with "error setting rlimits ... operation not permitted"
# (the service asks for the host's maximum and lacks CAP_SYS_RESOURCE); the driver sets both at
# 16384 in its create plan when the engine is podman, so no containers.conf is needed.
podman_answers() { podman --remote --url "unix://$PODMAN_SOCKET" version >/dev/null 2>&1; }
if podman_answers; then
    echo "podman service answers at $PODMAN_SOCKET" >&2
else
    [[ $EUID -eq 0 ]] || die "podman's API service is not answering at $PODMAN_SOCKET, and starting it needs root"
    echo "starting podman system service (socket: $PODMAN_SOCKET, log: $PODMAN_LOG)" >&2
    mkdir -p "$(dirname "$PODMAN_SOCKET")" "$(dirname "$PODMAN_LOG")"
    (cd / && exec setsid nohup podman system service --time=0 "unix://$PODMAN_SOCKET" \
        >>"$PODMAN_LOG" 2>&1 </dev/null) &
    podman_pid=$!
    deadline=$((SECONDS + DOCKERD_TIMEOUT))
    until podman_answers; do
        if ((SECONDS >= deadline)) || [[ ! -r /proc/$podman_pid/status ]] ||
            grep -q '^State:[[:space:]]*Z' "/proc/$podman_pid/status"; then
            echo "--- last lines of $PODMAN_LOG ---" >&2
            tail -n 40 "$PODMAN_LOG" >&2 || true
            die "podman system service did not come up at $PODMAN_SOCKET (see $PODMAN_LOG)"
        fi
        sleep 0.5
    done
    echo "podman service up: $(podman --remote --url "unix://$PODMAN_SOCKET" version --format '{{.Server.Version}}')" >&2
fi
export ITERION_IT_PODMAN_HOST="unix://$PODMAN_SOCKET"

# ---------------------------------------------------------------------------------------------
section "PostgreSQL"
# The store's PostgreSQL backend (crates/store/tests/suite/postgres.rs) runs against a real
# server. Debian's postgresql package creates a cluster but, with no init system here, does not
# start it; start it detached (pg_ctlcluster forks the server) and let later runs reuse it.
if [[ -n ${ITERION_IT_POSTGRES_URL:-} ]]; then
    echo "using ITERION_IT_POSTGRES_URL from the environment" >&2
else
    as_postgres() { as_root runuser -u postgres -- "$@"; }
    # The first cluster (Debian 12: 15/main); create one if the package left none.
    read -r pg_version pg_cluster pg_port _ < <(pg_lsclusters --no-header 2>/dev/null | head -n 1) || true
    if [[ -z ${pg_version:-} ]]; then
        pg_version="$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -n | tail -n 1)"
        [[ -n $pg_version ]] || die "postgresql is installed but no server version is under /usr/lib/postgresql"
        echo "creating PostgreSQL cluster $pg_version/main" >&2
        as_root pg_createcluster "$pg_version" main >/dev/null
        read -r pg_version pg_cluster pg_port _ < <(pg_lsclusters --no-header | head -n 1)
    fi
    if pg_isready -q -h 127.0.0.1 -p "$pg_port"; then
        echo "PostgreSQL $pg_version/$pg_cluster answers on port $pg_port" >&2
    else
        echo "starting PostgreSQL $pg_version/$pg_cluster (port $pg_port)" >&2
        as_root pg_ctlcluster "$pg_version" "$pg_cluster" start
        deadline=$((SECONDS + DOCKERD_TIMEOUT))
        until pg_isready -q -h 127.0.0.1 -p "$pg_port"; do
            if ((SECONDS >= deadline)); then
                tail -n 40 "/var/log/postgresql/postgresql-$pg_version-$pg_cluster.log" >&2 || true
                die "PostgreSQL $pg_version/$pg_cluster did not answer on port $pg_port"
            fi
            sleep 0.2
        done
    fi
    # A login role and a fresh database per run: each test makes its own schema in it, and
    # recreating the database drops the last run's (WITH (FORCE): even if a stray test holds it).
    as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$pg_port" -d postgres <<'SQL'
DO $$BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'iterion_it') THEN
        CREATE ROLE iterion_it LOGIN PASSWORD 'iterion_it';
    END IF;
END$$;
DROP DATABASE IF EXISTS iterion_it WITH (FORCE);
CREATE DATABASE iterion_it OWNER iterion_it;
SQL
    export ITERION_IT_POSTGRES_URL="postgres://iterion_it:iterion_it@127.0.0.1:$pg_port/iterion_it"
fi
echo "ITERION_IT_POSTGRES_URL=${ITERION_IT_POSTGRES_URL%%:*}://… (store tests run against it)" >&2

# ---------------------------------------------------------------------------------------------
section "test images"
as_root "$REPO_ROOT/scripts/build-test-images.sh"

if [[ ${1:-} == --setup-only ]]; then
    section "setup done (--setup-only): the environment the tests read"
    static_bin="$("$REPO_ROOT/scripts/build-static.sh")"
    {
        printf 'export ITERION_IT_DOCKER=1\n'
        printf 'export ITERION_IT_PODMAN_HOST=%q\n' "$ITERION_IT_PODMAN_HOST"
        printf 'export ITERION_IT_POSTGRES_URL=%q\n' "$ITERION_IT_POSTGRES_URL"
        printf 'export ITERION_STATIC_BIN=%q\n' "$static_bin"
    } >&3
    exit 0
fi

# ---------------------------------------------------------------------------------------------
cd "$REPO_ROOT"

section "cargo fmt --all -- --check"
cargo fmt --all -- --check

section "python3 scripts/check-architecture.py (--self-test, then the tree)"
python3 scripts/check-architecture.py --self-test
python3 scripts/check-architecture.py

section "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

section "build the test binaries (cargo nextest run --no-run)"
# Before the static build, so the static twin is not older than target/debug/iterion: a dynamic
# iterion binds its twin only when the twin is at least as new (engine_binary.rs).
cargo nextest run --workspace --profile "${NEXTEST_PROFILE:-ci}" --no-run

section "static iterion (scripts/build-static.sh)"
# The binary the container tests mount at /run/iterion/bin/iterion (SANDBOX.md §8.4): linked
# statically so that it runs in any image, busybox included. Its own target dir (target/static/)
# and target-scoped rustflags leave the build above untouched; incremental, so seconds when warm.
ITERION_STATIC_BIN="$("$REPO_ROOT/scripts/build-static.sh")"
export ITERION_STATIC_BIN
echo "ITERION_STATIC_BIN=$ITERION_STATIC_BIN" >&2

section "cargo nextest run --workspace (ITERION_IT_DOCKER=1)"
ITERION_IT_DOCKER=1 cargo nextest run --workspace --profile "${NEXTEST_PROFILE:-ci}"

section "cargo test --workspace --doc"
ITERION_IT_DOCKER=1 cargo test --workspace --doc

section "all checks passed"
