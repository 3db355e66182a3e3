'use strict';
/**
 * While another process holds the store's write lock, store calls wait on the addon's own
 * threads and the event loop keeps running (the reference blocks its loop for the whole wait).
 * The other process is Python's standard sqlite3 module holding BEGIN IMMEDIATE for 2 s.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');

const pkg = require('..');
const { tempDbPath, holdWriteLock } = require('./helpers');

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
