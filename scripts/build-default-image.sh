#!/usr/bin/env bash
# Build a usable default sandbox image locally, with no registry at all.
#
# `sandbox: auto` (and every workflow without a sandbox: block, since the global default is auto)
# runs in the default image, ghcr.io/socialgouv/iterion-sandbox-slim:<tag> (SANDBOX.md §2.4). When
# that image can be neither found locally nor pulled, `iterion run` fails and points here. This
# script assembles an equivalent image from Debian packages and loads it with `<engine> import`:
#
#   debootstrap --variant=minbase bookworm + bash coreutils tar curl git ca-certificates jq,
#   a uid/gid 1000 `user`, PATH and LANG set, and the delegate backends' CLIs in /usr/local/bin:
#   `claude` (@anthropic-ai/claude-code) and `codex` (@openai/codex), their native binaries from
#   the npm registry at the versions pinned below (--no-delegates leaves them out).
#
# Tags (all the same image):
#   ghcr.io/socialgouv/iterion-sandbox-slim:edge      what a debug build (cargo run) looks for
#   ghcr.io/socialgouv/iterion-sandbox-slim:v<ver>    what a release build looks for
#   ghcr.io/socialgouv/iterion-sandbox-slim:latest    the built-in fallback
#   iterion-local/sandbox:latest                      a neutral name for --sandbox-default-image
# so `iterion run` finds it by default; or pass it explicitly:
#   iterion run --sandbox-default-image iterion-local/sandbox:latest FILE
#   ITERION_SANDBOX_DEFAULT_IMAGE=iterion-local/sandbox:latest iterion run FILE
# (--no-default-tags skips the ghcr.io names if you would rather not shadow the published image.)
#
# The rootfs is cached as a tarball under $ITERION_IMAGE_CACHE (default
# /var/cache/iterion-images), keyed by a hash of its recipe, so a rebuild re-imports in seconds.
#
# Usage: scripts/build-default-image.sh [--engine docker|podman] [--force] [--no-default-tags]
#                                       [--no-delegates]
# Needs: root (debootstrap, chroot), debootstrap, and a running engine. Installs debootstrap with
# apt when it is missing.
#
# Environment:
#   ITERION_IMAGE_CACHE     cache directory (default /var/cache/iterion-images)
#   ITERION_DEBIAN_MIRROR   Debian mirror (default: the one apt uses, else deb.debian.org)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_ROOT
readonly SUITE="bookworm"
readonly INCLUDE="bash,coreutils,tar,curl,git,ca-certificates,jq"
readonly IMAGE_PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
readonly CACHE_DIR="${ITERION_IMAGE_CACHE:-/var/cache/iterion-images}"
readonly REPOSITORY="ghcr.io/socialgouv/iterion-sandbox-slim"
readonly LOCAL_TAG="iterion-local/sandbox:latest"
readonly RECIPE_VERSION="1"
# The delegate CLIs (keep in step with scripts/build-test-images.sh).
readonly CLAUDE_CODE_VERSION="2.1.328"
readonly CODEX_VERSION="0.169.0"

engine=docker
force=0
default_tags=1
delegates=1
while (($#)); do
    case "$1" in
        --engine)
            engine="${2:-}"
            shift
            ;;
        --force) force=1 ;;
        --no-default-tags) default_tags=0 ;;
        --no-delegates) delegates=0 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "build-default-image: unknown argument: $1 (see --help)" >&2
            exit 2
            ;;
    esac
    shift
done
case "$engine" in docker | podman) ;; *)
    echo "build-default-image: --engine must be docker or podman" >&2
    exit 2
    ;;
esac

log() { printf '[build-default-image] %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

[[ $EUID -eq 0 ]] || die "needs root (debootstrap and chroot); run it with sudo"
"$engine" info >/dev/null 2>&1 || die "$engine does not answer; start it first (scripts/test.sh starts dockerd)"

version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml" | head -n1)"
tags=("$LOCAL_TAG")
if ((default_tags)); then
    tags+=("$REPOSITORY:edge" "$REPOSITORY:v$version" "$REPOSITORY:latest")
fi

# What the image says it carries: the delegate CLIs' versions, or "none".
want_delegates="none"
((delegates == 0)) || want_delegates="claude-$CLAUDE_CODE_VERSION-codex-$CODEX_VERSION"
have_delegates="$("$engine" image inspect -f '{{ index .Config.Labels "iterion.io/delegates" }}' "$LOCAL_TAG" 2>/dev/null || true)"

if ((force == 0)) && "$engine" image inspect "$LOCAL_TAG" >/dev/null 2>&1 &&
    [[ "$have_delegates" == "$want_delegates" ]]; then
    log "$LOCAL_TAG present in $engine; tagging (use --force to rebuild)"
    for tag in "${tags[@]:1}"; do "$engine" tag "$LOCAL_TAG" "$tag"; done
    printf '%s\n' "${tags[@]}"
    exit 0
fi

if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

# shellcheck source=lib/debian-mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-mirror.sh"
mirror="$(debian_mirror "$SUITE")"

mkdir -p "$CACHE_DIR"
key="$(printf '%s\n' "$RECIPE_VERSION" "$SUITE" "$INCLUDE" "$mirror" "$(dpkg --print-architecture)" |
    sha256sum | cut -c1-16)"
rootfs_tar="$CACHE_DIR/sandbox-$SUITE-$key.rootfs.tar"

if [[ ! -s "$rootfs_tar" ]]; then
    work="$(mktemp -d "$CACHE_DIR/work.XXXXXX")"
    trap 'rm -rf --one-file-system "$work"' EXIT
    root="$work/rootfs"
    log "debootstrap $SUITE from $mirror (first build; cached as $rootfs_tar)"
    if ! debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$root" "$mirror" \
        >"$work/debootstrap.log" 2>&1; then
        tail -n 40 "$work/debootstrap.log" >&2 || true
        die "debootstrap failed (mirror $mirror; set ITERION_DEBIAN_MIRROR to override)"
    fi
    chroot "$root" /usr/sbin/groupadd --gid 1000 user
    chroot "$root" /usr/sbin/useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash user
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb \
        "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
    : >"$root/etc/resolv.conf"
    rm -f "$root/etc/hostname"
    tar --numeric-owner --one-file-system -C "$root" -cf "$rootfs_tar.partial" .
    mv "$rootfs_tar.partial" "$rootfs_tar"
else
    log "reusing cached rootfs $rootfs_tar"
fi

# The delegate CLIs go into the tarball's copy, so the import stays one step and the base rootfs
# cache stays CLI-free (a version bump re-copies two files, not a debootstrap).
image_tar="$rootfs_tar"
if ((delegates)); then
    command -v npm >/dev/null || die "npm not found: install nodejs and npm, or pass --no-delegates"
    npm_dir="$CACHE_DIR/npm-claude-$CLAUDE_CODE_VERSION-codex-$CODEX_VERSION"
    claude_bin="$npm_dir/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
    codex_bin="$npm_dir/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    if [[ ! -x "$claude_bin" || ! -x "$codex_bin" ]]; then
        log "npm install @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION @openai/codex@$CODEX_VERSION"
        mkdir -p "$npm_dir"
        (cd "$npm_dir" && npm install --no-audit --no-fund --loglevel=error \
            "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2) ||
            die "npm install of the delegate CLIs failed (or pass --no-delegates)"
    fi
    [[ -x "$claude_bin" && -x "$codex_bin" ]] || die "the delegate CLIs are missing after npm install"
    image_tar="$CACHE_DIR/sandbox-$SUITE-$key-claude-$CLAUDE_CODE_VERSION-codex-$CODEX_VERSION.tar"
    if [[ ! -s "$image_tar" ]]; then
        stage="$(mktemp -d "$CACHE_DIR/stage.XXXXXX")"
        mkdir -p "$stage/usr/local/bin"
        cp "$claude_bin" "$stage/usr/local/bin/claude"
        cp "$codex_bin" "$stage/usr/local/bin/codex"
        chmod 0755 "$stage/usr/local/bin/claude" "$stage/usr/local/bin/codex"
        cp "$rootfs_tar" "$image_tar.partial"
        tar --numeric-owner --owner=0 --group=0 -C "$stage" -rf "$image_tar.partial" \
            ./usr/local/bin/claude ./usr/local/bin/codex
        rm -rf --one-file-system "$stage"
        mv "$image_tar.partial" "$image_tar"
    fi
fi

log "importing into $engine as $LOCAL_TAG"
"$engine" import \
    --change "ENV PATH=$IMAGE_PATH" \
    --change "ENV LANG=C.UTF-8" \
    --change 'CMD ["/bin/bash"]' \
    --change "LABEL iterion.io/image=default-sandbox-local" \
    --change "LABEL iterion.io/delegates=$want_delegates" \
    --message "iterion default sandbox image: debootstrap $SUITE minbase" \
    "$image_tar" "$LOCAL_TAG" >/dev/null
for tag in "${tags[@]:1}"; do "$engine" tag "$LOCAL_TAG" "$tag"; done
log "done; \`iterion run\` now finds it by default (tags below)"
printf '%s\n' "${tags[@]}"
