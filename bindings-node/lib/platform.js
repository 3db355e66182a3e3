'use strict';
// The name of the platform a native build is for, as the platform packages spell it.
const fs = require('node:fs');

/**
 * Whether this Linux runs on musl. `ldd` is a script of the C library's own on both, and
 * reading it costs a fraction of a millisecond, where Node's diagnostic report (which tells
 * glibc by its version, musl by nothing) costs several: loading the package pays for it.
 */
function isMusl() {
    try {
        return fs.readFileSync('/usr/bin/ldd', 'latin1').includes('musl');
    } catch {
        const header = process.report?.getReport?.().header;
        return !header?.glibcVersionRuntime;
    }
}

/** `linux-x64-gnu`, `darwin-arm64`, ...: napi-rs's names. */
function platformName() {
    const { platform, arch } = process;
    if (platform !== 'linux') return `${platform}-${arch}`;
    return `${platform}-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
}

module.exports = { platformName };
