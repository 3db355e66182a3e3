// A CommonJS project that installed the npm tarballs, requiring the package by name.
// Usage: node smoke.cjs VECTORS_JSON STATE_DIR EXPECTED_VERSION
'use strict';
require('./checks.cjs')(require('@gotry/tenant-state'), 'commonjs', process.argv.slice(2)).catch((error) => {
    console.error(error);
    process.exit(1);
});
