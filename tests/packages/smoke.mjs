// An ES module project: the same checks on the package's named exports (index.mjs).
// Usage: node smoke.mjs VECTORS_JSON STATE_DIR EXPECTED_VERSION
import * as named from '@gotry/tenant-state';
import check from './checks.cjs';

await check(named, 'esm', process.argv.slice(2));
