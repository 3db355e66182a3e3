'use strict';
/**
 * The lease keeper through the package. The timing rules run on manual clocks, a keeper
 * without a thread and explicit tick() calls, so every step is decided by the test; the
 * keeper's own thread runs on real time with short TTLs and waits for conditions, never for
 * a duration that the assertions depend on.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Worker } = require('node:worker_threads');

const pkg = require('..');
const { tempDbPath, rejection } = require('./helpers');

const { LeaseKeeper, ManualClock, SqliteLeaseStore } = pkg;
const PACKAGE = path.join(__dirname, '..');

const WALL_START = 1_000_000;
const TTL = 3_000;
const MARGIN = 300;
/** The default renew fraction is a third of the TTL. */
const INTERVAL = TTL / 3;

/** A keeper without a thread on a store and a holder clock that only the test moves. */
function manualKeeper(options = {}) {
    const wall = new ManualClock(WALL_START);
    const clock = new ManualClock(0);
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: wall });
    const events = [];
    const keeper = LeaseKeeper.start({
        store,
        replicaId: 'r1',
        ttlMs: TTL,
        marginMs: MARGIN,
        clock,
        withoutThread: true,
        onEvent: event => events.push(event),
        ...options,
    });
    /** Both clocks move together, as they do when nothing is skewed. */
    const advance = ms => {
        wall.advance(ms);
        clock.advance(ms);
    };
    return { wall, clock, store, keeper, events, advance };
}

function ops(store, key) {
    return store.history(key).map(e => e.op);
}

/** Waits until `condition()` holds, checking every few milliseconds; the cap only stops a hang. */
async function until(condition, what) {
    const cap = Date.now() + 60_000;
    while (!(await condition())) {
        if (Date.now() > cap) assert.fail(`gave up waiting for ${what}`);
        await new Promise(resolve => setTimeout(resolve, 10));
    }
}

test('a kept lease is renewed a third of its TTL after its last renewal, the whole round in one batch', async () => {
    const { store, keeper, events, advance, clock } = manualKeeper();
    const a = await keeper.acquire('a');
    const b = await keeper.acquire('b');
    assert.ok(a instanceof pkg.TenantLease);
    assert.deepEqual([a.key, a.replicaId, a.epoch, a.ttlMs, a.marginMs, a.store, a.clock], ['a', 'r1', 1, TTL, MARGIN, store, clock]);
    assert.equal(keeper.size, 2);
    assert.equal(a.remainingMs(), TTL - MARGIN);

    // Nothing is due yet: no store call.
    assert.deepEqual(await keeper.tick(), { batches: 0, renewed: 0, lost: 0, failed: 0, nextDueMs: INTERVAL });
    advance(INTERVAL - 1);
    assert.equal((await keeper.tick()).batches, 0);
    advance(1);
    assert.deepEqual(await keeper.tick(), { batches: 1, renewed: 2, lost: 0, failed: 0, nextDueMs: 2 * INTERVAL });
    // The fence moved exactly as a single renew would: from the time before the batch was sent.
    assert.equal(a.remainingMs(), TTL - MARGIN);
    assert.equal(b.remainingMs(), TTL - MARGIN);
    assert.deepEqual(await store.read('a'), { key: 'a', owner: 'r1', epoch: 1, leaseUntilMs: WALL_START + INTERVAL + TTL, forgottenAtEpoch: 0 });
    assert.deepEqual(ops(store, 'a'), ['acquire', 'renew']);
    assert.deepEqual(ops(store, 'b'), ['acquire', 'renew']);
    assert.deepEqual(events, []);
    await keeper.shutdown();
});

test('maxBatch splits a round into store calls of at most that many leases', async () => {
    const { store, keeper, advance } = manualKeeper({ maxBatch: 2 });
    for (const key of ['a', 'b', 'c', 'd', 'e']) await keeper.acquire(key);
    advance(INTERVAL);
    const report = await keeper.tick();
    assert.equal(report.batches, 3);
    assert.equal(report.renewed, 5);
    assert.equal(store.history().filter(e => e.op === 'renew').length, 5);
    await keeper.shutdown();
});

test('a refused renewal is told as lost on the event loop before tick settles; the gate closes', async () => {
    const { store, keeper, events, advance } = manualKeeper();
    const a = await keeper.acquire('a');
    const b = await keeper.acquire('b');
    // Someone else takes b: the keeper's epoch of it is no longer held in the store.
    await store.release('b', 'r1', 1);
    await store.acquire('b', 'r2', TTL);
    advance(INTERVAL);
    const report = await keeper.tick();
    assert.deepEqual([report.renewed, report.lost, report.failed], [1, 1, 0]);
    assert.equal(events.length, 1);
    const [lost] = events;
    assert.deepEqual(Object.keys(lost).sort(), ['epoch', 'error', 'key', 'kind']);
    assert.deepEqual([lost.kind, lost.key, lost.epoch], ['lost', 'b', 1]);
    assert.ok(lost.error instanceof pkg.LeaseLostError);
    assert.equal(lost.error.code, 'GOTRY_TENANT_LEASE_LOST');
    assert.throws(() => b.assertHeld(), error => error instanceof pkg.FencedError && error.reason === 'lease_lost');
    a.assertHeld();
    assert.equal(keeper.size, 1);
    assert.equal(keeper.get('b'), undefined);
    await keeper.shutdown();
});

test('a passed fence is told as fenced_locally, and resumed when a renewal at the same epoch reopens it', async () => {
    const { wall, clock, store, keeper, events } = manualKeeper();
    const a = await keeper.acquire('a');
    // The holder's clock runs past the fence while the store's lease has not run out.
    clock.advance(TTL - MARGIN);
    wall.advance(INTERVAL);
    assert.throws(() => a.assertHeld(), error => error.reason === 'lease_expired_locally');
    const report = await keeper.tick();
    assert.equal(report.renewed, 1);
    assert.deepEqual(events.map(e => [e.kind, e.key, e.epoch]), [['fenced_locally', 'a', 1], ['resumed', 'a', 1]]);
    assert.equal(events[0].error, undefined);
    a.assertHeld();
    assert.equal(a.remainingMs(), TTL - MARGIN);
    assert.deepEqual(ops(store, 'a'), ['acquire', 'renew']);
    await keeper.shutdown();
});

test('a store that fails is told as renew_failed; the fences stay and the leases are tried again', async () => {
    const { store, keeper, events, advance } = manualKeeper();
    const a = await keeper.acquire('a');
    await keeper.acquire('b');
    store.close();
    advance(INTERVAL);
    const report = await keeper.tick();
    assert.deepEqual([report.batches, report.renewed, report.failed], [1, 0, 2]);
    assert.equal(report.nextDueMs, INTERVAL + INTERVAL / 4, 'tried again a quarter interval later');
    assert.deepEqual(events.map(e => [e.kind, e.leases]), [['renew_failed', 2]]);
    assert.deepEqual(Object.keys(events[0]).sort(), ['error', 'kind', 'leases']);
    assert.ok(events[0].error instanceof pkg.LeaseStoreUnavailableError);
    // The fence is where the acquire put it.
    assert.equal(a.remainingMs(), TTL - MARGIN - INTERVAL);
    assert.equal(keeper.size, 2);
    const shutdown = await keeper.shutdown();
    assert.deepEqual(shutdown.released, []);
    assert.deepEqual(shutdown.failed.map(f => f.key), ['a', 'b']);
    assert.ok(shutdown.failed.every(f => f.error instanceof pkg.LeaseStoreUnavailableError));
});

test('remove releases one lease; get gives a handle on the same gate; a lease closed through it leaves at the next round', async () => {
    const { store, keeper, events, advance } = manualKeeper();
    const a = await keeper.acquire('a');
    const b = await keeper.acquire('b');
    await keeper.acquire('c');
    assert.equal(await keeper.remove('a'), true);
    assert.equal(await keeper.remove('a'), false);
    assert.equal(await keeper.remove('never'), false);
    assert.throws(() => a.assertHeld(), error => error.reason === 'lease_released');
    assert.deepEqual(ops(store, 'a'), ['acquire', 'release']);
    assert.equal(keeper.get('a'), undefined);

    const handle = keeper.get('b');
    assert.ok(handle instanceof pkg.TenantLease);
    assert.deepEqual([handle.key, handle.epoch, handle.remainingMs()], ['b', 1, b.remainingMs()]);
    await handle.release();
    assert.equal(b.isHeld(), false);
    assert.equal(keeper.size, 2, 'still counted until the next round');
    advance(INTERVAL);
    assert.equal((await keeper.tick()).renewed, 1);
    assert.equal(keeper.size, 1);
    assert.deepEqual(events, [], 'the host closed it itself: no event');
    // A released key can be acquired again, at the next epoch.
    assert.equal((await keeper.acquire('a')).epoch, 2);
    await keeper.shutdown();
});

test('acquire refuses a held key with LeaseHeldError and a bad key with a RangeError', async () => {
    const { store, keeper } = manualKeeper();
    await store.acquire('taken', 'r2', TTL);
    const held = await rejection(keeper.acquire('taken'));
    assert.ok(held instanceof pkg.LeaseHeldError);
    assert.equal(held.record.owner, 'r2');
    await keeper.acquire('mine');
    assert.ok((await rejection(keeper.acquire('mine'))) instanceof pkg.LeaseHeldError);
    for (const bad of ['', 'x'.repeat(201), 'a\uD800', 42, undefined]) {
        assert.ok((await rejection(keeper.acquire(bad))) instanceof RangeError, String(bad));
    }
    assert.throws(() => keeper.get(42), RangeError);
    assert.ok((await rejection(keeper.remove('b\uDC00'))) instanceof RangeError);
    assert.equal(keeper.size, 1);
    await keeper.shutdown();
});

test('shutdown releases every lease, tells no event after it, and leaves the keeper refusing work', async () => {
    const { store, keeper, events, advance } = manualKeeper();
    const leases = [await keeper.acquire('b'), await keeper.acquire('a')];
    // A lost lease's event, queued by the round, reaches the host before shutdown settles.
    await store.release('b', 'r1', 1);
    await store.acquire('b', 'r2', TTL);
    advance(INTERVAL);
    await keeper.tick();
    const report = await keeper.shutdown(1_000);
    assert.deepEqual(report, { released: ['a'], failed: [], timedOut: [] });
    assert.deepEqual(events.map(e => e.kind), ['lost']);
    assert.ok(leases.every(lease => !lease.isHeld()));
    assert.deepEqual(ops(store, 'a'), ['acquire', 'renew', 'release']);
    assert.equal(keeper.size, 0);
    assert.deepEqual(await keeper.shutdown(1_000), { released: [], failed: [], timedOut: [] });
    assert.ok((await rejection(keeper.acquire('c'))) instanceof pkg.LeaseStoreUnavailableError);
    assert.ok((await rejection(keeper.tick())) instanceof pkg.LeaseStoreUnavailableError);
    assert.equal(events.length, 1);
});

test('a shutdown deadline already passed starts no release: the leases run out on their own', async () => {
    const { store, keeper } = manualKeeper();
    const a = await keeper.acquire('a');
    await keeper.acquire('b');
    assert.deepEqual(await keeper.shutdown(0), { released: [], failed: [], timedOut: ['a', 'b'] });
    // No longer renewed, but still held until its fence: the handle may still release it.
    a.assertHeld();
    assert.deepEqual(ops(store, 'a'), ['acquire']);
    await a.release();
    assert.deepEqual(ops(store, 'a'), ['acquire', 'release']);
    for (const bad of [-1, 1.5, '10', NaN]) {
        const { keeper: other } = manualKeeper();
        assert.ok((await rejection(other.shutdown(bad))) instanceof RangeError, String(bad));
        await other.shutdown();
    }
});

test('an onEvent handler that throws or rejects is reported as a warning and the keeper carries on', async t => {
    const warnings = [];
    const onWarning = warning => warnings.push(warning);
    process.on('warning', onWarning);
    t.after(() => process.off('warning', onWarning));
    const boom = new Error('handler broke');
    const seen = [];
    const { store, keeper, advance } = manualKeeper({
        onEvent: event => {
            seen.push(event.key);
            if (event.key === 'a') throw boom;
            return Promise.reject(boom);
        },
    });
    await keeper.acquire('a');
    await keeper.acquire('b');
    const c = await keeper.acquire('c');
    for (const key of ['a', 'b']) {
        await store.release(key, 'r1', 1);
        await store.acquire(key, 'r2', TTL);
    }
    advance(INTERVAL);
    assert.equal((await keeper.tick()).lost, 2);
    assert.deepEqual(seen.sort(), ['a', 'b'], 'the second event came despite the first handler call throwing');
    await until(() => warnings.length >= 2, 'both warnings');
    for (const warning of warnings) {
        assert.equal(warning.name, 'LeaseKeeperWarning');
        assert.equal(warning.code, 'GOTRY_KEEPER_ON_EVENT_FAILED');
        assert.equal(warning.cause, boom);
    }
    // The keeper still renews.
    advance(INTERVAL);
    assert.equal((await keeper.tick()).renewed, 1);
    c.assertHeld();
    await keeper.shutdown();
});

test('start refuses bad options with the reference error kinds', () => {
    const wall = new ManualClock(0);
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: wall });
    const base = { store, replicaId: 'r', ttlMs: 3_000, marginMs: 300, withoutThread: true };
    const ranges = [
        { ttlMs: 99 }, { ttlMs: 3_000.5 }, { ttlMs: '3000' }, { marginMs: 3_000 }, { marginMs: -1 },
        { replicaId: '' }, { replicaId: 'r\uD800' }, { replicaId: 7 },
        { renewFraction: 0.95 }, { renewFraction: 0 }, { renewFraction: NaN }, { renewFraction: Infinity }, { renewFraction: '0.3' },
        { maxBatch: 0 }, { maxBatch: -1 }, { maxBatch: 1.5 }, { maxBatch: 2 ** 53 },
    ];
    for (const bad of ranges) assert.throws(() => LeaseKeeper.start({ ...base, ...bad }), RangeError, JSON.stringify(bad));
    const types = [
        { clock: { nowMs: () => 0 } }, { clock: pkg.systemMonotonicClock.nowMs }, { store: {} }, { store: undefined },
        { store: new SqliteLeaseStore({ path: tempDbPath(), nowMs: () => 0 }) },
        { onEvent: 'log' }, { withoutThread: 'yes' },
    ];
    for (const bad of types) assert.throws(() => LeaseKeeper.start({ ...base, ...bad }), TypeError);
    assert.throws(() => LeaseKeeper.start(), TypeError);
    assert.throws(() => new LeaseKeeper(base), TypeError);
    const keeper = LeaseKeeper.start({ ...base, renewFraction: 0.5, maxBatch: 1 });
    assert.equal(keeper.replicaId, 'r');
    assert.equal(keeper.clock, pkg.systemMonotonicClock);
    return keeper.shutdown();
});

test("the keeper's thread renews on real time and tells a lost lease on the event loop", async () => {
    // Renewed every 667 ms, fenced 1,800 ms after a renewal was sent: a stall of the machine of
    // over a second still leaves every lease held.
    const ttlMs = 2_000;
    const store = new SqliteLeaseStore({ path: tempDbPath() });
    const events = [];
    const keeper = LeaseKeeper.start({ store, replicaId: 'r1', ttlMs, marginMs: 200, onEvent: event => events.push(event) });
    const leases = [];
    for (const key of ['a', 'b', 'c']) leases.push(await keeper.acquire(key));
    const renewals = key => store.history(key).filter(e => e.op === 'renew').length;
    // Renewed again and again: each lease stays held past its TTL.
    await until(() => ['a', 'b', 'c'].every(key => renewals(key) >= 3), 'three renewals of each lease');
    for (const lease of leases) lease.assertHeld();

    // Another replica takes b over: the keeper's next renewal of it is refused.
    await store.release('b', 'r1', 1);
    await store.acquire('b', 'r2', 60_000);
    const lost = () => events.filter(e => e.kind === 'lost');
    await until(() => lost().length > 0, 'the lost event');
    assert.deepEqual(lost().map(e => [e.key, e.epoch]), [['b', 1]]);
    assert.ok(lost()[0].error instanceof pkg.LeaseLostError);
    assert.equal(leases[1].isHeld(), false);

    const report = await keeper.shutdown(5_000);
    assert.deepEqual(report, { released: ['a', 'c'], failed: [], timedOut: [] });
    // Nothing renews after shutdown: the log ends with the releases, and stays so for two
    // renewal intervals.
    const entries = store.history().length;
    assert.equal(store.history().filter(e => e.op === 'release').length, 3);
    await new Promise(resolve => setTimeout(resolve, (2 * ttlMs) / 3));
    assert.equal(store.history().length, entries);
    assert.equal(lost().length, 1);
    store.close();
});

test('a process with a running keeper and held leases exits on its own, shut down or not', () => {
    const script = `
        const { SqliteLeaseStore, LeaseKeeper } = require(process.argv[1]);
        (async () => {
            const store = new SqliteLeaseStore({ path: process.argv[2] });
            const keeper = LeaseKeeper.start({ store, replicaId: 'r', ttlMs: 2000, marginMs: 50, onEvent: () => {} });
            const lease = await keeper.acquire('k');
            // Long enough for a renewal round, well inside the first fence.
            await new Promise(resolve => setTimeout(resolve, 800));
            lease.assertHeld();
            if (process.argv[3] === 'shutdown') console.log(JSON.stringify(await keeper.shutdown()));
            console.log('held', lease.epoch);
        })();
    `;
    for (const mode of ['running', 'shutdown']) {
        // The timeout only stops a hung child; the assertion is that it exited by itself.
        const child = spawnSync(process.execPath, ['-e', script, PACKAGE, tempDbPath(), mode], { encoding: 'utf8', timeout: 60_000 });
        assert.equal(child.signal, null, `${mode}: the child did not exit on its own`);
        assert.equal(child.status, 0, child.stderr);
        const expected = mode === 'shutdown' ? '{"released":["k"],"failed":[],"timedOut":[]}\nheld 1' : 'held 1';
        assert.equal(child.stdout.trim(), expected);
    }
});

test('a keeper the host no longer references keeps renewing until shutdown, through garbage collection', () => {
    const script = `
        const { SqliteLeaseStore, LeaseKeeper } = require(process.argv[1]);
        (async () => {
            const store = new SqliteLeaseStore({ path: process.argv[2] });
            // The keeper itself is referenced by nothing here; only its lease is.
            const lease = await LeaseKeeper.start({ store, replicaId: 'r', ttlMs: 300, marginMs: 50 }).acquire('k');
            const renewals = () => store.history('k').filter(e => e.op === 'renew').length;
            const cap = Date.now() + 60000;
            while (renewals() < 5 && Date.now() < cap) {
                global.gc();
                await new Promise(resolve => setTimeout(resolve, 20));
            }
            console.log(renewals() >= 5, lease.epoch);
        })().catch(error => { console.error(error); process.exit(1); });
    `;
    const child = spawnSync(process.execPath, ['--expose-gc', '-e', script, PACKAGE, tempDbPath()], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'true 1', 'five renewals while collecting garbage');
});

test('a keeper that was shut down is garbage collected once the host drops it', () => {
    const script = `
        const { SqliteLeaseStore, LeaseKeeper } = require(process.argv[1]);
        const collected = new FinalizationRegistry(name => console.log('collected', name));
        (async () => {
            const store = new SqliteLeaseStore({ path: process.argv[2] });
            // Each in a function of its own: a variable of this scope could keep one alive.
            const useOnce = async (name, onEvent) => {
                const keeper = LeaseKeeper.start({ store, replicaId: 'r', ttlMs: 300, marginMs: 50, onEvent });
                await keeper.acquire(name);
                await keeper.shutdown();
                collected.register(keeper, name);
            };
            await useOnce('with onEvent', () => {});
            await useOnce('without', undefined);
            for (let i = 0; i < 50; i += 1) {
                global.gc();
                await new Promise(resolve => setTimeout(resolve, 20));
            }
        })();
    `;
    const child = spawnSync(process.execPath, ['--expose-gc', '-e', script, PACKAGE, tempDbPath()], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(child.stdout.trim().split('\n').sort(), ['collected with onEvent', 'collected without']);
});

test('a worker running a keeper can be terminated without shutting it down', async () => {
    const source = `
        const { parentPort, workerData } = require('node:worker_threads');
        const { SqliteLeaseStore, LeaseKeeper } = require(workerData.pkg);
        (async () => {
            const store = new SqliteLeaseStore({ path: workerData.file });
            const keeper = LeaseKeeper.start({ store, replicaId: 'w', ttlMs: 150, marginMs: 20, onEvent: () => {} });
            await keeper.acquire('w1');
            await keeper.acquire('w2');
            // A server's loop has work of its own; the keeper would not keep it alive.
            setInterval(() => {}, 1_000);
            parentPort.postMessage('holding');
        })().catch(error => parentPort.postMessage(String(error && error.stack)));
    `;
    const file = tempDbPath();
    const worker = new Worker(source, { eval: true, workerData: { pkg: PACKAGE, file } });
    const message = await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
    });
    assert.equal(message, 'holding');
    // Let the keeper's thread renew at least once while the worker lives, then end it.
    const store = new SqliteLeaseStore({ path: file });
    await until(() => store.history('w1').some(e => e.op === 'renew'), 'a renewal in the worker');
    await worker.terminate();
    // The leases run out on their own; another replica takes one over once they have.
    await until(async () => {
        try {
            await store.acquire('w1', 'main', 1_000);
            return true;
        } catch (error) {
            if (!(error instanceof pkg.LeaseHeldError)) throw error;
            return false;
        }
    }, 'the worker\'s lease to run out');
    assert.equal((await store.read('w1')).epoch, 2);
    store.close();
});
