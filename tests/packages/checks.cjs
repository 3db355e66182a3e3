// What both smoke programs check, given the package as each kind of project sees it: the
// shared id vectors, one lease taken, renewed and released on a file store, the version.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

module.exports = async function check(pkg, label, [vectorsPath, stateDir, expectedVersion]) {
    assert.equal(pkg.version(), expectedVersion);
    const { derive } = JSON.parse(fs.readFileSync(vectorsPath, 'utf8'));
    for (const v of derive) {
        const run = () => pkg.deriveLedgerTenantId(Buffer.from(v.key_hex, 'hex'), v.issuer, v.subject);
        if (v.expect.error) assert.throws(run, (e) => e instanceof pkg.TenantStateError && e.code === v.expect.error, v.note);
        else assert.equal(run(), v.expect.ledger_tenant_id, v.note);
    }
    const store = new pkg.SqliteLeaseStore({ path: path.join(stateDir, `leases-${label}.db`) });
    const key = pkg.leaseKeyFor('acme', derive[0].expect.ledger_tenant_id);
    const lease = await pkg.TenantLease.acquire({ key, replicaId: label, store, ttlMs: 30_000, marginMs: 1_000 });
    lease.assertHeld();
    await lease.renew();
    await lease.release();
    const ops = store.history(key).map((entry) => entry.op);
    assert.deepEqual(ops, ['acquire', 'renew', 'release']);
    store.close();
    console.log(`${label}: ${derive.length} vectors, ${ops.join('/')} at epoch ${lease.epoch}, version ${pkg.version()}`);
};
