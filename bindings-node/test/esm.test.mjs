// The package works with `import` (the reference is ESM) as with `require`.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import * as esm from '@gotry/tenant-state';
import defaultExport, { deriveLedgerTenantId, InvalidTenantIdError, SqliteLeaseStore, TenantLease } from '@gotry/tenant-state';

const require = createRequire(import.meta.url);
const cjs = require('@gotry/tenant-state');

test('import gives the same names and the same objects as require', () => {
    const named = Object.keys(esm).filter(name => name !== 'default').sort();
    assert.deepEqual(named, Object.keys(cjs).sort());
    for (const name of named) assert.equal(esm[name], cjs[name], name);
    assert.equal(defaultExport, cjs);
});

test('errors keep their classes through the ES module face', async () => {
    const key = new Uint8Array(32).fill(7);
    assert.match(deriveLedgerTenantId(key, 'i', 's'), /^t-[0-9a-f]{32}$/);
    assert.throws(() => deriveLedgerTenantId(key, 'i\uD800', 's'), InvalidTenantIdError);
    const store = new SqliteLeaseStore({ path: join(mkdtempSync(join(tmpdir(), 'gotry-esm-')), 'leases.db') });
    const lease = await TenantLease.acquire({ key: 'k', replicaId: 'r', store, ttlMs: 1_000, marginMs: 100 });
    lease.assertHeld();
    await lease.release();
    store.close();
});
