'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');

const pkg = require('..');
const { tempDbPath, rejection } = require('./helpers');

const { SqliteLeaseStore, ManualClock } = pkg;

/** A store on its own file, whose clock is a plain JS function the test moves by hand. */
function jsClockStore(start = 1_000) {
    const clock = { now: start };
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: () => clock.now });
    return { store, clock };
}

test('the reference constants and assertLeaseTtl', () => {
    assert.equal(pkg.MIN_LEASE_TTL_MS, 100);
    assert.equal(pkg.MAX_LEASE_TTL_MS, 600_000);
    pkg.assertLeaseTtl(100);
    pkg.assertLeaseTtl(600_000);
    for (const bad of [99, 600_001, 1000.5, NaN, Infinity, -Infinity, '1000', null, undefined, 10n ** 3n, {}]) {
        assert.throws(() => pkg.assertLeaseTtl(bad), RangeError, String(bad));
    }
});

test('acquire, renew, release and markForgotten follow the lease rules', async () => {
    const { store, clock } = jsClockStore(1_000);
    const grant = await store.acquire('k', 'a', 1_000);
    assert.deepEqual(grant, { record: { key: 'k', owner: 'a', epoch: 1, leaseUntilMs: 2_000, forgottenAtEpoch: 0 }, ttlMs: 1_000 });
    assert.deepEqual(await store.read('k'), grant.record);
    assert.equal(await store.read('missing'), null);

    // The same owner acquiring its own unexpired lease is refused, with the record.
    const held = await rejection(store.acquire('k', 'a', 1_000));
    assert.ok(held instanceof pkg.LeaseHeldError);
    assert.deepEqual(held.record, grant.record);

    clock.now = 1_500;
    const renewed = await store.renew('k', 'a', 1, 1_000);
    assert.equal(renewed.record.leaseUntilMs, 2_500);
    assert.equal(renewed.record.epoch, 1);

    // Acquire exactly at leaseUntilMs succeeds and moves the epoch by one.
    clock.now = 2_500;
    const next = await store.acquire('k', 'b', 1_000);
    assert.equal(next.record.epoch, 2);
    assert.equal(next.record.owner, 'b');

    // A release by the stale holder is LEASE_LOST; renew after expiry is LEASE_LOST.
    assert.ok((await rejection(store.release('k', 'a', 1))) instanceof pkg.LeaseLostError);
    clock.now = 3_500;
    const expired = await rejection(store.renew('k', 'b', 2, 1_000));
    assert.ok(expired instanceof pkg.LeaseLostError);

    // The holder may release after expiry, and twice; the epoch stays.
    const released = await store.release('k', 'b', 2);
    assert.equal(released.leaseUntilMs, 3_500);
    assert.equal(released.epoch, 2);
    assert.deepEqual(await store.release('k', 'b', 2), released);

    // The forgotten floor survives the next acquire.
    const third = await store.acquire('k', 'c', 1_000);
    const forgotten = await store.markForgotten('k', 'c', 3);
    assert.equal(forgotten.forgottenAtEpoch, 3);
    clock.now = 10_000;
    const fourth = await store.acquire('k', 'd', 1_000);
    assert.equal(third.record.epoch, 3);
    assert.equal(fourth.record.epoch, 4);
    assert.equal(fourth.record.forgottenAtEpoch, 3);
    assert.ok((await rejection(store.markForgotten('k', 'c', 3))) instanceof pkg.LeaseLostError);

    assert.deepEqual(
        store.history('k').map(e => [e.op, e.owner, e.epoch, e.atMs]),
        [
            ['acquire', 'a', 1, 1_000], ['renew', 'a', 1, 1_500], ['acquire', 'b', 2, 2_500], ['release', 'b', 2, 3_500],
            ['release', 'b', 2, 3_500], ['acquire', 'c', 3, 3_500], ['forget', 'c', 3, 3_500], ['acquire', 'd', 4, 10_000],
        ],
    );
    assert.equal(store.history().length, 8);
    assert.deepEqual(store.history('other'), []);
    store.close();
});

test('text arguments are measured in UTF-16 code units; lone surrogates are refused', async () => {
    const { store } = jsClockStore();
    await store.acquire('k1', '😀'.repeat(100), 1_000);
    await store.acquire('k2', 'é'.repeat(200), 1_000);
    await store.acquire('k'.repeat(200), 'o', 1_000);
    for (const [key, owner] of [['k3', '😀'.repeat(101)], ['k3', 'é'.repeat(201)], ['k'.repeat(201), 'o'], ['', 'o'], ['k3', '']]) {
        assert.ok((await rejection(store.acquire(key, owner, 1_000))) instanceof RangeError);
    }
    // 'a\uD800' and 'a\uDBFF' would both become 'a\uFFFD', one row for two keys.
    for (const lone of ['a\uD800', 'a\uDBFF', '\uDC00']) {
        const error = await rejection(store.acquire(lone, 'o', 1_000));
        assert.ok(error instanceof RangeError);
        assert.match(error.message, /surrogate/);
        assert.ok((await rejection(store.acquire('k4', lone, 1_000))) instanceof RangeError);
    }
    for (const notText of [undefined, null, 7, {}, ['k']]) {
        assert.ok((await rejection(store.acquire(notText, 'o', 1_000))) instanceof RangeError);
        assert.ok((await rejection(store.read(notText))) instanceof RangeError);
    }
    assert.equal(await store.read('a\uFFFD'), null);
    store.close();
});

test('a TTL or epoch that is not an integer is a RangeError, never truncated', async () => {
    const { store } = jsClockStore();
    await store.acquire('k', 'o', 1_000);
    for (const bad of [1000.5, NaN, Infinity, -Infinity, '1000', null, undefined, 2 ** 53, true]) {
        assert.ok((await rejection(store.acquire('k2', 'o', bad))) instanceof RangeError, `ttl ${String(bad)}`);
        assert.ok((await rejection(store.renew('k', 'o', 1, bad))) instanceof RangeError, `ttl ${String(bad)}`);
    }
    for (const bad of [1.5, NaN, Infinity, '1', null, 0, -1, 2 ** 53]) {
        assert.ok((await rejection(store.renew('k', 'o', bad, 1_000))) instanceof RangeError, `epoch ${String(bad)}`);
        assert.ok((await rejection(store.release('k', 'o', bad))) instanceof RangeError, `epoch ${String(bad)}`);
        assert.ok((await rejection(store.markForgotten('k', 'o', bad))) instanceof RangeError, `epoch ${String(bad)}`);
    }
    for (const bad of [99, 600_001]) assert.ok((await rejection(store.acquire('k2', 'o', bad))) instanceof RangeError);
    // Nothing was written by any refused call.
    assert.equal(store.history().length, 1);
    assert.equal(await store.read('k2'), null);
    store.close();
});

test('renewBatch answers each lease on its own: a grant, or the refusal of that lease alone', async () => {
    const clock = new ManualClock(10_000);
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: clock });
    await store.acquire('k1', 'a', 1_000);
    await store.acquire('k2', 'a', 100);
    await store.acquire('k3', 'b', 1_000);
    clock.advance(200);
    const answers = await store.renewBatch('a', 2_000, [['k1', 1], ['k2', 1], ['k3', 1], ['k1', 0], ['', 1], ['never', 1], ['k1', 1]]);
    const kinds = answers.map(answer => (answer.ok ? 'grant' : answer.error.constructor.name));
    assert.deepEqual(kinds, ['grant', 'LeaseLostError', 'LeaseLostError', 'RangeError', 'RangeError', 'LeaseLostError', 'grant']);
    const grant = { record: { key: 'k1', owner: 'a', epoch: 1, leaseUntilMs: 12_200, forgottenAtEpoch: 0 }, ttlMs: 2_000 };
    assert.deepEqual(answers[0], { ok: true, grant });
    assert.deepEqual(answers[6], { ok: true, grant });
    assert.equal(answers[1].error.code, 'GOTRY_TENANT_LEASE_LOST');
    assert.ok(answers[1].error instanceof pkg.TenantStateError);
    assert.equal(Object.hasOwn(answers[3].error, 'code'), false, 'a RangeError without a code, as in the reference');
    assert.deepEqual(Object.keys(answers[1]).sort(), ['error', 'ok']);
    // Both renewals of k1 were logged, and nothing for the refused leases.
    assert.deepEqual(store.history().map(e => [e.op, e.key, e.owner]), [
        ['acquire', 'k1', 'a'], ['acquire', 'k2', 'a'], ['acquire', 'k3', 'b'], ['renew', 'k1', 'a'], ['renew', 'k1', 'a'],
    ]);
    assert.deepEqual(await store.read('k2'), { key: 'k2', owner: 'a', epoch: 1, leaseUntilMs: 10_100, forgottenAtEpoch: 0 });
    assert.deepEqual(await store.renewBatch('a', 1_000, []), []);
    store.close();
});

test('renewBatch refuses a malformed call as a whole before the store is asked', async () => {
    const { store, clock } = jsClockStore(1_000);
    await store.acquire('k1', 'a', 1_000);
    const malformed = [
        ['a', 99, [['k1', 1]]],
        ['a', 1_000.5, [['k1', 1]]],
        ['', 1_000, [['k1', 1]]],
        ['a\uD800', 1_000, [['k1', 1]]],
        ['a', 1_000, [[42, 1]]],
        ['a', 1_000, [['k1\uDC00', 1]]],
        ['a', 1_000, [['k1', 1.5]]],
        ['a', 1_000, [['k1', 2 ** 53]]],
        ['a', 1_000, [['k1', '1']]],
        ['a', 1_000, [['k1']]],
        ['a', 1_000, [['k1', 1, 'extra']]],
        ['a', 1_000, [['k1', 1], 'k1']],
        ['a', 1_000, [{ 0: 'k1', 1: 1, length: 2 }]],
    ];
    for (const [owner, ttlMs, leases] of malformed) {
        const error = await rejection(store.renewBatch(owner, ttlMs, leases));
        assert.ok(error instanceof RangeError, `${JSON.stringify([owner, ttlMs, leases])}: ${error}`);
    }
    for (const notArray of [undefined, 'k1', { length: 0 }, new Set()]) {
        const error = await rejection(store.renewBatch('a', 1_000, notArray));
        assert.ok(error instanceof TypeError, String(notArray));
    }
    assert.deepEqual(store.history().map(e => e.op), ['acquire']);
    // The batch carries the JS clock's reading taken when it was called.
    clock.now = 1_400;
    const [answer] = await store.renewBatch('a', 1_000, [['k1', 1]]);
    assert.equal(answer.grant.record.leaseUntilMs, 2_400);
    store.close();
    const closed = await rejection(store.renewBatch('a', 1_000, [['k1', 1]]));
    assert.ok(closed instanceof pkg.LeaseStoreUnavailableError);
});

test('store methods reject and never throw synchronously; history and close are synchronous', async () => {
    const { store } = jsClockStore();
    const calls = [
        () => store.read(42),
        () => store.acquire('k', 'o', 'x'),
        () => store.renew('k', 'o', 1.5, 1_000),
        () => store.release(undefined, 'o', 1),
        () => store.markForgotten('k', 'o', NaN),
        () => store.renew('k', 'o', 1, 1_000),
        () => store.renewBatch('o', 1_000, null),
    ];
    for (const call of calls) {
        let promise;
        assert.doesNotThrow(() => { promise = call(); });
        assert.ok(promise instanceof Promise);
        await assert.rejects(promise);
    }
    assert.ok(Array.isArray(store.history()));
    assert.equal(store.close(), undefined);
    const closed = await rejection(store.acquire('k', 'o', 1_000));
    assert.ok(closed instanceof pkg.LeaseStoreUnavailableError);
    assert.throws(() => store.history(), pkg.LeaseStoreUnavailableError);
});

test('the store clock: Date.now by default, a JS function, or a native ManualClock', async () => {
    const before = Date.now();
    const system = new SqliteLeaseStore({ path: tempDbPath() });
    const grant = await system.acquire('k', 'o', 1_000);
    assert.ok(grant.record.leaseUntilMs >= before + 1_000 && grant.record.leaseUntilMs <= Date.now() + 1_000);
    assert.equal(system.nowMs, Date.now);
    system.close();

    const manual = new ManualClock(5_000);
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: manual });
    assert.equal(store.nowMs(), 5_000);
    assert.equal((await store.acquire('k', 'o', 1_000)).record.leaseUntilMs, 6_000);
    assert.equal(manual.advance(1_000), 6_000);
    assert.equal((await store.acquire('k', 'p', 1_000)).record.epoch, 2);
    store.close();

    // A JS clock that throws rejects with its own exception; one that is not an integer is refused.
    const boom = new Error('clock broke');
    let reading = () => { throw boom; };
    const jsStore = new SqliteLeaseStore({ path: tempDbPath(), nowMs: () => reading() });
    assert.equal(await rejection(jsStore.acquire('k', 'o', 1_000)), boom);
    for (const bad of [1.5, NaN, '5', undefined]) {
        reading = () => bad;
        assert.ok((await rejection(jsStore.acquire('k', 'o', 1_000))) instanceof RangeError, String(bad));
    }
    // A reading past the safe integer range cannot come back as a wrong number.
    reading = () => Number.MAX_SAFE_INTEGER - 10;
    assert.ok((await rejection(jsStore.acquire('k', 'o', 1_000))) instanceof RangeError);
    assert.deepEqual(jsStore.history(), []);
    reading = () => 7;
    assert.equal((await jsStore.acquire('k', 'o', 1_000)).record.leaseUntilMs, 1_007);
    jsStore.close();

    assert.throws(() => new SqliteLeaseStore({ path: tempDbPath(), nowMs: 5 }), TypeError);
    assert.throws(() => new SqliteLeaseStore({}), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
    assert.throws(() => new SqliteLeaseStore(), TypeError);
});

test('a file that is not a database is a storage error with SQLite code, not a crash', () => {
    const file = tempDbPath('junk.db');
    fs.writeFileSync(file, Buffer.alloc(8192, 'not a database '));
    assert.throws(() => new SqliteLeaseStore({ path: file }), error => {
        assert.equal(error.code, 'SQLITE_NOTADB');
        assert.ok(!(error instanceof pkg.TenantStateError));
        return true;
    });
});

test('two stores on one file see each other, and parent folders are created', async () => {
    const file = tempDbPath('nested/deeper/leases.db');
    const clock = new ManualClock(0);
    const a = new SqliteLeaseStore({ path: file, nowMs: clock });
    const b = new SqliteLeaseStore({ path: file, nowMs: clock });
    await a.acquire('k', 'a', 1_000);
    assert.equal((await rejection(b.acquire('k', 'b', 1_000))).record.owner, 'a');
    assert.equal(b.history().length, 1);
    a.close();
    b.close();
});

/** The error a synchronous call throws, for comparison with its promise form's rejection. */
function thrown(call) {
    try {
        call();
    } catch (error) {
        return error;
    }
    assert.fail('expected a throw');
}

/** Asserts that `promise` rejects as `call()` throws: same class, code and message. */
async function rejectsAs(promise, call) {
    const [async, sync] = [await rejection(promise), thrown(call)];
    assert.equal(async.constructor, sync.constructor, `${async.name} against ${sync.name}`);
    assert.equal(async.code, sync.code);
    assert.equal(async.message, sync.message);
    return async;
}

test('openLeaseStore opens a store by URL as a promise, and rejects a bad URL with a RangeError', async () => {
    const file = tempDbPath();
    const pending = pkg.openLeaseStore(`sqlite://${file}`);
    assert.ok(pending instanceof Promise);
    const store = await pending;
    assert.equal((await store.acquire('k', 'o', 1_000)).record.epoch, 1);
    assert.equal(typeof store.nowMs(), 'number');
    // The same kind of store as the constructor gives: TenantLease takes it.
    const lease = await pkg.TenantLease.acquire({ key: 'held', replicaId: 'r', store, ttlMs: 1_000, marginMs: 100 });
    await lease.release();
    store.close();
    const again = new SqliteLeaseStore({ path: file });
    assert.equal((await again.read('k')).owner, 'o');
    assert.deepEqual(again.history().map(e => [e.key, e.op]), [['k', 'acquire'], ['held', 'acquire'], ['held', 'release']]);
    again.close();
    for (const bad of ['nope', 'redis://x', 'sqlite://', 7, undefined]) {
        // Never a throw: every failure is the promise's.
        let opening;
        assert.doesNotThrow(() => { opening = pkg.openLeaseStore(bad); }, String(bad));
        const error = await rejection(opening);
        assert.ok(error instanceof RangeError, `${String(bad)}: ${error.name}: ${error.message}`);
    }
});

test('historyAsync resolves to what history returns, after the calls made before it', async () => {
    const { store, clock } = jsClockStore(1_000);
    // Not awaited: the history is queued behind them and sees them.
    const acquired = store.acquire('k', 'a', 1_000);
    const other = store.acquire('other', 'b', 1_000);
    const all = await store.historyAsync();
    await Promise.all([acquired, other]);
    assert.deepEqual(all, store.history());
    assert.deepEqual(all.map(e => [e.key, e.op, e.owner, e.epoch, e.atMs]), [['k', 'acquire', 'a', 1, 1_000], ['other', 'acquire', 'b', 1, 1_000]]);
    clock.now = 1_500;
    const renewed = store.renew('k', 'a', 1, 1_000);
    const ofKey = await store.historyAsync('k');
    await renewed;
    assert.deepEqual(ofKey.map(e => [e.op, e.atMs]), [['acquire', 1_000], ['renew', 1_500]]);
    assert.deepEqual(ofKey, store.history('k'));
    assert.deepEqual(await store.historyAsync(null), store.history(null));
    assert.deepEqual(await store.historyAsync('none'), []);
    for (const bad of [7, {}, 'a\uD800']) await rejectsAs(store.historyAsync(bad), () => store.history(bad));
    store.close();
    const closed = await rejectsAs(store.historyAsync(), () => store.history());
    assert.ok(closed instanceof pkg.LeaseStoreUnavailableError, closed.name);
});

test('nowMsAsync resolves to the store clock on every kind of store', async () => {
    // A JS clock function: its reading, taken when called.
    const { store, clock } = jsClockStore(1_234);
    const reading = store.nowMsAsync();
    clock.now = 9_999;
    assert.equal(await reading, 1_234);
    assert.equal(await store.nowMsAsync(), 9_999);
    // Its failures reject as the other calls' do: the function's own exception, a reading that
    // is not an integer as a RangeError.
    const failure = new Error('clock broke');
    const failing = new SqliteLeaseStore({ path: tempDbPath(), nowMs: () => { throw failure; } });
    assert.equal(await rejection(failing.nowMsAsync()), failure);
    clock.now = 1.5;
    assert.ok((await rejection(store.nowMsAsync())) instanceof RangeError);
    store.close();
    failing.close();

    const manual = new ManualClock(42);
    const manualStore = new SqliteLeaseStore({ path: tempDbPath(), nowMs: manual });
    assert.equal(await manualStore.nowMsAsync(), 42);
    manual.advance(8);
    assert.equal(await manualStore.nowMsAsync(), 50);
    manualStore.close();

    const system = await pkg.openLeaseStore(`sqlite://${tempDbPath()}`);
    const before = Date.now();
    const now = await system.nowMsAsync();
    assert.ok(Number.isSafeInteger(now) && now >= before && now <= Date.now(), `${before} ${now}`);
    system.close();
});
