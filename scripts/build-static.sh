#!/usr/bin/env bash
# Builds the statically linked `iterion` that goes into containers (SANDBOX.md §8.4, §4.6).
#
# Why static: the engine bind-mounts its own binary read-only at /run/iterion/bin/iterion in every
# docker/podman sandbox and runs `iterion __egress-bridge` (and the probe, and the claw runner) in
# there. The image is the workflow's choice: busybox, alpine (musl), distroless, or a Debian older
# than the host. A glibc-dynamic binary needs the image's ld-linux and a libc at least as new as
# the build host's, so it only runs in some of them. With `-C target-feature=+crt-static` rustc
# links glibc statically (a static-pie): no interpreter, no shared libraries, so it runs in any
# Linux image of the same architecture, including ones without any libc.
#
# Scope: the rustflags apply only to this build. `--target x86_64-unknown-linux-gnu` plus a
# `target.<triple>.rustflags` config keeps them off build scripts and proc-macros (which must stay
# dynamic), and the separate target dir (target/static/) keeps the normal workspace build and its
# cache untouched. The build is incremental: a second run with nothing changed takes seconds.
#
# Usage: scripts/build-static.sh [--release]
#   prints the binary's absolute path on stdout (nothing else), logs to stderr:
#     target/static/x86_64-unknown-linux-gnu/debug/iterion     (default: the tests use it)
#     target/static/x86_64-unknown-linux-gnu/release/iterion   (--release: what to ship / ITERION_BIN)
# Exits non-zero when the build fails or the result is not a static executable.
#
# Caveat of static glibc: NSS (getpwnam, and getaddrinfo through nsswitch plugins) would dlopen
# host-incompatible modules. iterion's in-container commands do not resolve names or users (the
# bridge connects to 127.0.0.1 and to Unix sockets only), so this does not bite; don't add such
# calls to in-container code paths.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_ROOT
readonly TRIPLE=x86_64-unknown-linux-gnu
readonly TARGET_DIR="$REPO_ROOT/target/static"

profile=debug
cargo_profile=()
case "${1:-}" in
    "") ;;
    --release)
        profile=release
        cargo_profile=(--release)
        ;;
    *)
        echo "usage: $0 [--release]" >&2
        exit 2
        ;;
esac

[[ "$(uname -m)" == x86_64 ]] || {
    echo "build-static.sh: only x86_64 hosts are supported (host: $(uname -m))" >&2
    exit 1
}

cd "$REPO_ROOT"
# stdout of cargo goes to stderr: our stdout is the path only.
cargo build -p iterion --bin iterion --locked "${cargo_profile[@]}" \
    --target "$TRIPLE" --target-dir "$TARGET_DIR" \
    --config "target.$TRIPLE.rustflags=['-C', 'target-feature=+crt-static']" >&2

bin="$TARGET_DIR/$TRIPLE/$profile/iterion"
[[ -x "$bin" ]] || {
    echo "build-static.sh: expected binary missing: $bin" >&2
    exit 1
}

# Verify: an ELF with no program interpreter and no NEEDED libraries. `file` says
# "static-pie linked" (or "statically linked"); ldd says "not a dynamic executable" or
# "statically linked" depending on its version, so read the ELF headers instead when available.
if command -v readelf >/dev/null; then
    if readelf -l "$bin" | grep -q 'INTERP'; then
        echo "build-static.sh: $bin has a program interpreter: not static" >&2
        exit 1
    fi
    if readelf -d "$bin" | grep -q '(NEEDED)'; then
        echo "build-static.sh: $bin needs shared libraries: not static" >&2
        readelf -d "$bin" | grep '(NEEDED)' >&2
        exit 1
    fi
elif command -v file >/dev/null; then
    file -L "$bin" | grep -Eq 'static(-pie| ) ?linked|statically linked' || {
        echo "build-static.sh: $bin is not statically linked: $(file -L "$bin")" >&2
        exit 1
    }
else
    echo "build-static.sh: neither readelf nor file found; cannot verify $bin is static" >&2
    exit 1
fi
command -v file >/dev/null && echo "static binary: $(file -L "$bin")" >&2
# Cargo has just judged the static build up to date with the sources; say so in its mtime too.
# When cargo keeps it as is (nothing changed), a later relink of the dynamic target/debug/iterion
# (another feature set) would otherwise leave the twin looking older than it, and the engine
# (engine_binary.rs) refuses a stale-looking twin.
touch "$bin"

printf '%s\n' "$bin"
