'use strict';
/**
 * A JS holder clock is called directly on the JS thread that made the lease and through a
 * threadsafe function from pool threads. These check that "the JS thread" means the lease's
 * own thread (a worker's too), and that a live lease does not keep a process from exiting.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Worker } = require('node:worker_threads');

const { tempDbPath } = require('./helpers');

const PACKAGE = path.join(__dirname, '..');

test('a lease with a JS clock works inside a worker thread', async () => {
    const source = `
        const { parentPort, workerData } = require('node:worker_threads');
        const { SqliteLeaseStore, TenantLease } = require(workerData.pkg);
        (async () => {
            const store = new SqliteLeaseStore({ path: workerData.file });
            const clock = { t: 0, nowMs() { return this.t; } };
            const lease = await TenantLease.acquire({ key: 'w', replicaId: 'worker', store, ttlMs: 1000, marginMs: 100, clock });
            clock.t = 300;
            const remainingBefore = lease.remainingMs();
            await Promise.all([lease.renew(), lease.renew()]);
            const remainingAfter = lease.remainingMs();
            clock.t = 2000;
            let reason;
            try { lease.assertHeld(); } catch (error) { reason = error.reason; }
            await lease.release();
            parentPort.postMessage({ remainingBefore, remainingAfter, reason, ops: store.history('w').map(e => e.op) });
            store.close();
        })().catch(error => parentPort.postMessage({ error: String(error && error.stack) }));
    `;
    const worker = new Worker(source, { eval: true, workerData: { pkg: PACKAGE, file: tempDbPath() } });
    const result = await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
    });
    await worker.terminate();
    assert.equal(result.error, undefined);
    assert.equal(result.remainingBefore, 600);
    assert.equal(result.remainingAfter, 900);
    assert.equal(result.reason, 'lease_expired_locally');
    assert.deepEqual(result.ops, ['acquire', 'renew', 'renew', 'release']);
});

test('a process holding a lease with a JS clock still exits on its own', () => {
    const script = `
        const { SqliteLeaseStore, TenantLease } = require(process.argv[1]);
        (async () => {
            const store = new SqliteLeaseStore({ path: process.argv[2] });
            const lease = await TenantLease.acquire({ key: 'x', replicaId: 'r', store, ttlMs: 60000, marginMs: 100, clock: { nowMs: () => 0 } });
            await lease.renew();
            globalThis.kept = lease;
            console.log('held', lease.epoch);
        })();
    `;
    const child = spawnSync(process.execPath, ['-e', script, PACKAGE, tempDbPath()], { encoding: 'utf8' });
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'held 1');
});
