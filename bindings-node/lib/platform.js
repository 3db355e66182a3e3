'use strict';
// The name of the platform a native build is for, as the platform packages spell it.

/** `linux-x64-gnu`, `darwin-arm64`, ...: napi-rs's names. */
function platformName() {
    const { platform, arch } = process;
    if (platform !== 'linux') return `${platform}-${arch}`;
    // glibc reports its version to Node's diagnostic report; musl does not.
    const header = process.report?.getReport?.().header;
    return `${platform}-${arch}-${header?.glibcVersionRuntime ? 'gnu' : 'musl'}`;
}

module.exports = { platformName };
