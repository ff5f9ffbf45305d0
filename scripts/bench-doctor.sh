#!/usr/bin/env bash
# `iterion sandbox doctor --strict --json` wall time (BENCHMARKS.md "Doctor"), side by side in one
# run: a healthy host (the local engine, an image present), a dead engine (DOCKER_HOST on a socket
# that does not exist) and a hung engine (a socket that accepts and never answers, with
# ITERION_SANDBOX_DOCTOR_TIMEOUT=1s), plus `docker version` as the floor of one engine round trip.
# Interleaved (A B C D, A B C D, …) so that load on a shared machine hits every case alike.
#
#   scripts/bench-doctor.sh [RUNS]      RUNS per case, default 10 (5 for the hung case)
#
# Needs a running Docker engine and the test images (scripts/build-test-images.sh). Builds the
# release binary first. Prints one line per case: median, min and max wall time in milliseconds.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${1:-10}"
IMAGE="iterion-test/busybox:1"

cargo build -q --release -p iterion --manifest-path "$REPO_ROOT/Cargo.toml"
target_dir="$(cargo metadata -q --format-version 1 --no-deps --manifest-path "$REPO_ROOT/Cargo.toml" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
BIN="$target_dir/release/iterion"

work="$(mktemp -d)"
hung_pid=""
cleanup() {
    [[ -n $hung_pid ]] && kill "$hung_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
git -C "$work" init -q

# The hung engine: accepts every connection and never answers (stops by itself after 10 min).
python3 - "$work/hung.sock" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(128)
s.settimeout(1)
held, end = [], time.time() + 600
while time.time() < end:
    try:
        held.append(s.accept()[0])
    except socket.timeout:
        pass
PY
hung_pid=$!
for _ in $(seq 50); do [[ -S $work/hung.sock ]] && break; sleep 0.1; done

ms() { echo $(($(date +%s%N) / 1000000)); }
declare -A samples
run_case() {
    local name=$1
    shift
    local t0 t1
    t0=$(ms)
    (cd "$work" && env "$@" >/dev/null 2>&1) || true
    t1=$(ms)
    samples[$name]+="$((t1 - t0)) "
}

doctor=("$BIN" sandbox doctor --strict --json --sandbox-default-image "$IMAGE")
for i in $(seq "$RUNS"); do
    run_case "docker version (floor)" docker version
    run_case "doctor --strict, healthy" "${doctor[@]}"
    run_case "doctor --strict, dead engine" DOCKER_HOST=unix:///nonexistent/docker.sock "${doctor[@]}"
    if ((i <= (RUNS + 1) / 2)); then
        run_case "doctor --strict, hung engine, timeout 1s" DOCKER_HOST="unix://$work/hung.sock" \
            ITERION_SANDBOX_DOCTOR_TIMEOUT=1s "${doctor[@]}"
    fi
done

printf '%-45s %8s %8s %8s %5s\n' case median min max runs
for name in "docker version (floor)" "doctor --strict, healthy" "doctor --strict, dead engine" \
    "doctor --strict, hung engine, timeout 1s"; do
    python3 - "$name" ${samples[$name]} <<'PY'
import statistics, sys
name, xs = sys.argv[1], sorted(int(x) for x in sys.argv[2:])
print(f"{name:<45} {statistics.median(xs):>8.0f} {xs[0]:>8} {xs[-1]:>8} {len(xs):>5}")
PY
done
