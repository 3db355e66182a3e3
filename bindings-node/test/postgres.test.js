'use strict';
/**
 * The PostgreSQL store through the package: opened by URL (postgres:// and postgresql://),
 * the lease rules on the server's clock, a batch, and a keeper round. The server is
 * GOTRY_POSTGRES_URL, or the local one that scripts/postgres.sh starts (user postgres,
 * trust authentication, database `test`). GOTRY_SKIP_POSTGRES=1 skips these tests and says
 * so; otherwise a missing server fails them. Each run uses tables of its own prefix and
 * drops them afterwards.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { spawnSync } = require('node:child_process');

const pkg = require('..');
const { rejection } = require('./helpers');

const SKIP = process.env.GOTRY_SKIP_POSTGRES === '1';
const CUSTOM_URL = process.env.GOTRY_POSTGRES_URL;
const BASE_URL = CUSTOM_URL || 'postgres://postgres@127.0.0.1:5432/test';
const PREFIX = `gtnode${process.pid}_${crypto.randomBytes(3).toString('hex')}_`;
const withPrefix = url => `${url}${url.includes('?') ? '&' : '?'}prefix=${PREFIX}`;
const SHOWN = BASE_URL.replace(/^(postgres(?:ql)?:\/\/)[^@/]*@/, '$1');

if (SKIP) {
    process.stderr.write('SKIPPED test/postgres.test.js: GOTRY_SKIP_POSTGRES=1 skips every test that needs a PostgreSQL server\n');
}
const options = SKIP ? { skip: 'GOTRY_SKIP_POSTGRES=1' } : {};

async function open(url) {
    try {
        return await pkg.openLeaseStore(withPrefix(url));
    } catch (error) {
        assert.fail(
            `no usable PostgreSQL server at ${SHOWN}: ${error.message}\n` +
            'start the local one with scripts/postgres.sh, point GOTRY_POSTGRES_URL at another, ' +
            'or set GOTRY_SKIP_POSTGRES=1 to skip the tests that need one',
        );
    }
}

test.after(() => {
    if (SKIP || CUSTOM_URL) return;
    const p = PREFIX;
    const dropped = spawnSync('psql', ['-X', '-q', '-h', '127.0.0.1', '-U', 'postgres', '-d', 'test', '-c',
        `DROP TABLE IF EXISTS ${p}leases, ${p}lease_log, ${p}lease_log_pruned CASCADE; ` +
        `DROP FUNCTION IF EXISTS ${p}leases_guard(), ${p}lease_log_guard()`], { encoding: 'utf8' });
    if (dropped.status !== 0) process.stderr.write(`left tables ${p}leases, ${p}lease_log behind\n`);
});

test('openLeaseStore(postgres://...) holds leases on the server, and postgresql:// opens the same tables', options, async () => {
    const store = await open(BASE_URL);
    const other = await open(BASE_URL.replace(/^postgres:/, 'postgresql:'));
    const key = `acme/t-${crypto.randomBytes(16).toString('hex')}`;
    const serverNow = store.nowMs();
    assert.ok(Number.isSafeInteger(serverNow), String(serverNow));
    const grant = await store.acquire(key, 'node-a', 10_000);
    assert.equal(grant.record.epoch, 1);
    assert.ok(grant.record.leaseUntilMs >= serverNow + 10_000);
    const held = await rejection(other.acquire(key, 'node-b', 10_000));
    assert.ok(held instanceof pkg.LeaseHeldError);
    assert.deepEqual(held.record, grant.record);
    const [answer, refused] = await store.renewBatch('node-a', 10_000, [[key, 1], [key, 2]]);
    assert.equal(answer.ok, true);
    assert.ok(refused.error instanceof pkg.LeaseLostError);
    await store.release(key, 'node-a', 1);
    assert.equal((await other.acquire(key, 'node-b', 10_000)).record.epoch, 2);
    assert.deepEqual(store.history(key).map(e => [e.op, e.owner, e.epoch]), [
        ['acquire', 'node-a', 1], ['renew', 'node-a', 1], ['release', 'node-a', 1], ['acquire', 'node-b', 2],
    ]);

    const clock = new pkg.ManualClock(0);
    const keeper = pkg.LeaseKeeper.start({ store, replicaId: 'node-k', ttlMs: 30_000, marginMs: 1_000, clock, withoutThread: true });
    const keys = ['k1', 'k2'].map(k => `${k}-${crypto.randomBytes(4).toString('hex')}`);
    for (const k of keys) await keeper.acquire(k);
    clock.advance(10_000);
    assert.deepEqual(await keeper.tick(), { batches: 1, renewed: 2, lost: 0, failed: 0, nextDueMs: 20_000 });
    assert.deepEqual(await keeper.shutdown(5_000), { released: [...keys].sort(), failed: [], timedOut: [] });
    store.close();
    other.close();
    assert.ok((await rejection(store.read(key))) instanceof pkg.LeaseStoreUnavailableError);
});

test('a PostgreSQL URL that cannot be served fails with a typed error and no credential', options, async () => {
    await assert.rejects(pkg.openLeaseStore('postgres://alice:s3cret@127.0.0.1:5432/test?sslmode=prefer'),
        error => error instanceof RangeError && !/alice|s3cret/.test(error.message));
    await assert.rejects(pkg.openLeaseStore('postgres://alice:s3cret@127.0.0.1:1/test?timeout_ms=200'),
        error => error instanceof pkg.LeaseStoreUnavailableError && !/alice|s3cret/.test(error.message));
});
