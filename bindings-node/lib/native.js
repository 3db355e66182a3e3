'use strict';
// Which native build to load. A release installs the addon as a package of its own per
// platform (npm picks the one whose `os`, `cpu` and `libc` match, from the main package's
// optionalDependencies), so no one needs a compiler where the package is used. In this
// repository, `npm run build` writes the addon next to package.json instead. When neither is
// there, one error names the platform and what was tried, not a bare MODULE_NOT_FOUND.

const path = require('node:path');
const { platformName } = require('./platform');

/** The module, or undefined when `specifier` itself is not installed (any other failure throws). */
function tryRequire(specifier) {
    try {
        return require(specifier);
    } catch (error) {
        if (error?.code === 'MODULE_NOT_FOUND' && String(error.message).includes(specifier)) return undefined;
        throw error;
    }
}

function load() {
    const name = platformName();
    const packageName = `@gotry/tenant-state-${name}`;
    const localBuild = path.join(__dirname, '..', 'gotry-tenant-state.node');
    const native = tryRequire(packageName) ?? tryRequire(localBuild);
    if (native !== undefined) return native;
    throw new Error(
        `@gotry/tenant-state has no native build for ${name}: the package ${packageName} is not ` +
            `installed (npm installs it with @gotry/tenant-state where a build for ${name} is ` +
            `published; reinstall without --omit=optional or --no-optional), and no local build ` +
            `is at ${localBuild} (build one from source with \`npm run build\`, which needs Rust)`,
    );
}

module.exports = load();
