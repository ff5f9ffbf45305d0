#!/usr/bin/env bash
# Build the local container images the integration tests run, without any registry.
#
# No registry is reachable from CI, so nothing is pulled: each image is a rootfs assembled on this
# machine and loaded with `docker import`. The tags are a contract (iterion-test-support exports
# them as BUSYBOX_IMAGE and DEBIAN_IMAGE); keep them stable:
#
#   iterion-test/busybox:1          busybox-static + applet links, /tmp, root and uid 1000 `user`
#   iterion-test/debian:bookworm    debootstrap minbase + bash coreutils curl git ca-certificates jq,
#                                   uid 1000 `user`
#   iterion-test/delegates:claude-<v>-codex-<v>
#                                   the debian image + the `claude` and `codex` CLIs (their native
#                                   binaries from npm, pinned below) in /usr/local/bin; the tag
#                                   names the versions, so a bump builds a new image
#
# When podman is installed, the busybox image is also imported into podman's storage (from the
# same rootfs tarball), so the docker/podman driver suite runs the same image on both engines;
# podman names it localhost/iterion-test/busybox:1, which its Docker-compatible API finds under
# the short name.
#
# Each image is cached by tag, per engine: if the tag exists, it is not rebuilt (pass --force to
# rebuild).
# The Debian rootfs is also cached as a tarball under $ITERION_TEST_IMAGE_CACHE (default
# /var/cache/iterion-test-images), keyed by a hash of its recipe, so `docker rmi` followed by a
# rebuild re-imports it in seconds instead of running debootstrap against the network again.
#
# Needs: root, a running engine (`docker info` works), busybox-static and debootstrap installed;
# podman is optional. scripts/test.sh takes care of all of them.
#
# The delegate CLIs come from the npm registry (`npm install`, cached under the cache directory);
# npm must be installed.
#
# Environment:
#   ITERION_TEST_IMAGE_CACHE   cache directory (default /var/cache/iterion-test-images)
#   ITERION_DEBIAN_MIRROR      Debian mirror for debootstrap (default: the one apt already uses)
set -euo pipefail

readonly BUSYBOX_TAG="iterion-test/busybox:1"
readonly DEBIAN_TAG="iterion-test/debian:bookworm"
# Keep in step with iterion-test-support's DELEGATES_IMAGE.
readonly CLAUDE_CODE_VERSION="2.1.328"
readonly CODEX_VERSION="0.169.0"
readonly DELEGATES_TAG="iterion-test/delegates:claude-$CLAUDE_CODE_VERSION-codex-$CODEX_VERSION"
readonly LABEL="iterion.io/test-image=1"
readonly CACHE_DIR="${ITERION_TEST_IMAGE_CACHE:-/var/cache/iterion-test-images}"
readonly DEBIAN_SUITE="bookworm"
readonly DEBIAN_INCLUDE="bash,coreutils,curl,git,ca-certificates,jq"
readonly IMAGE_PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Bump when the recipe below changes in a way the hash of its inputs cannot see.
readonly RECIPE_VERSION="1"

force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "build-test-images: unknown argument: $arg" >&2
            exit 2
            ;;
    esac
done

log() { printf '[build-test-images] %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# Stage rootfs trees on the same filesystem as the cache, never in a tmpfs, and clean up on exit.
mkdir -p "$CACHE_DIR"
WORK="$(mktemp -d "$CACHE_DIR/work.XXXXXX")"
cleanup() { rm -rf --one-file-system "$WORK"; }
trap cleanup EXIT

# Write /etc/passwd and /etc/group for a root-plus-`user` (uid/gid 1000) system.
write_users() {
    local root="$1" shell="$2"
    mkdir -p "$root/etc" "$root/root" "$root/home/user"
    cat >"$root/etc/passwd" <<EOF
root:x:0:0:root:/root:$shell
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
user:x:1000:1000:user:/home/user:$shell
EOF
    cat >"$root/etc/group" <<EOF
root:x:0:
nogroup:x:65534:
user:x:1000:
EOF
    chmod 0700 "$root/root"
    chown 1000:1000 "$root/home/user"
}

# The busybox rootfs as a tarball in $WORK (built once per script run, for either engine).
busybox_rootfs_tar() {
    local busybox=/bin/busybox
    [[ -x "$busybox" ]] || die "$busybox not found: install busybox-static"
    # Refuse a dynamically linked busybox: the image has no libc.
    if ! "$busybox" --list >/dev/null 2>&1 || ldd "$busybox" >/dev/null 2>&1; then
        die "$busybox is not a static busybox: install busybox-static"
    fi

    local root="$WORK/busybox-rootfs"
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,proc,sys,dev,root,home}
    chmod 1777 "$root/tmp"
    cp "$busybox" "$root/bin/busybox"

    # `busybox --install -s` semantics: one symlink per applet at its canonical path.
    local applet
    while IFS= read -r applet; do
        [[ -n "$applet" && "$applet" != "bin/busybox" ]] || continue
        mkdir -p "$root/$(dirname "$applet")"
        ln -sf /bin/busybox "$root/$applet"
    done < <("$busybox" --list-full)
    [[ -L "$root/bin/sh" ]] || die "busybox --list-full produced no bin/sh"

    write_users "$root" /bin/sh
    tar --numeric-owner -C "$root" -cf "$WORK/busybox.rootfs.tar" .
}

# Imports the busybox rootfs with `$1 import` (docker or podman; the same flags for both).
import_busybox() {
    local engine="$1"
    [[ -s "$WORK/busybox.rootfs.tar" ]] || busybox_rootfs_tar
    log "importing $BUSYBOX_TAG into $engine"
    "$engine" import \
        --change "LABEL $LABEL" \
        --change "ENV PATH=$IMAGE_PATH" \
        --change 'CMD ["/bin/sh"]' \
        --message "iterion test image: busybox-static rootfs" \
        "$WORK/busybox.rootfs.tar" "$BUSYBOX_TAG" >/dev/null
}

build_busybox() { import_busybox docker; }

# shellcheck source=lib/debian-mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-mirror.sh"

build_debian() {
    command -v debootstrap >/dev/null || die "debootstrap not found: install debootstrap"
    local mirror key rootfs_tar
    mirror="$(debian_mirror "$DEBIAN_SUITE")"
    key="$(printf '%s\n' "$RECIPE_VERSION" "$DEBIAN_SUITE" "$DEBIAN_INCLUDE" "$mirror" "$(dpkg --print-architecture)" |
        sha256sum | cut -c1-16)"
    rootfs_tar="$CACHE_DIR/debian-$DEBIAN_SUITE-$key.rootfs.tar"

    if [[ ! -s "$rootfs_tar" ]]; then
        log "debootstrap $DEBIAN_SUITE from $mirror (first build; cached as $rootfs_tar)"
        local root="$WORK/debian-rootfs"
        if ! debootstrap --variant=minbase --include="$DEBIAN_INCLUDE" \
            "$DEBIAN_SUITE" "$root" "$mirror" >"$WORK/debootstrap.log" 2>&1; then
            tail -n 40 "$WORK/debootstrap.log" >&2 || true
            tail -n 40 "$root/debootstrap/debootstrap.log" >&2 2>/dev/null || true
            die "debootstrap failed (mirror $mirror; set ITERION_DEBIAN_MIRROR to override)"
        fi

        # uid 1000 user, made with the image's own tools so shadow files stay consistent.
        chroot "$root" /usr/sbin/groupadd --gid 1000 user
        chroot "$root" /usr/sbin/useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash user

        # Slim the image: apt lists and caches are not needed by the tests.
        rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb \
            "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
        # debootstrap copies the host's resolv.conf/hostname; the engine provides its own.
        : >"$root/etc/resolv.conf"
        rm -f "$root/etc/hostname"

        tar --numeric-owner --one-file-system -C "$root" -cf "$rootfs_tar.partial" .
        mv "$rootfs_tar.partial" "$rootfs_tar"
    else
        log "reusing cached rootfs $rootfs_tar"
    fi

    log "importing $DEBIAN_TAG"
    docker import \
        --change "LABEL $LABEL" \
        --change "ENV PATH=$IMAGE_PATH" \
        --change "ENV LANG=C.UTF-8" \
        --change 'CMD ["/bin/bash"]' \
        --message "iterion test image: debootstrap $DEBIAN_SUITE minbase" \
        "$rootfs_tar" "$DEBIAN_TAG" >/dev/null
}

# The two CLIs' native binaries, installed from npm into the cache (once per version pair).
delegate_clis() {
    command -v npm >/dev/null || die "npm not found: install nodejs and npm (the delegate image needs the CLIs from npm)"
    local dir="$CACHE_DIR/npm-claude-$CLAUDE_CODE_VERSION-codex-$CODEX_VERSION"
    if [[ ! -x "$dir/node_modules/@anthropic-ai/claude-code-linux-x64/claude" ]]; then
        log "npm install @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION @openai/codex@$CODEX_VERSION"
        mkdir -p "$dir"
        (cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
            "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2) ||
            die "npm install of the delegate CLIs failed"
    fi
    CLAUDE_BIN="$dir/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
    CODEX_BIN="$dir/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    [[ -x "$CLAUDE_BIN" ]] || die "$CLAUDE_BIN missing after npm install"
    [[ -x "$CODEX_BIN" ]] || die "$CODEX_BIN missing after npm install"
}

# The debian image plus both CLIs, assembled with create/cp/commit (no build, no registry).
build_delegates() {
    have_image "$DEBIAN_TAG" || die "$DEBIAN_TAG is needed first"
    delegate_clis
    local box
    box="$(docker create --label "$LABEL" "$DEBIAN_TAG" true)"
    docker cp "$CLAUDE_BIN" "$box:/usr/local/bin/claude" &&
        docker cp "$CODEX_BIN" "$box:/usr/local/bin/codex" &&
        docker commit \
            --change "LABEL $LABEL" \
            --change "ENV PATH=$IMAGE_PATH" \
            --change "ENV LANG=C.UTF-8" \
            --change 'CMD ["/bin/bash"]' \
            --message "iterion test image: debian + claude $CLAUDE_CODE_VERSION + codex $CODEX_VERSION" \
            "$box" "$DELEGATES_TAG" >/dev/null
    local rc=$?
    docker rm -f "$box" >/dev/null
    ((rc == 0)) || die "assembling $DELEGATES_TAG failed"
    docker run --rm "$DELEGATES_TAG" sh -c 'claude --version && codex --version' >&2 ||
        die "$DELEGATES_TAG: the CLIs do not run"
}

docker info >/dev/null 2>&1 || die "no container engine answers (docker info fails); run scripts/test.sh"

for tag in "$BUSYBOX_TAG" "$DEBIAN_TAG" "$DELEGATES_TAG"; do
    if ((force == 0)) && have_image "$tag"; then
        log "$tag present, skipping"
        continue
    fi
    start=$SECONDS
    case "$tag" in
        "$BUSYBOX_TAG") build_busybox ;;
        "$DEBIAN_TAG") build_debian ;;
        "$DELEGATES_TAG") build_delegates ;;
    esac
    log "built $tag in $((SECONDS - start))s"
done

# podman: the busybox image only (the driver suite's image), from its own storage.
if command -v podman >/dev/null; then
    if ((force == 0)) && podman image exists "$BUSYBOX_TAG" 2>/dev/null; then
        log "$BUSYBOX_TAG present in podman, skipping"
    else
        start=$SECONDS
        ((force == 0)) || podman rmi --force "$BUSYBOX_TAG" >/dev/null 2>&1 || true
        import_busybox podman
        log "built $BUSYBOX_TAG for podman in $((SECONDS - start))s"
    fi
else
    log "podman not installed: skipping its copy of $BUSYBOX_TAG"
fi
