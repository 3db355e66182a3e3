'use strict';
/**
 * While another process holds the store's write lock, store calls wait on the addon's own
 * threads and the event loop keeps running (the reference blocks its loop for the whole wait).
 * The other process is Python's standard sqlite3 module holding BEGIN IMMEDIATE for 2 s.
 * Opening a store by URL waits off the loop too, for a server that never answers.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');

const pkg = require('..');
const { tempDbPath, holdWriteLock, ticksWhile, listener } = require('./helpers');

const HOLD_SECONDS = 2;
/** Past the store's busy timeout of 5 s. */
const LONG_HOLD_SECONDS = 6;

test('python3 with sqlite3 is there to hold the lock (the next test needs it)', () => {
    const probe = spawnSync('python3', ['-c', 'import sqlite3']);
    assert.equal(probe.status, 0, 'install python3 to run the write-lock test');
});

test('timers keep firing while another process holds the write lock for 2 s', async t => {
    const file = tempDbPath();
    const store = new pkg.SqliteLeaseStore({ path: file });
    await store.acquire('warm-up', 'o', 1_000);
    // Opened before the lock is taken: opening makes sure of the schema under the write lock,
    // synchronously (the constructor is synchronous in the reference too).
    const reader = new pkg.SqliteLeaseStore({ path: file });
    const holder = holdWriteLock(file, HOLD_SECONDS);
    await holder.locked;

    let ticks = 0;
    const timer = setInterval(() => { ticks += 1; }, 10);
    let ticksWhileWaiting = -1;
    const acquired = store.acquire('k', 'o', 1_000).then(grant => {
        ticksWhileWaiting = ticks;
        return grant;
    });
    // A read on another connection does not need the write lock (WAL): it answers while the
    // writer waits. (Calls on one store share one connection and run one at a time.)
    const readWhileLocked = await reader.read('warm-up');
    reader.close();
    const ticksAtRead = ticks;
    const grant = await acquired;
    clearInterval(timer);
    await holder.exited;

    assert.equal(readWhileLocked.owner, 'o');
    assert.equal(grant.record.epoch, 1);
    // A loop blocked by the wait would have run no timer at all until the lock was released.
    t.diagnostic(`ticks while waiting: ${ticksWhileWaiting}`);
    assert.ok(ticksWhileWaiting >= 20, `only ${ticksWhileWaiting} timer ticks while the acquire waited`);
    assert.ok(ticksWhileWaiting > ticksAtRead, 'the acquire finished after the read');
    // The acquire waited for the other process's commit: its row is there, logged before ours.
    assert.deepEqual(store.history().map(e => e.owner), ['o', 'python', 'o']);
    store.close();
});

test('a lock held past the busy timeout is LeaseStoreUnavailableError, and nothing is written', async () => {
    const file = tempDbPath();
    const store = new pkg.SqliteLeaseStore({ path: file });
    const holder = holdWriteLock(file, LONG_HOLD_SECONDS);
    await holder.locked;
    let ticks = 0;
    const timer = setInterval(() => { ticks += 1; }, 10);
    const error = await store.acquire('k', 'o', 1_000).then(
        grant => assert.fail(`acquired ${JSON.stringify(grant)} under another process's lock`),
        refused => refused,
    );
    clearInterval(timer);
    assert.ok(error instanceof pkg.LeaseStoreUnavailableError, `${error.name}: ${error.message}`);
    assert.equal(error.code, 'GOTRY_TENANT_LEASE_STORE_UNAVAILABLE');
    assert.ok(ticks >= 20, `only ${ticks} timer ticks while the acquire waited`);
    await holder.exited;
    // The refused call left no trace; the store works again once the lock is free.
    assert.equal(await store.read('k'), null);
    assert.equal((await store.acquire('k', 'o', 1_000)).record.epoch, 1);
    assert.deepEqual(store.history().map(e => e.owner), ['python', 'o']);
    store.close();
});

/**
 * A read with nothing else in flight on its store is answered on the event loop (no thread
 * hop), and only when that cannot wait. These pin down both halves: it is answered before any
 * macrotask runs, and it never waits on the loop for a lock that another process holds.
 */
test('a read with nothing in flight is settled before the event loop turns', async () => {
    const store = new pkg.SqliteLeaseStore({ path: tempDbPath() });
    await store.acquire('k', 'o', 1_000);
    let record;
    const read = store.read('k').then(answer => { record = answer; });
    // A few microtask turns: a promise settled by another thread would need a macrotask.
    for (let i = 0; i < 5; i += 1) await null;
    assert.equal(record?.owner, 'o', 'the read was not answered on the event loop');
    await read;
    store.close();
});

test('reads made while another process holds the write lock for 2 s never block the loop', async t => {
    const file = tempDbPath();
    const store = new pkg.SqliteLeaseStore({ path: file });
    await store.acquire('warm-up', 'o', 1_000);
    const holder = holdWriteLock(file, HOLD_SECONDS);
    await holder.locked;

    let ticks = 0;
    let longestGapMs = 0;
    let last = performance.now();
    const timer = setInterval(() => {
        const now = performance.now();
        longestGapMs = Math.max(longestGapMs, now - last);
        last = now;
        ticks += 1;
    }, 10);
    // Nothing in flight: a WAL read does not need the write lock, and answers at once.
    const free = await store.read('warm-up');
    // The store's one connection now waits for the lock in this acquire; a read behind it
    // waits its turn on the addon's threads, not on the loop, and sees the acquire.
    const acquired = store.acquire('k', 'o', 1_000);
    let ticksAtRead = -1;
    const behind = await store.read('k').then(answer => {
        ticksAtRead = ticks;
        return answer;
    });
    await acquired;
    clearInterval(timer);
    await holder.exited;

    assert.equal(free.owner, 'o');
    assert.equal(behind?.epoch, 1, 'the read did not see the acquire made before it');
    t.diagnostic(`ticks before the queued read was answered: ${ticksAtRead}; longest gap between ticks: ${longestGapMs.toFixed(0)} ms`);
    // A read that waited on the loop for the connection would have let no timer run at all
    // until the other process committed, 2 s later.
    assert.ok(ticksAtRead >= 20, `only ${ticksAtRead} timer ticks while the read waited`);
    assert.ok(longestGapMs < HOLD_SECONDS * 1_000 / 2, `the loop stood still for ${longestGapMs.toFixed(0)} ms`);
    store.close();
});

test('openLeaseStore is a promise that waits off the event loop for a server that never answers', async t => {
    // Accepts the connection and never sends the server's greeting: no MySQL server needed.
    const silent = await listener(() => {});
    t.after(silent.close);
    const opening = pkg.openLeaseStore(`mysql://root@127.0.0.1:${silent.port}/test?timeout_ms=500`);
    assert.ok(opening instanceof Promise, 'openLeaseStore did not return a promise');
    const { outcome, ticks } = await ticksWhile(opening);
    assert.ok(outcome.error, `opened a store on a silent server: ${JSON.stringify(outcome.value)}`);
    assert.ok(outcome.error instanceof pkg.LeaseStoreUnavailableError, `${outcome.error.name}: ${outcome.error.message}`);
    // The open waits up to 500 ms: a loop blocked by it would run no 10 ms timer until it ended
    // (nor this process's listener, which accepts on the loop).
    t.diagnostic(`ticks while opening: ${ticks}`);
    assert.ok(ticks >= 10, `only ${ticks} timer ticks while the open waited`);
    assert.ok(silent.sockets.length > 0, 'the store never connected to the listener');
});
