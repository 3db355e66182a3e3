'use strict';
/**
 * The tenant router through the package: capacity, two replicas on one lease
 * store, handoffs that carry a tenant's data to the next replica, draining, drain timeouts,
 * close, strict durability, a lost lease, host functions (verify, snapshot, onEvent), and
 * three processes moving tenants between them.
 *
 * Real SQLite lease stores (on a manual wall clock, so that a lease expires only when a test
 * says so) and directory durable stores; ledgers written with better-sqlite3.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');

const pkg = require('..');
const { tempDbPath, rejection, isA, LEDGER, appendLedger, ledgerOf: ledgerEntries } = require('./helpers');

const {
    TenantRouter, SqliteLeaseStore, DirectoryDurableStore, EpochCopies, ManualClock, TenantLease,
} = pkg;

const ORG = 'acme';
const TTL_MS = 3_000;
const MARGIN_MS = 500;

function tempDir() {
    return path.dirname(tempDbPath('unused'));
}

function newTenant() {
    const tenant = `t-${crypto.randomBytes(16).toString('hex')}`;
    return { tenant, key: pkg.leaseKeyFor(ORG, tenant) };
}

/** One lease store (on a manual wall clock) and one durable store that replicas share. */
function world() {
    const dir = tempDir();
    const wall = new ManualClock(1_000_000);
    const leaseStore = new SqliteLeaseStore({ path: path.join(dir, 'leases.db'), nowMs: wall });
    const durableDir = path.join(dir, 'durable');
    const durableStore = new DirectoryDurableStore({ path: durableDir });
    const routers = [];
    /** A router of replica `replicaId`, with a state folder of its own. */
    const start = async (replicaId, options = {}) => {
        const events = [];
        const waiters = new Set();
        /**
         * Resolves once `check()` holds, tried again as each event is told (no timer polls);
         * the bound keeps a test that would hang from hanging, it is no time limit on the router.
         */
        const whenTold = (check, what, ms = 20_000) => new Promise((resolve, reject) => {
            if (check()) return resolve();
            const timer = setTimeout(() => {
                waiters.delete(waiter);
                reject(new Error(`no event told for ${what} within ${ms} ms`));
            }, ms);
            const waiter = () => {
                if (!check()) return;
                clearTimeout(timer);
                waiters.delete(waiter);
                resolve();
            };
            waiters.add(waiter);
        });
        const router = await TenantRouter.start({
            leaseStore,
            durableStore,
            stateRoot: path.join(dir, replicaId),
            replicaId,
            ttlMs: TTL_MS,
            marginMs: MARGIN_MS,
            onEvent: event => {
                events.push(event);
                for (const waiter of [...waiters]) waiter();
            },
            ...options,
        });
        routers.push(router);
        return { router, events, whenTold };
    };
    const cleanup = async () => {
        for (const router of routers) await router.close(100);
        leaseStore.close();
    };
    return { dir, wall, leaseStore, durableStore, durableDir, start, cleanup };
}

/** Runs `body` with a fresh world, cleaned up after it whatever it did. */
async function inWorld(body) {
    const w = world();
    try {
        return await body(w);
    } finally {
        await w.cleanup();
    }
}

/** Appends to the tenant's ledger, one connection per call. */
function append(handle, ...texts) {
    appendLedger(handle.root, ...texts);
}

/** A root's ledger entries; none when it has no ledger yet. */
function ledgerOf(root) {
    return fs.existsSync(path.join(root, LEDGER)) ? ledgerEntries(root) : [];
}

/** A promise and the functions that settle it: a call the test holds in flight. */
function gate() {
    let open;
    const opened = new Promise(resolve => { open = resolve; });
    return { opened, open };
}

const statusOf = (router, key) => router.status().find(status => status.key === key);

test('capacity is refused before the lease, the root or the durable store is touched', () => inWorld(async w => {
    const { router } = await w.start('replica-1', { capacity: 1 });
    assert.equal(router.capacity, 1);
    const first = newTenant();
    const second = newTenant();
    await router.open(ORG, first.tenant);
    const error = await rejection(router.open(ORG, second.tenant));
    assert.ok(isA(pkg.ReplicaAtCapacityError, 'GOTRY_TENANT_REPLICA_AT_CAPACITY')(error));
    assert.equal(error.limit, 1);
    assert.equal(await w.leaseStore.read(second.key), null, 'no lease was acquired');
    assert.deepEqual(w.leaseStore.history(second.key), []);
    assert.equal(fs.existsSync(pkg.tenantRootFor(path.join(w.dir, 'replica-1'), ORG, second.tenant)), false);
    assert.deepEqual(await w.durableStore.list(`orgs/${ORG}/tenants/${second.tenant}/`), []);
    // Opening a tenant already served is no new tenant.
    assert.equal((await router.open(ORG, first.tenant)).epoch, 1);

    const { router: defaults } = await w.start('replica-2');
    assert.ok(Number.isSafeInteger(defaults.capacity) && defaults.capacity >= 1, String(defaults.capacity));
    await assert.rejects(TenantRouter.start({
        leaseStore: w.leaseStore, durableStore: w.durableStore, stateRoot: w.dir, replicaId: 'r', ttlMs: TTL_MS, marginMs: MARGIN_MS, capacity: 0,
    }), RangeError);
}));

test('two replicas on one lease store: the second open is LeaseHeldError naming the owner', () => inWorld(async w => {
    const { router: one } = await w.start('replica-1');
    const { router: two } = await w.start('replica-2');
    const { tenant, key } = newTenant();
    const handle = await one.open(ORG, tenant);
    assert.equal(handle.key, key);
    assert.equal(handle.epoch, 1);
    assert.equal(handle.restoredFrom, null);
    assert.equal(handle.root, pkg.tenantRootFor(path.join(w.dir, 'replica-1'), ORG, tenant));
    handle.assertHeld();
    assert.equal(handle.isHeld(), true);
    const error = await rejection(two.open(ORG, tenant));
    assert.ok(isA(pkg.LeaseHeldError, 'GOTRY_TENANT_LEASE_HELD')(error));
    assert.equal(error.record.owner, 'replica-1');
    assert.equal(error.record.epoch, 1);
    assert.equal(error.record.key, key);
    assert.deepEqual(two.status(), [], 'the refused replica keeps nothing');
    // A replica that does not serve a tenant cannot run or hand it off.
    assert.ok((await rejection(two.run(key, () => 1))) instanceof pkg.LeaseLostError);
    assert.ok((await rejection(two.handoff(key, 100))) instanceof pkg.LeaseLostError);
}));

test('a handoff carries the tenant\'s data to the next replica', () => inWorld(async w => {
    const { router: one, events } = await w.start('replica-1');
    const { router: two } = await w.start('replica-2');
    const { tenant, key } = newTenant();
    await one.open(ORG, tenant);
    assert.equal(await one.run(key, handle => { append(handle, 'a'); return 'first'; }), 'first');
    assert.equal(await one.run(key, async handle => { await null; append(handle, 'b'); }), undefined);
    assert.equal(statusOf(one, key).writesSinceCopy, 2);

    await one.handoff(key, 1_000);
    assert.deepEqual(one.status(), []);
    // Told before the handoff's promise settled: the drain when it began, then the release.
    assert.deepEqual(events, [{ kind: 'draining', key, epoch: 1 }, { kind: 'closed', key, epoch: 1 }]);
    const record = await w.leaseStore.read(key);
    assert.ok(record.leaseUntilMs <= w.wall.nowMs(), 'released: the next replica may start at once');

    const handle = await two.open(ORG, tenant);
    assert.equal(handle.epoch, 2);
    assert.deepEqual(handle.restoredFrom, { epoch: 1, seq: 1 });
    assert.deepEqual(await two.run(key, h => ledgerOf(h.root)), ['a', 'b']);
    assert.deepEqual(statusOf(two, key).lastCopy, { epoch: 1, seq: 1 });
}));

test('a draining tenant refuses new calls and opens; the handoff waits for the running call', () => inWorld(async w => {
    const { router, events, whenTold } = await w.start('replica-1');
    const { tenant, key } = newTenant();
    await router.open(ORG, tenant);
    const entered = gate();
    const held = gate();
    const running = router.run(key, async handle => { entered.open(); await held.opened; append(handle, 'slow'); return 'slow done'; });
    await entered.opened;
    assert.equal(statusOf(router, key).inFlight, 1);
    const handoff = router.handoff(key, 10_000);
    await whenTold(() => events.some(e => e.kind === 'draining' && e.key === key), 'the drain');
    assert.equal(statusOf(router, key).state, 'draining');
    const refused = await rejection(router.run(key, () => 'never'));
    assert.ok(isA(pkg.TenantDrainingError, 'GOTRY_TENANT_DRAINING')(refused));
    assert.ok(isA(pkg.TenantDrainingError, 'GOTRY_TENANT_DRAINING')(await rejection(router.open(ORG, tenant))));
    assert.ok(isA(pkg.TenantDrainingError, 'GOTRY_TENANT_DRAINING')(await rejection(router.handoff(key, 100))));
    held.open();
    assert.equal(await running, 'slow done');
    await handoff;
    assert.deepEqual(router.status(), []);
    const copies = await new EpochCopies(w.durableStore).list(key);
    assert.deepEqual(copies.map(c => [c.epoch, c.seq, c.complete]), [[1, 1, true]], 'the final copy holds the slow call');
}));

test('a drain timeout leaves the tenant serving, nothing copied or released', () => inWorld(async w => {
    const { router, events } = await w.start('replica-1');
    const { tenant, key } = newTenant();
    await router.open(ORG, tenant);
    const entered = gate();
    const held = gate();
    const running = router.run(key, async () => { entered.open(); await held.opened; return 'late'; });
    await entered.opened;
    assert.equal(statusOf(router, key).inFlight, 1);
    const error = await rejection(router.handoff(key, 50));
    assert.ok(isA(pkg.DrainTimeoutError, 'GOTRY_TENANT_DRAIN_TIMEOUT')(error));
    assert.equal(error.inFlight, 1);
    assert.equal(error.timeoutMs, 50);
    assert.equal(statusOf(router, key).state, 'serving');
    assert.equal(await router.run(key, handle => { append(handle, 'meanwhile'); return 'served'; }), 'served');
    held.open();
    assert.equal(await running, 'late');
    assert.equal(statusOf(router, key).inFlight, 0);
    assert.deepEqual(await w.durableStore.list(`orgs/${ORG}/tenants/${tenant}/epochs/00000000000000000001/00000000000000000001/`), []);
    assert.equal((await w.leaseStore.read(key)).owner, 'replica-1');
    assert.ok((await w.leaseStore.read(key)).leaseUntilMs > w.wall.nowMs(), 'still held');
    // The drain was told when it began; nothing was closed.
    assert.deepEqual(events, [{ kind: 'draining', key, epoch: 1 }]);
}));

test('a call that throws ends unacknowledged and rejects with that very value', () => inWorld(async w => {
    const { router } = await w.start('replica-1', { copyPolicy: { durability: 'strict' } });
    const { tenant, key } = newTenant();
    await router.open(ORG, tenant);
    const thrown = new Error('the call failed');
    assert.equal(await rejection(router.run(key, () => { throw thrown; })), thrown);
    assert.equal(await rejection(router.run(key, async () => { throw thrown; })), thrown);
    // An error that looks like a native one is still the host's own value.
    const lookalike = Object.assign(new Error('mine'), { code: 'GOTRY_TENANT_LEASE_HELD' });
    assert.equal(await rejection(router.run(key, () => Promise.reject(lookalike))), lookalike);
    const status = statusOf(router, key);
    assert.equal(status.inFlight, 0);
    assert.equal(status.writesSinceCopy, 0);
    assert.equal(status.lastCopy, null, 'a failed call waits for no copy, even in strict durability');
    assert.ok((await rejection(router.run(key, 'not a function'))) instanceof TypeError);
    assert.equal(statusOf(router, key).inFlight, 0);
    // The tenant drains at once: nothing is in flight.
    await router.handoff(key, 100);
}));

test('close hands every tenant off, then opens are RouterClosedError', () => inWorld(async w => {
    const { router, events } = await w.start('replica-1');
    const a = newTenant();
    const b = newTenant();
    await router.open(ORG, a.tenant);
    await router.open(ORG, b.tenant);
    await router.run(a.key, handle => append(handle, 'in a'));
    const report = await router.close(2_000);
    assert.deepEqual(report, { handedOff: [a.key, b.key].sort(), timedOut: [], failed: [] });
    assert.deepEqual(
        events.map(e => [e.kind, e.key]).sort(),
        [['draining', a.key], ['closed', a.key], ['draining', b.key], ['closed', b.key]].sort(),
    );
    assert.ok(isA(pkg.RouterClosedError, 'GOTRY_TENANT_ROUTER_CLOSED')(await rejection(router.open(ORG, a.tenant))));
    assert.deepEqual(router.status(), []);
    for (const { key } of [a, b]) assert.ok((await w.leaseStore.read(key)).leaseUntilMs <= w.wall.nowMs());
    const { router: next } = await w.start('replica-2');
    const handle = await next.open(ORG, a.tenant);
    assert.deepEqual(ledgerOf(handle.root), ['in a']);
}));

test('an open in flight when close is called rejects with RouterClosedError', () => inWorld(async w => {
    const { router: one } = await w.start('replica-1');
    const { tenant, key } = newTenant();
    await one.open(ORG, tenant);
    await one.run(key, handle => append(handle, 'one'));
    await one.handoff(key, 1_000);
    // The next replica's open is held inside its restore: its verify waits for the test.
    const entered = gate();
    const release = gate();
    const { router: two } = await w.start('replica-2', {
        verify: async () => { entered.open(); await release.opened; return true; },
    });
    const opening = rejection(two.open(ORG, tenant));
    await entered.opened;
    assert.deepEqual(two.status().map(s => s.state), ['opening']);
    assert.deepEqual(await two.close(1_000), { handedOff: [], timedOut: [], failed: [] });
    release.open();
    // Close cut it: the host asked a closed router, whatever its lease did meanwhile.
    const error = await opening;
    assert.ok(isA(pkg.RouterClosedError, 'GOTRY_TENANT_ROUTER_CLOSED')(error), String(error));
    assert.deepEqual(two.status(), []);
}));

test('strict durability: a call resolves once a copy holds it; a failing store leaves it in doubt', () => inWorld(async w => {
    const { router } = await w.start('replica-1', { copyPolicy: { durability: 'strict' } });
    const copies = new EpochCopies(w.durableStore);
    const { tenant, key } = newTenant();
    await router.open(ORG, tenant);
    for (const [i, text] of ['one', 'two'].entries()) {
        await router.run(key, handle => append(handle, text));
        const listed = await copies.list(key);
        assert.deepEqual(listed.map(c => [c.seq, c.complete]).at(-1), [i + 1, true], 'the copy is there when run resolves');
        assert.deepEqual(statusOf(router, key).lastCopy, { epoch: 1, seq: i + 1 });
        assert.equal(statusOf(router, key).writesSinceCopy, 0);
    }
    // The store breaks: the call's effects cannot be acknowledged.
    const orgs = path.join(w.durableDir, 'orgs');
    fs.renameSync(orgs, `${orgs}.aside`);
    fs.writeFileSync(orgs, 'in the way');
    try {
        const error = await rejection(router.run(key, handle => { append(handle, 'three'); return 'acknowledged?'; }));
        // The handler ran: the call is in doubt, not refused; its cause is the store's failure.
        assert.ok(isA(pkg.CallInDoubtError, 'GOTRY_TENANT_CALL_IN_DOUBT')(error), String(error));
        assert.ok(isA(pkg.DurableStoreUnavailableError, 'GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE')(error.cause));
        assert.equal(error.cause.cause.code, 'ENOTDIR');
        const status = statusOf(router, key);
        assert.equal(status.inFlight, 0);
        assert.match(status.lastCopyError, /GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE/);
    } finally {
        fs.rmSync(orgs);
        fs.renameSync(`${orgs}.aside`, orgs);
    }
    await router.run(key, handle => append(handle, 'four'));
    assert.equal(statusOf(router, key).lastCopyError, null);
    // The next replica sees everything of the acknowledged calls.
    await router.handoff(key, 1_000);
    const { router: next } = await w.start('replica-2');
    const handle = await next.open(ORG, tenant);
    assert.deepEqual(ledgerOf(handle.root), ['one', 'two', 'three', 'four']);
}));

test('strict durability: a call behind a long one waits for a quiet tenant on the router\'s clock, then is in doubt with TenantBusyError; its write reaches the next copy', () => inWorld(async w => {
    // A lease longer than the wait, so that no renewal (no tick) is needed meanwhile.
    const { router } = await w.start('replica-1', {
        clock: w.wall, withoutThread: true, ttlMs: 600_000, copyPolicy: { durability: 'strict' },
    });
    const { tenant, key } = newTenant();
    await router.open(ORG, tenant);
    const long = gate();
    let longReturned = false;
    const longCall = router.run(key, async () => { await long.opened; longReturned = true; });
    let settled = false;
    // Its rejection is taken at once, so the wait below never leaves it unhandled.
    const short = rejection(router.run(key, handle => append(handle, 'short'))).finally(() => { settled = true; });
    // Only the router's clock ends the wait: a minute of it, moved a step at a time.
    for (let step = 0; step < 600 && !settled; step++) {
        w.wall.advance(100);
        await new Promise(resolve => setTimeout(resolve, 2));
    }
    const error = await short;
    assert.equal(longReturned, false, 'the short call gave up while the long one still ran');
    // The handler ran: in doubt, not refused; the busy tenant is why.
    assert.ok(isA(pkg.CallInDoubtError, 'GOTRY_TENANT_CALL_IN_DOUBT')(error), String(error));
    assert.ok(isA(pkg.TenantBusyError, 'GOTRY_TENANT_BUSY')(error.cause), String(error.cause));
    long.open();
    await longCall;
    await router.handoff(key, 1_000);
    const { router: next } = await w.start('replica-2');
    assert.deepEqual(ledgerOf((await next.open(ORG, tenant)).root), ['short']);
}));

test('keepCopies bounds the copies a strict router keeps of a tenant; 0 keeps them all, a negative count is refused', () => inWorld(async w => {
    const copies = new EpochCopies(w.durableStore);
    const complete = async key => (await copies.list(key)).filter(c => c.complete).length;
    for (const [replica, keepCopies, bound] of [['replica-1', 2, 4], ['replica-2', 0, Infinity]]) {
        const { router, events } = await w.start(replica, { copyPolicy: { durability: 'strict' }, keepCopies });
        const { tenant, key } = newTenant();
        await router.open(ORG, tenant);
        let most = 0;
        for (let n = 0; n < 9; n += 1) {
            await router.run(key, handle => append(handle, `row ${n}`));
            most = Math.max(most, await complete(key));
        }
        // `keepCopies` after a collection, as many more until the next; every one when 0.
        if (bound === Infinity) assert.equal(most, 9);
        else assert.ok(most >= keepCopies && most <= bound, `${most} copies at most`);
        // Each call's answer told of its copy: no event follows it.
        assert.deepEqual(events.filter(e => e.kind === 'copied'), []);
    }
    await assert.rejects(w.start('replica-3', { keepCopies: -1 }), RangeError);
}));

test('async durability copies written tenants in the background, told as copied, and a failing copy is told as copy_failed', () => inWorld(async w => {
    const { router, events, whenTold } = await w.start('replica-1', { copyPolicy: { durability: 'async', intervalMs: 50 } });
    const { tenant, key } = newTenant();
    await router.open(ORG, tenant);
    await router.run(key, handle => append(handle, 'bg'));
    const copiedEvents = () => events.filter(e => e.kind === 'copied');
    await whenTold(() => copiedEvents().length === 1, 'a background copy');
    const [copied] = copiedEvents();
    assert.deepEqual({ ...copied, bytesUploaded: copied.bytesUploaded > 0 }, { kind: 'copied', key, epoch: 1, seq: 1, bytesUploaded: true });
    assert.deepEqual(statusOf(router, key).lastCopy, { epoch: 1, seq: 1 });
    const orgs = path.join(w.durableDir, 'orgs');
    fs.renameSync(orgs, `${orgs}.aside`);
    fs.writeFileSync(orgs, 'in the way');
    try {
        await router.run(key, handle => append(handle, 'bg 2'));
        await whenTold(() => events.some(e => e.kind === 'copy_failed'), 'copy_failed');
        const failed = events.find(e => e.kind === 'copy_failed');
        assert.equal(failed.key, key);
        assert.equal(failed.epoch, 1);
        assert.ok(failed.error instanceof pkg.DurableStoreUnavailableError, String(failed.error));
        assert.ok(statusOf(router, key).writesSinceCopy >= 1);
    } finally {
        fs.rmSync(orgs);
        fs.renameSync(`${orgs}.aside`, orgs);
    }
    await whenTold(() => copiedEvents().length === 2, 'a good copy again');
    assert.equal(statusOf(router, key).lastCopyError, null);
    assert.ok(copiedEvents()[1].seq > 1, JSON.stringify(copiedEvents()[1]));
}));

test('a lost lease is told as lost then closed; a call in flight that resolved meanwhile is CALL_IN_DOUBT, caused by FENCED', () => inWorld(async w => {
    const { router, events, whenTold } = await w.start('replica-1');
    const idle = newTenant();
    const busy = newTenant();
    await router.open(ORG, idle.tenant);
    const busyHandle = await router.open(ORG, busy.tenant);
    let lostSeen;
    const entered = gate();
    const running = router.run(busy.key, async handle => {
        entered.open();
        await whenTold(() => events.some(e => e.kind === 'lost' && e.key === busy.key), 'the lost event');
        lostSeen = handle.isHeld();
        return 'resolved anyway';
    });
    await entered.opened;
    assert.equal(statusOf(router, busy.key).inFlight, 1);
    // Both leases run out on the store's clock and another replica takes one: the
    // keeper's next renewal (a third of the TTL later) is refused.
    w.wall.advance(TTL_MS + 1);
    const taker = await TenantLease.acquire({ key: idle.key, replicaId: 'replica-2', store: w.leaseStore, ttlMs: TTL_MS, marginMs: MARGIN_MS });
    assert.equal(taker.epoch, 2);
    const error = await rejection(running);
    assert.ok(isA(pkg.CallInDoubtError, 'GOTRY_TENANT_CALL_IN_DOUBT')(error), String(error));
    assert.ok(isA(pkg.FencedError, 'GOTRY_TENANT_FENCED')(error.cause));
    assert.equal(error.cause.reason, 'lease_lost');
    assert.equal(lostSeen, false, 'the gate was closed by the time the host was told');
    assert.throws(() => busyHandle.assertHeld(), pkg.FencedError);
    await whenTold(() => events.filter(e => e.kind === 'closed').length === 2, 'both closed');
    const told = events.map(e => `${e.kind} ${e.key === idle.key ? 'idle' : 'busy'} ${e.epoch}`);
    assert.deepEqual(told.filter(e => e.endsWith('idle 1')), ['lost idle 1', 'closed idle 1']);
    assert.deepEqual(told.filter(e => e.endsWith('busy 1')), ['lost busy 1', 'closed busy 1']);
    assert.deepEqual(router.status(), []);
    assert.ok((await rejection(router.run(idle.key, () => 1))) instanceof pkg.LeaseLostError);
}));

test('a router without threads copies and renews only when ticked, on its manual clock', () => inWorld(async w => {
    // The store's manual clock is the router's too: moving it moves every rule at once.
    const { router, events } = await w.start('replica-1', {
        clock: w.wall, withoutThread: true, copyPolicy: { durability: 'async', intervalMs: 1_000 },
    });
    const { tenant, key } = newTenant();
    const openedAt = w.wall.nowMs();
    await router.open(ORG, tenant);
    await router.run(key, handle => append(handle, 'one'));
    let round = await router.tick();
    assert.deepEqual([round.copied, round.failed, round.keeper.batches], [[], [], 0]);
    assert.equal(round.nextDueMs, openedAt + 1_000);
    w.wall.advance(999);
    assert.deepEqual((await router.tick()).copied, [], 'a moment before the interval');
    w.wall.advance(1);
    round = await router.tick();
    assert.deepEqual([round.copied, round.failed, round.keeper.renewed], [[key], [], 1]);
    // Told before the tick's promise settles.
    const told = () => events.map(e => `${e.kind} ${e.key === key} ${e.epoch}`);
    assert.deepEqual(told(), ['copied true 1']);
    assert.deepEqual([statusOf(router, key).writesSinceCopy, statusOf(router, key).lagMs], [0, 0]);
    w.wall.advance(250);
    assert.equal(statusOf(router, key).lagMs, 250, 'lag on the router\'s clock');

    // No tick for a TTL: the lease runs out in the store, and the next tick finds it lost.
    w.wall.advance(TTL_MS + 1);
    assert.deepEqual(told(), ['copied true 1'], 'nothing happens between ticks');
    round = await router.tick();
    assert.deepEqual([round.keeper.lost, round.nextDueMs], [1, null]);
    assert.deepEqual(told(), ['copied true 1', 'lost true 1', 'closed true 1']);
    assert.deepEqual(router.status(), []);
    await router.close();
    assert.ok((await rejection(router.tick())) instanceof pkg.RouterClosedError);
}));

test('verify refuses a copy at open: nothing is served and the lease is handed back', () => inWorld(async w => {
    const { router: one } = await w.start('replica-1');
    const { tenant, key } = newTenant();
    await one.open(ORG, tenant);
    await one.run(key, handle => append(handle, 'bad fold'));
    await one.handoff(key, 1_000);
    const seen = [];
    const { router: two } = await w.start('replica-2', {
        verify: async dir => { seen.push(ledgerOf(dir)); return false; },
    });
    const error = await rejection(two.open(ORG, tenant));
    assert.ok(isA(pkg.RestoreVerificationError, 'GOTRY_TENANT_RESTORE_INVALID')(error));
    assert.deepEqual(error.skipped, [{ epoch: 1, seq: 1, reason: 'fold' }]);
    assert.deepEqual(seen, [['bad fold']]);
    assert.deepEqual(two.status(), []);
    assert.ok((await w.leaseStore.read(key)).leaseUntilMs <= w.wall.nowMs(), 'handed back for the next replica');
    // A verify that throws rejects the open with that value.
    const thrown = new Error('cannot fold');
    const { router: three } = await w.start('replica-3', { verify: () => { throw thrown; } });
    assert.equal(await rejection(three.open(ORG, tenant)), thrown);
    const { router: four } = await w.start('replica-4', { verify: dir => ledgerOf(dir).length === 1 });
    assert.deepEqual((await four.open(ORG, tenant)).restoredFrom, { epoch: 1, seq: 1 });
}));

test('a host connection kept open across calls: the handoff copies it through betterSqlite3Snapshot', () => inWorld(async w => {
    const open = new Map();
    const connectionOf = handle => {
        if (!open.has(handle.key)) {
            fs.mkdirSync(path.join(handle.root, 'gotry-state'), { recursive: true });
            const db = new Database(path.join(handle.root, LEDGER));
            db.pragma('journal_mode = WAL');
            db.pragma('wal_autocheckpoint = 0');
            db.exec('CREATE TABLE IF NOT EXISTS entries (n INTEGER PRIMARY KEY, text TEXT NOT NULL)');
            open.set(handle.key, db);
        }
        return open.get(handle.key);
    };
    const { router: one } = await w.start('replica-1', {
        snapshot: pkg.betterSqlite3Snapshot(Database),
        // The tenant's last call ended: its files may be closed.
        onEvent: event => {
            if (event.kind === 'closed') {
                open.get(event.key)?.close();
                open.delete(event.key);
            }
        },
    });
    const { tenant, key } = newTenant();
    await one.open(ORG, tenant);
    for (const text of ['w1', 'w2', 'w3']) {
        await one.run(key, handle => { handle.assertHeld(); connectionOf(handle).prepare('INSERT INTO entries (text) VALUES (?)').run(text); });
    }
    const wal = path.join(pkg.tenantRootFor(path.join(w.dir, 'replica-1'), ORG, tenant), `${LEDGER}-wal`);
    assert.ok(fs.statSync(wal).size > 0, 'the rows are in the WAL');
    await one.handoff(key, 1_000);
    assert.equal(open.size, 0, 'closed on the closed event, before the handoff settled');
    const { router: two } = await w.start('replica-2');
    const handle = await two.open(ORG, tenant);
    assert.deepEqual(ledgerOf(handle.root), ['w1', 'w2', 'w3']);

    // Without a snapshot the same handoff fails, and the tenant serves on.
    const { router: three } = await w.start('replica-3');
    const other = newTenant();
    const served = await three.open(ORG, other.tenant);
    const db = connectionOf(served);
    try {
        await three.run(other.key, () => db.prepare('INSERT INTO entries (text) VALUES (?)').run('kept'));
        const error = await rejection(three.handoff(other.key, 1_000));
        assert.ok(error instanceof pkg.OpenInProcessError, String(error));
        assert.equal(statusOf(three, other.key).state, 'serving');
        assert.deepEqual(db.prepare('SELECT text FROM entries').all().map(r => r.text), ['kept']);
    } finally {
        db.close();
        open.delete(other.key);
    }
    await three.handoff(other.key, 1_000);
}));

test('options that are not the router\'s are refused', () => inWorld(async w => {
    const base = { leaseStore: w.leaseStore, durableStore: w.durableStore, stateRoot: w.dir, replicaId: 'r', ttlMs: TTL_MS, marginMs: MARGIN_MS };
    await assert.rejects(TenantRouter.start(), TypeError);
    await assert.rejects(TenantRouter.start({ ...base, leaseStore: {} }), TypeError);
    await assert.rejects(TenantRouter.start({ ...base, durableStore: {} }), TypeError);
    await assert.rejects(TenantRouter.start({ ...base, stateRoot: 1 }), { code: 'ERR_INVALID_ARG_TYPE' });
    await assert.rejects(TenantRouter.start({ ...base, copyPolicy: { durability: 'eventually' } }), { code: 'ERR_INVALID_ARG_VALUE' });
    await assert.rejects(TenantRouter.start({ ...base, copyPolicy: { intervalMs: -1 } }), RangeError);
    await assert.rejects(TenantRouter.start({ ...base, ttlMs: 50 }), RangeError);
    await assert.rejects(TenantRouter.start({ ...base, verify: 'yes' }), TypeError);
    await assert.rejects(TenantRouter.start({ ...base, snapshot: 1 }), TypeError);
    await assert.rejects(TenantRouter.start({ ...base, clock: { nowMs: () => 1 } }), TypeError);
    await assert.rejects(TenantRouter.start({ ...base, withoutThread: 'yes' }), TypeError);
    const jsClock = new SqliteLeaseStore({ path: tempDbPath(), nowMs: () => Date.now() });
    await assert.rejects(TenantRouter.start({ ...base, leaseStore: jsClock }), TypeError);
    jsClock.close();
    assert.throws(() => new TenantRouter(), TypeError);
    const { router } = await w.start('replica-1');
    assert.ok((await rejection(router.open(ORG, 'not-a-tenant'))) instanceof pkg.InvalidTenantIdError);
    assert.ok((await rejection(router.open('Bad Org', newTenant().tenant))) instanceof pkg.InvalidTenantIdError);
    assert.ok((await rejection(router.handoff('k', -1))) instanceof RangeError);
    assert.ok((await rejection(router.close(1.5))) instanceof RangeError);
}));

test('the router never keeps the process alive', async () => {
    const { spawnSync } = require('node:child_process');
    const script = `
        const pkg = require(${JSON.stringify(path.join(__dirname, '..'))});
        const path = require('node:path');
        const dir = ${JSON.stringify(tempDir())};
        (async () => {
            const router = await pkg.TenantRouter.start({
                leaseStore: new pkg.SqliteLeaseStore({ path: path.join(dir, 'l.db') }),
                durableStore: new pkg.DirectoryDurableStore({ path: path.join(dir, 'd') }),
                stateRoot: path.join(dir, 's'), replicaId: 'r', ttlMs: 3000, marginMs: 500,
                copyPolicy: { intervalMs: 10 }, onEvent: () => {}, snapshot: () => {}, verify: () => true,
            });
            await router.open('acme', 't-' + '0'.repeat(32));
            await router.run('acme/t-' + '0'.repeat(32), () => {});
            console.log('serving');
        })();
    `;
    const started = Date.now();
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'serving');
    assert.ok(Date.now() - started < 15_000);
});

/** A child process running test/router-worker.js; `call(op, fields)` resolves to its answer. */
function worker(args) {
    const { spawn } = require('node:child_process');
    const readline = require('node:readline');
    const child = spawn(process.execPath, [path.join(__dirname, 'router-worker.js'), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
    const waiting = new Map();
    let next = 1;
    let ready;
    const started = new Promise(resolve => { ready = resolve; });
    readline.createInterface({ input: child.stdout }).on('line', line => {
        const message = JSON.parse(line);
        if (message.id === 0) return ready();
        waiting.get(message.id)(message);
        waiting.delete(message.id);
    });
    const exited = new Promise(resolve => child.on('exit', resolve));
    const call = (op, fields = {}) => new Promise(resolve => {
        const id = next++;
        waiting.set(id, resolve);
        child.stdin.write(`${JSON.stringify({ id, op, ...fields })}\n`);
    });
    return { call, started, exited, kill: () => child.kill('SIGKILL') };
}

test('three processes move tenants between them by handoff: never two at once, no acknowledged write lost', { timeout: 60_000 }, async t => {
    const dir = tempDir();
    const replicas = ['replica-0', 'replica-1', 'replica-2'];
    const workers = replicas.map(replica => worker([path.join(dir, 'leases.db'), path.join(dir, 'durable'), path.join(dir, replica), replica]));
    const started = Date.now();
    try {
        await Promise.all(workers.map(w => w.started));
        const tenants = Array.from({ length: 4 }, () => newTenant().tenant);
        const acked = new Map(tenants.map(tenant => [tenant, []]));
        const calls = [];
        let moves = 0;
        let counter = 0;
        const byName = name => workers[replicas.indexOf(name)];

        // First, every replica opens every tenant at once: exactly one wins each.
        for (const tenant of tenants) {
            const answers = await Promise.all(workers.map((w, i) => w.call('write', { tenant, value: `race ${i}` })));
            const winners = answers.filter(answer => answer.ok);
            assert.equal(winners.length, 1, JSON.stringify(answers));
            const winner = answers.indexOf(winners[0]);
            for (const [i, answer] of answers.entries()) {
                if (i === winner) continue;
                assert.equal(answer.code, 'GOTRY_TENANT_LEASE_HELD', JSON.stringify(answer));
                assert.equal(answer.owner, replicas[winner]);
            }
            acked.get(tenant).push(`race ${winner}`);
            calls.push({ tenant, replica: replicas[winner], ...winners[0].value });
        }

        // Then each tenant, in parallel with the others, is written through random replicas;
        // a write that meets LEASE_HELD has the owner hand the tenant off, and tries again.
        const ROUNDS = 25;
        await Promise.all(tenants.map(async tenant => {
            for (let round = 0; round < ROUNDS; round += 1) {
                const target = Math.floor(Math.random() * workers.length);
                const value = `v${(counter += 1)}`;
                let answer = await workers[target].call('write', { tenant, value });
                if (!answer.ok) {
                    assert.equal(answer.code, 'GOTRY_TENANT_LEASE_HELD', JSON.stringify(answer));
                    const handed = await byName(answer.owner).call('handoff', { tenant });
                    assert.ok(handed.ok, JSON.stringify(handed));
                    moves += 1;
                    answer = await workers[target].call('write', { tenant, value });
                }
                assert.ok(answer.ok, JSON.stringify(answer));
                acked.get(tenant).push(value);
                calls.push({ tenant, replica: replicas[target], ...answer.value });
            }
        }));

        // No two replicas ever ran calls of one tenant at overlapping times, and the epochs
        // of a tenant's calls only grow, each epoch one replica's.
        for (const tenant of tenants) {
            const mine = calls.filter(call => call.tenant === tenant).sort((a, b) => (BigInt(a.start) < BigInt(b.start) ? -1 : 1));
            const owners = new Map();
            for (let i = 0; i < mine.length; i += 1) {
                const call = mine[i];
                if (i > 0) {
                    const before = mine[i - 1];
                    assert.ok(call.epoch >= before.epoch, `epochs went back: ${JSON.stringify([before, call])}`);
                    if (before.replica !== call.replica) {
                        assert.ok(BigInt(before.end) < BigInt(call.start), `two replicas served ${tenant} at once: ${JSON.stringify([before, call])}`);
                    }
                }
                assert.equal(owners.get(call.epoch) ?? call.replica, call.replica, `epoch ${call.epoch} served by two replicas`);
                owners.set(call.epoch, call.replica);
            }
        }

        // Every acknowledged write is in the ledger, in order, wherever the tenant is now.
        for (const tenant of tenants) {
            let answer = await workers[0].call('read', { tenant });
            if (!answer.ok) {
                assert.equal(answer.code, 'GOTRY_TENANT_LEASE_HELD', JSON.stringify(answer));
                assert.ok((await byName(answer.owner).call('handoff', { tenant })).ok);
                answer = await workers[0].call('read', { tenant });
            }
            assert.ok(answer.ok, JSON.stringify(answer));
            assert.deepEqual(answer.value.map(row => row.text), acked.get(tenant));
        }
        t.diagnostic(`${calls.length} acknowledged calls, ${moves} handoffs between 3 processes in ${Date.now() - started} ms`);
        assert.ok(moves >= tenants.length, `only ${moves} handoffs`);
        // What the copies cost: every handoff wrote one, each storing what changed since the
        // last copy of the tenant's lineage, not the tenant's whole ledger again.
        const copied = (await Promise.all(workers.map(w => w.call('copied')))).map(answer => answer.value);
        const copies = copied.reduce((sum, c) => sum + c.copies, 0);
        const uploaded = copied.reduce((sum, c) => sum + c.bytes, 0);
        // The read above left every tenant with the first process.
        let ledgers = 0;
        for (const tenant of tenants) ledgers += (await workers[0].call('size', { tenant })).value;
        t.diagnostic(`${copies} copies uploaded ${uploaded} bytes (${Math.round(uploaded / Math.max(copies, 1))} per copy); the ${tenants.length} ledgers hold ${ledgers} bytes`);
        assert.ok(copies >= moves && uploaded > 0, JSON.stringify(copied));
        for (const w of workers) assert.ok((await w.call('close')).ok);
        await Promise.all(workers.map(w => w.exited));
    } finally {
        for (const w of workers) w.kill();
    }
});
