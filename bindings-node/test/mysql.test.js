'use strict';
/**
 * The MySQL/MariaDB store through the package: opened by URL, held by a TenantLease and by a
 * LeaseKeeper. The server is GOTRY_MYSQL_URL, or the local one that scripts/mariadb.sh starts
 * (root, no password, database `test`). GOTRY_SKIP_MYSQL=1 skips these tests and says so;
 * otherwise a missing server fails them, since a suite that passes because nothing was there
 * to test proves nothing. Each run uses tables of its own prefix and drops them afterwards.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const { spawnSync } = require('node:child_process');

const pkg = require('..');
const { rejection, ticksWhile, listener } = require('./helpers');

const SKIP = process.env.GOTRY_SKIP_MYSQL === '1';
const CUSTOM_URL = process.env.GOTRY_MYSQL_URL;
const BASE_URL = CUSTOM_URL || 'mysql://root@127.0.0.1:3306/test';
const PREFIX = `gtnode${process.pid}_${crypto.randomBytes(3).toString('hex')}_`;
const URL = `${BASE_URL}${BASE_URL.includes('?') ? '&' : '?'}prefix=${PREFIX}`;

/** The URL without its credentials, for messages. */
const SHOWN = BASE_URL.replace(/^mysql:\/\/[^@/]*@/, 'mysql://');

if (SKIP) {
    // Straight to stderr as well as the runner's SKIP: a skip nobody sees is the silent kind.
    process.stderr.write('SKIPPED test/mysql.test.js: GOTRY_SKIP_MYSQL=1 skips every test that needs a MySQL/MariaDB server\n');
}

/** Opens the store, failing with what to do when there is no server. */
async function open() {
    try {
        return await pkg.openLeaseStore(URL);
    } catch (error) {
        assert.fail(
            `no usable MySQL/MariaDB server at ${SHOWN}: ${error.message}\n` +
            'start the local one with scripts/mariadb.sh, point GOTRY_MYSQL_URL at another, ' +
            'or set GOTRY_SKIP_MYSQL=1 to skip the tests that need one',
        );
    }
}

const options = SKIP ? { skip: 'GOTRY_SKIP_MYSQL=1' } : {};

test.after(() => {
    if (SKIP || CUSTOM_URL) return;
    // Best effort: the store never drops its tables, so they are dropped beside it.
    const tables = `${PREFIX}leases, ${PREFIX}lease_log, ${PREFIX}lease_log_pruned`;
    const dropped = spawnSync('mysql', ['--protocol=tcp', '-h127.0.0.1', '-uroot', 'test', '-e',
        `DROP TABLE IF EXISTS ${tables}`], { encoding: 'utf8' });
    if (dropped.status !== 0) process.stderr.write(`left tables ${tables} behind\n`);
});

test('openLeaseStore(mysql://...) acquires, renews, releases and logs on the server', options, async () => {
    const store = await open();
    const key = `acme/t-${crypto.randomBytes(16).toString('hex')}`;
    // The server's clock, read through the store: it decides expiry, not this process's.
    const serverNow = store.nowMs();
    assert.ok(Number.isSafeInteger(serverNow), String(serverNow));

    const grant = await store.acquire(key, 'node-a', 10_000);
    assert.deepEqual([grant.record.key, grant.record.owner, grant.record.epoch, grant.ttlMs], [key, 'node-a', 1, 10_000]);
    assert.ok(grant.record.leaseUntilMs >= serverNow + 10_000);
    const held = await rejection(store.acquire(key, 'node-b', 10_000));
    assert.ok(held instanceof pkg.LeaseHeldError);
    assert.deepEqual(held.record, grant.record);

    const renewed = await store.renew(key, 'node-a', 1, 20_000);
    assert.equal(renewed.record.epoch, 1);
    assert.ok(renewed.record.leaseUntilMs >= grant.record.leaseUntilMs);
    assert.ok((await rejection(store.renew(key, 'node-b', 1, 10_000))) instanceof pkg.LeaseLostError);
    assert.equal((await store.markForgotten(key, 'node-a', 1)).forgottenAtEpoch, 1);

    const [answer, refused] = await store.renewBatch('node-a', 10_000, [[key, 1], [key, 2]]);
    assert.equal(answer.ok, true);
    assert.equal(answer.grant.record.epoch, 1);
    assert.equal(refused.ok, false);
    assert.ok(refused.error instanceof pkg.LeaseLostError);

    const released = await store.release(key, 'node-a', 1);
    assert.ok(released.leaseUntilMs <= store.nowMs());
    assert.deepEqual(await store.read(key), released);
    assert.equal((await store.acquire(key, 'node-b', 10_000)).record.epoch, 2);

    assert.deepEqual(store.history(key).map(e => [e.op, e.owner, e.epoch]), [
        ['acquire', 'node-a', 1], ['renew', 'node-a', 1], ['forget', 'node-a', 1], ['renew', 'node-a', 1],
        ['release', 'node-a', 1], ['acquire', 'node-b', 2],
    ]);
    // Text is measured in UTF-16 code units here too, and a lone surrogate never reaches the server.
    assert.ok((await rejection(store.acquire('a\uD800', 'node-a', 10_000))) instanceof RangeError);
    assert.equal((await store.acquire('\u{1F600}'.repeat(100), 'node-a', 10_000)).record.epoch, 1);
    store.close();
    assert.ok((await rejection(store.read(key))) instanceof pkg.LeaseStoreUnavailableError);
});

test('a TenantLease and a LeaseKeeper hold leases on the server', options, async () => {
    const store = await open();
    const tag = crypto.randomBytes(4).toString('hex');
    const lease = await pkg.TenantLease.acquire({ key: `solo-${tag}`, replicaId: 'node-a', store, ttlMs: 30_000, marginMs: 1_000 });
    lease.assertHeld();
    await lease.renew();
    await lease.release();
    assert.equal(lease.isHeld(), false);

    // The keeper's clock is manual, the store's is the server's: rounds happen when the test says.
    const clock = new pkg.ManualClock(0);
    const events = [];
    const keeper = pkg.LeaseKeeper.start({
        store, replicaId: 'node-k', ttlMs: 30_000, marginMs: 1_000, clock, withoutThread: true, onEvent: e => events.push(e),
    });
    const keys = ['k1', 'k2', 'k3'].map(k => `${k}-${tag}`);
    for (const key of keys) await keeper.acquire(key);
    clock.advance(10_000);
    assert.deepEqual(await keeper.tick(), { batches: 1, renewed: 3, lost: 0, failed: 0, nextDueMs: 20_000 });
    for (const key of keys) assert.deepEqual(store.history(key).map(e => e.op), ['acquire', 'renew']);
    assert.deepEqual(await keeper.shutdown(5_000), { released: [...keys].sort(), failed: [], timedOut: [] });
    assert.deepEqual(events, []);
    store.close();
});

/** The test server's URL pointed at another local port, with a short timeout. */
function urlThrough(port) {
    const url = new globalThis.URL(URL);
    url.host = `127.0.0.1:${port}`;
    url.searchParams.set('timeout_ms', '500');
    return url.href;
}

test('the promise forms log and read the clock on the server', options, async () => {
    const store = await pkg.openLeaseStore(URL);
    const key = `async-${crypto.randomBytes(8).toString('hex')}`;
    const before = store.nowMs();
    const serverNow = await store.nowMsAsync();
    assert.ok(Number.isSafeInteger(serverNow) && serverNow >= before, `${before} ${serverNow}`);
    // Awaited first: a MySQL store runs calls side by side, so a history made meanwhile may
    // read before the acquire commits.
    const grant = await store.acquire(key, 'node-a', 10_000);
    const entries = await store.historyAsync(key);
    assert.deepEqual(entries.map(e => [e.key, e.op, e.owner, e.epoch]), [[key, 'acquire', 'node-a', 1]]);
    assert.deepEqual(entries, store.history(key));
    assert.ok(entries[0].atMs <= grant.record.leaseUntilMs - 10_000);
    assert.ok((await store.historyAsync()).some(e => e.key === key));
    store.close();
    assert.ok((await rejection(store.historyAsync(key))) instanceof pkg.LeaseStoreUnavailableError);
});

/**
 * A proxy in this process to the test server, which stops passing bytes on once `freeze()`
 * is called. Opening through it needs the event loop to turn, as the proxy runs on it.
 */
async function freezingProxy(t) {
    const target = new globalThis.URL(URL);
    let frozen = false;
    const proxy = await listener(client => {
        const upstream = net.connect(Number(target.port || 3306), target.hostname);
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
        client.on('data', bytes => { if (!frozen) upstream.write(bytes); });
        upstream.on('data', bytes => { if (!frozen) client.write(bytes); });
    });
    t.after(proxy.close);
    return { port: proxy.port, freeze: () => { frozen = true; } };
}

test('historyAsync and nowMsAsync wait off the event loop for a server that stops answering', options, async t => {
    const proxy = await freezingProxy(t);
    const store = await pkg.openLeaseStore(urlThrough(proxy.port));
    t.after(() => store.close());
    const key = `frozen-${crypto.randomBytes(8).toString('hex')}`;
    await store.acquire(key, 'node-a', 10_000);
    assert.equal((await store.historyAsync(key)).length, 1);

    proxy.freeze();
    for (const [name, call] of [['nowMsAsync', () => store.nowMsAsync()], ['historyAsync', () => store.historyAsync(key)]]) {
        const { outcome, ticks } = await ticksWhile(call());
        assert.ok(outcome.error, `${name} answered through a frozen proxy: ${JSON.stringify(outcome.value)}`);
        assert.ok(outcome.error instanceof pkg.LeaseStoreUnavailableError, `${name}: ${outcome.error.name}: ${outcome.error.message}`);
        assert.ok(ticks > 0, `no timer ran while ${name} waited`);
    }
});

test('calls queued behind a server that stops answering end when their own timeout is up', options, async t => {
    // The store works on a few calls at once (the addon's store threads): the rest queue, and
    // the time they queue is spent from their timeout, so the last one does not fail several
    // timeouts after it was made.
    const proxy = await freezingProxy(t);
    const url = new globalThis.URL(urlThrough(proxy.port));
    url.searchParams.set('timeout_ms', '1000');
    const store = await pkg.openLeaseStore(url.href);
    t.after(() => store.close());
    const key = `queued-${crypto.randomBytes(8).toString('hex')}`;
    const { record } = await store.acquire(key, 'node-a', 60_000);

    proxy.freeze();
    const asked = performance.now();
    const ended = await Promise.all(Array.from({ length: 20 }, () =>
        store.renew(key, 'node-a', record.epoch, 60_000).then(
            () => assert.fail('a renewal answered through a frozen proxy'),
            error => {
                assert.ok(error instanceof pkg.LeaseStoreUnavailableError, `${error.name}: ${error.message}`);
                return performance.now() - asked;
            })));
    // Four at a time, each waiting its whole timeout, the last would end after five timeouts.
    const last = Math.max(...ended);
    t.diagnostic(`the last of 20 queued calls ended ${Math.round(last)} ms after it was made`);
    assert.ok(last < 2_500, `the last of 20 queued calls ended ${Math.round(last)} ms after it was made (timeout 1000 ms)`);
});
