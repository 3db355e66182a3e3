'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');

const pkg = require('..');
const { tempDbPath, rejection } = require('./helpers');

const { SqliteLeaseStore, ManualClock, TenantLease } = pkg;

/** One manual clock for both roles, as the reference's drills use. */
function setup() {
    const clock = new ManualClock(10_000);
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: clock });
    const options = { key: 'acme/t-1', replicaId: 'r1', store, ttlMs: 1_000, marginMs: 100, clock };
    return { clock, store, options };
}

function isFenced(reason) {
    return error => {
        assert.ok(error instanceof pkg.FencedError, `${error && error.name}: ${error && error.message}`);
        assert.equal(error.code, 'GOTRY_TENANT_FENCED');
        assert.equal(error.reason, reason);
        return true;
    };
}

test('acquire holds the lease until sentAt + ttl - margin on the holder clock', async () => {
    const { clock, store, options } = setup();
    const lease = await TenantLease.acquire(options);
    assert.equal(lease.key, 'acme/t-1');
    assert.equal(lease.replicaId, 'r1');
    assert.equal(lease.epoch, 1);
    assert.equal(lease.forgottenAtEpoch, 0);
    assert.equal(lease.store, store);
    assert.equal(lease.clock, clock);
    assert.equal(lease.ttlMs, 1_000);
    assert.equal(lease.marginMs, 100);
    assert.equal(lease.remainingMs(), 900);
    lease.assertHeld();
    clock.advance(899);
    assert.ok(lease.isHeld());
    clock.advance(1);
    assert.equal(lease.isHeld(), false);
    assert.equal(lease.remainingMs(), 0);
    assert.throws(() => lease.assertHeld(), isFenced('lease_expired_locally'));
    store.close();
});

test('another holder gets LeaseHeldError; bad ttl or margin is a RangeError rejection', async () => {
    const { store, options } = setup();
    await TenantLease.acquire(options);
    const held = await rejection(TenantLease.acquire({ ...options, replicaId: 'r2' }));
    assert.ok(held instanceof pkg.LeaseHeldError);
    assert.equal(held.record.owner, 'r1');
    for (const ttlMs of [1000.5, NaN, '1000', 99]) {
        assert.ok((await rejection(TenantLease.acquire({ ...options, key: 'x', ttlMs }))) instanceof RangeError);
    }
    for (const marginMs of [10.5, NaN, Infinity, '100', -1, 1_000, undefined]) {
        assert.ok((await rejection(TenantLease.acquire({ ...options, key: 'x', marginMs }))) instanceof RangeError, String(marginMs));
    }
    assert.equal(await store.read('x'), null);
    // Not a store of this package: a TypeError rejection, not a synchronous throw.
    const promise = TenantLease.acquire({ ...options, store: { acquire() {} } });
    assert.ok(promise instanceof Promise);
    await assert.rejects(promise, TypeError);
    await assert.rejects(TenantLease.acquire({ ...options, key: 'y', clock: {} }), TypeError);
    assert.throws(() => new TenantLease(options), TypeError);
    store.close();
});

test('renew moves the fence; a renew after the local fence passed makes the lease held again', async () => {
    const { clock, store, options } = setup();
    const lease = await TenantLease.acquire(options);
    clock.advance(500);
    await lease.renew();
    assert.equal(lease.remainingMs(), 900);
    assert.equal((await store.read(options.key)).leaseUntilMs, 11_500);
    // Past the local fence (900 after the renewal) but before the store's deadline (1000).
    clock.advance(950);
    assert.throws(() => lease.assertHeld(), isFenced('lease_expired_locally'));
    await lease.renew();
    lease.assertHeld();
    assert.equal(lease.remainingMs(), 900);
    assert.equal(lease.epoch, 1);
    store.close();
});

test('a refused renew is terminal; a release after it does nothing', async () => {
    const { clock, store, options } = setup();
    const lease = await TenantLease.acquire(options);
    clock.advance(1_000);
    const other = await TenantLease.acquire({ ...options, replicaId: 'r2' });
    assert.equal(other.epoch, 2);
    const lost = await rejection(lease.renew());
    assert.ok(lost instanceof pkg.LeaseLostError);
    assert.throws(() => lease.assertHeld(), isFenced('lease_lost'));
    assert.ok((await rejection(lease.renew())) instanceof pkg.FencedError);
    await lease.release();
    assert.equal((await store.read(options.key)).owner, 'r2');
    other.assertHeld();
    store.close();
});

test('renew, release, renew issued together settle in call order: ok, ok, FENCED(lease_released)', async () => {
    for (let round = 0; round < 20; round += 1) {
        const { store, options } = setup();
        const lease = await TenantLease.acquire(options);
        const order = [];
        const outcomes = await Promise.all(
            [lease.renew(), lease.release(), lease.renew()].map((promise, index) =>
                promise.then(
                    () => { order.push(index); return 'ok'; },
                    error => { order.push(index); return `${error.code}:${error.reason}`; },
                ),
            ),
        );
        assert.deepEqual(outcomes, ['ok', 'ok', 'GOTRY_TENANT_FENCED:lease_released']);
        assert.deepEqual(order, [0, 1, 2]);
        assert.throws(() => lease.assertHeld(), isFenced('lease_released'));
        assert.deepEqual(store.history(options.key).map(e => e.op), ['acquire', 'renew', 'release']);
        store.close();
    }
});

test('release hands the tenant over at once and twice is harmless', async () => {
    const { store, options } = setup();
    const lease = await TenantLease.acquire(options);
    await lease.release();
    await lease.release();
    assert.throws(() => lease.assertHeld(), isFenced('lease_released'));
    const next = await TenantLease.acquire({ ...options, replicaId: 'r2' });
    assert.equal(next.epoch, 2);
    assert.deepEqual(store.history(options.key).map(e => e.op), ['acquire', 'release', 'acquire']);
    store.close();
});

test('a grant consumed by the round trip is handed back and reported as lost', async () => {
    const { store, options } = setup();
    // The holder's clock jumps past the fence between the request and the answer.
    const readings = [0, 5_000];
    const jumpy = { nowMs: () => readings.shift() ?? 5_000 };
    const error = await rejection(TenantLease.acquire({ ...options, clock: jumpy }));
    assert.ok(error instanceof pkg.LeaseLostError);
    const record = await store.read(options.key);
    assert.equal(record.epoch, 1);
    assert.ok(record.leaseUntilMs <= store.nowMs());
    assert.deepEqual(store.history(options.key).map(e => e.op), ['acquire', 'release']);
    assert.equal((await TenantLease.acquire({ ...options, replicaId: 'r2' })).epoch, 2);
    store.close();
});

test('markForgotten needs a held lease and raises the floor', async () => {
    const { clock, store, options } = setup();
    const lease = await TenantLease.acquire(options);
    const record = await lease.markForgotten();
    assert.equal(record.forgottenAtEpoch, 1);
    clock.advance(950);
    const fenced = await rejection(lease.markForgotten());
    assert.ok(fenced instanceof pkg.FencedError);
    assert.equal(fenced.reason, 'lease_expired_locally');
    clock.advance(100);
    const next = await TenantLease.acquire({ ...options, replicaId: 'r2' });
    assert.equal(next.forgottenAtEpoch, 1);
    store.close();
});

test('a JS holder clock works from the write gate (JS thread) and from renew (pool thread)', async () => {
    const store = new SqliteLeaseStore({ path: tempDbPath() });
    const clock = { now: 0, reads: 0, nowMs() { this.reads += 1; return this.now; } };
    const lease = await TenantLease.acquire({ key: 'k', replicaId: 'r', store, ttlMs: 1_000, marginMs: 100, clock });
    assert.equal(lease.clock, clock);
    assert.equal(clock.reads, 2, 'sentAt and the consumed-grant check');
    assert.equal(lease.remainingMs(), 900);
    clock.now = 400;
    lease.assertHeld();
    assert.equal(lease.remainingMs(), 500);
    // Many renewals queued at once: each reads the JS clock from a pool thread while the
    // JS thread also reads it synchronously and calls the synchronous history().
    const renewals = [];
    for (let i = 0; i < 16; i += 1) {
        renewals.push(lease.renew());
        assert.ok(lease.isHeld());
        assert.ok(store.history('k').length >= 1);
    }
    await Promise.all(renewals);
    assert.equal(lease.remainingMs(), 900);
    assert.equal(store.history('k').filter(e => e.op === 'renew').length, 16);
    clock.now = 1_400;
    assert.throws(() => lease.assertHeld(), isFenced('lease_expired_locally'));
    await lease.release();
    store.close();
});

test('the system monotonic clock is the default, and the exported object selects it', async () => {
    const store = new SqliteLeaseStore({ path: tempDbPath() });
    const lease = await TenantLease.acquire({ key: 'k', replicaId: 'r', store, ttlMs: 60_000, marginMs: 1_000 });
    assert.equal(lease.clock, pkg.systemMonotonicClock);
    const remaining = lease.remainingMs();
    assert.ok(remaining > 0 && remaining <= 59_000);
    lease.assertHeld();
    assert.equal(typeof pkg.systemMonotonicClock.nowMs(), 'number');
    await lease.release();
    store.close();
});

test('a throwing or non-numeric holder clock fails closed with the host exception', async () => {
    const store = new SqliteLeaseStore({ path: tempDbPath() });
    const boom = new Error('clock broke');
    let read = () => 0;
    const clock = { nowMs: () => read() };
    const lease = await TenantLease.acquire({ key: 'k', replicaId: 'r', store, ttlMs: 1_000, marginMs: 100, clock });
    read = () => { throw boom; };
    assert.throws(() => lease.assertHeld(), error => error === boom);
    assert.equal(lease.isHeld(), false);
    assert.equal(await rejection(lease.renew()), boom);
    // A number that is no point in time closes the gate (the reference would compare NaN
    // as open); a reading that is not a number is refused.
    for (const bad of [NaN, Infinity, -Infinity]) {
        read = () => bad;
        assert.throws(() => lease.assertHeld(), pkg.FencedError);
        assert.equal(lease.isHeld(), false);
        assert.ok((await rejection(lease.renew())) instanceof RangeError);
    }
    for (const bad of [undefined, '5']) {
        read = () => bad;
        assert.throws(() => lease.assertHeld(), RangeError);
        assert.equal(lease.isHeld(), false);
        assert.ok((await rejection(lease.renew())) instanceof RangeError);
    }
    // A failed renewal is not a refusal: the lease is still held once the clock works again.
    read = () => 10;
    lease.assertHeld();
    await lease.renew();
    assert.equal(lease.remainingMs(), 900);
    const acquireBoom = await rejection(TenantLease.acquire({ key: 'k2', replicaId: 'r', store, ttlMs: 1_000, marginMs: 100, clock: { nowMs() { throw boom; } } }));
    assert.equal(acquireBoom, boom);
    store.close();
});

test('a store with a JS nowMs serves a lease, each call carrying a fresh reading', async () => {
    const wall = { now: 50_000 };
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: () => wall.now });
    const clock = new ManualClock(0);
    const lease = await TenantLease.acquire({ key: 'k', replicaId: 'r', store, ttlMs: 1_000, marginMs: 100, clock });
    assert.equal((await store.read('k')).leaseUntilMs, 51_000);
    wall.now = 50_600;
    clock.advance(600);
    await lease.renew();
    assert.equal((await store.read('k')).leaseUntilMs, 51_600);
    wall.now = 50_700;
    assert.equal((await lease.markForgotten()).forgottenAtEpoch, 1);
    wall.now = 50_800;
    await lease.release();
    assert.deepEqual(store.history('k').map(e => [e.op, e.atMs]), [['acquire', 50_000], ['renew', 50_600], ['forget', 50_700], ['release', 50_800]]);
    store.close();
});
