# Sourced by scripts/build-test-images.sh and scripts/build-default-image.sh (not run alone).
# shellcheck shell=bash

# debian_mirror SUITE: the Debian mirror apt already uses for SUITE (deb822 .sources or one-line
# .list), else deb.debian.org; ITERION_DEBIAN_MIRROR overrides it.
debian_mirror() {
    local suite="$1"
    if [[ -n "${ITERION_DEBIAN_MIRROR:-}" ]]; then
        printf '%s\n' "$ITERION_DEBIAN_MIRROR"
        return
    fi
    local files=() f
    for f in /etc/apt/sources.list.d/*.sources; do [[ -f "$f" ]] && files+=("$f"); done
    if ((${#files[@]})); then
        # First stanza whose Suites include the plain suite (not -security/-updates).
        local uri
        uri="$(awk -v suite="$suite" '
            BEGIN { RS = ""; FS = "\n" }
            {
                uris = ""; ok = 0
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uris = u[1] }
                    if ($i ~ /^Suites:/) {
                        n = split($i, s, /[ \t]+/)
                        for (j = 2; j <= n; j++) if (s[j] == suite) ok = 1
                    }
                }
                if (ok && uris != "") { print uris; exit }
            }' "${files[@]}")"
        if [[ -n "$uri" ]]; then
            printf '%s\n' "$uri"
            return
        fi
    fi
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -f "$f" ]] || continue
        local line
        line="$(awk -v suite="$suite" '
            $1 == "deb" {
                i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit }
            }' "$f")"
        if [[ -n "$line" ]]; then
            printf '%s\n' "$line"
            return
        fi
    done
    printf '%s\n' "http://deb.debian.org/debian"
}
