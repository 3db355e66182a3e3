#!/usr/bin/env bash
# Prints the path of a promtool executable for the metrics tests' `promtool check metrics`
# lint: the one on PATH, or the one of Debian's `prometheus` package unpacked into
# target/promtool the first time (`apt-get download` and `dpkg -x`: no server is installed or
# started, and nothing outside target/ is touched; one download of about 20 MB, seconds).
# Prints nothing, saying why on stderr, when neither can be had: the tests that lint then
# say SKIPPED with their reason.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'promtool.sh: %s\n' "$*" >&2; }

if found="$(command -v promtool)"; then
    printf '%s\n' "$found"
    exit 0
fi
dir=target/promtool
tool="$PWD/$dir/usr/bin/promtool"
if [[ ! -x "$tool" ]]; then
    if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
        say "no promtool on PATH and no apt-get/dpkg to fetch Debian's: the promtool lints are SKIPPED"
        exit 0
    fi
    say "unpacking Debian's prometheus package (for promtool) into $dir"
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    download() { (cd "$dir.tmp" && apt-get download -q prometheus >/dev/null 2>&1); }
    # A fresh machine's package lists may be missing or stale: read them once and try again.
    if ! download; then
        sudo=()
        [[ "$(id -u)" == 0 ]] || sudo=(sudo -n)
        "${sudo[@]}" apt-get update -q >/dev/null 2>&1 || true
        download || { say "apt-get download prometheus failed: the promtool lints are SKIPPED"; rm -rf "$dir.tmp"; exit 0; }
    fi
    dpkg -x "$dir.tmp"/prometheus_*.deb "$dir.tmp/root"
    rm -rf "$dir"
    mv "$dir.tmp/root" "$dir"
    rm -rf "$dir.tmp"
fi
if ! "$tool" --version >/dev/null 2>&1; then
    say "$tool does not run: the promtool lints are SKIPPED"
    exit 0
fi
printf '%s\n' "$tool"
