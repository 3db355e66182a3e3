'use strict';
/**
 * How store calls leave the event loop (src/executor.rs): the calls of one store run in the
 * order they were made, however many are in flight; stores share a few threads without
 * starving each other; a pending call keeps the process alive, and an idle addon does not.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');

const pkg = require('..');
const { tempDbPath, holdWriteLock } = require('./helpers');

const PACKAGE = path.join(__dirname, '..');

/**
 * `cycles` acquire, renew, release cycles on one key, every call made before any settles.
 * Each call is only granted if every earlier one ran before it: a renew before its acquire is
 * LEASE_LOST, an acquire before the release of the cycle before is LEASE_HELD.
 */
function cyclesAllAtOnce(store, key, cycles) {
    const calls = [];
    for (let epoch = 1; epoch <= cycles; epoch += 1) {
        calls.push(store.acquire(key, 'o', 60_000).then(grant => grant.record.epoch));
        calls.push(store.renew(key, 'o', epoch, 60_000).then(grant => grant.record.epoch));
        calls.push(store.release(key, 'o', epoch).then(record => record.epoch));
    }
    return Promise.all(calls);
}

function expectedEpochs(cycles) {
    return Array.from({ length: cycles }, (_, i) => [i + 1, i + 1, i + 1]).flat();
}

test('calls on one store run in the order they were made, however many are in flight', async () => {
    const clock = new pkg.ManualClock(1_000);
    const store = new pkg.SqliteLeaseStore({ path: tempDbPath(), nowMs: clock });
    // More calls than a thread runs before letting another lane go first (64).
    const epochs = await cyclesAllAtOnce(store, 'k', 50);
    assert.deepEqual(epochs, expectedEpochs(50));
    const ops = store.history('k').map(entry => `${entry.op}@${entry.epoch}`);
    assert.deepEqual(ops, expectedEpochs(50).map((epoch, i) => `${['acquire', 'renew', 'release'][i % 3]}@${epoch}`));
    // A read made after a write sees it, without awaiting the write first.
    const [, seen] = await Promise.all([store.acquire('r', 'o', 60_000), store.read('r')]);
    assert.equal(seen.owner, 'o');
    store.close();
});

test('more stores than threads, all busy at once: every call settles, each store in order', async () => {
    const clock = new pkg.ManualClock(1_000);
    const stores = Array.from({ length: 9 }, () => new pkg.SqliteLeaseStore({ path: tempDbPath(), nowMs: clock }));
    const answers = await Promise.all(stores.map((store, i) => cyclesAllAtOnce(store, `k${i}`, 30)));
    for (const epochs of answers) assert.deepEqual(epochs, expectedEpochs(30));
    for (const store of stores) store.close();
});

test('a store waiting for another process does not hold up the calls of another store', async () => {
    const lockedFile = tempDbPath();
    const waiting = new pkg.SqliteLeaseStore({ path: lockedFile });
    const free = new pkg.SqliteLeaseStore({ path: tempDbPath() });
    const holder = holdWriteLock(lockedFile, 2);
    await holder.locked;
    let freeDoneFirst = false;
    const blocked = waiting.acquire('k', 'o', 1_000).then(grant => ({ grant, freeDoneFirst }));
    const epochs = await cyclesAllAtOnce(free, 'k', 5);
    freeDoneFirst = true;
    assert.deepEqual(epochs, expectedEpochs(5));
    const { grant, freeDoneFirst: otherStoreFinishedFirst } = await blocked;
    assert.ok(otherStoreFinishedFirst, 'the free store waited for the locked one');
    assert.equal(grant.record.epoch, 1);
    await holder.exited;
    waiting.close();
    free.close();
});

/** Runs `script` in a fresh Node process; resolves to its exit code and output. */
function runNode(script, args, env = {}) {
    return new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ['-e', script, PACKAGE, ...args], {
            stdio: ['ignore', 'pipe', 'pipe'],
            env: { ...process.env, ...env },
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', chunk => { stdout += chunk; });
        child.stderr.on('data', chunk => { stderr += chunk; });
        child.on('error', reject);
        child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr }));
    });
}

test('a pending call keeps the process alive until it settles; then the process exits on its own', async () => {
    const file = tempDbPath();
    new pkg.SqliteLeaseStore({ path: file }).close();
    const holder = holdWriteLock(file, 1);
    await holder.locked;
    // Nothing but the pending acquire could keep this process running while the lock is held.
    const script = `
        const { SqliteLeaseStore } = require(process.argv[1]);
        const store = new SqliteLeaseStore({ path: process.argv[2] });
        store.acquire('k', 'child', 1000).then(grant => console.log('granted', grant.record.epoch));
    `;
    const child = await runNode(script, [file]);
    await holder.exited;
    assert.equal(child.code, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'granted 1');
});

test('a worker can be terminated while its store calls are running; the answers that come after go nowhere', async () => {
    const locked = tempDbPath();
    new pkg.SqliteLeaseStore({ path: locked }).close();
    const holder = holdWriteLock(locked, 1);
    await holder.locked;
    // The worker's calls wait for the lock on the store's threads when the worker ends, and
    // finish after its environment is gone; the main thread's calls, on the same threads, go on.
    const script = `
        const { Worker } = require('node:worker_threads');
        const { SqliteLeaseStore } = require(process.argv[1]);
        const source = \`
            const { workerData, parentPort } = require('node:worker_threads');
            const { SqliteLeaseStore } = require(workerData.pkg);
            const store = new SqliteLeaseStore({ path: workerData.locked });
            for (let i = 0; i < 3; i += 1) store.acquire('k' + i, 'worker', 1000).catch(() => {});
            parentPort.postMessage('called');
        \`;
        (async () => {
            const worker = new Worker(source, { eval: true, workerData: { pkg: process.argv[1], locked: process.argv[2] } });
            await new Promise(resolve => worker.once('message', resolve));
            await worker.terminate();
            const store = new SqliteLeaseStore({ path: process.argv[3] });
            const grant = await store.acquire('k', 'main', 1000);
            // Alive until the worker's calls have run and answered, with no one left to hear.
            const shared = new SqliteLeaseStore({ path: process.argv[2] });
            await shared.acquire('m', 'main', 1000);
            while (shared.history().filter(entry => entry.owner === 'worker').length < 3) {
                await new Promise(resolve => setTimeout(resolve, 10));
            }
            console.log('granted', grant.record.epoch);
        })();
    `;
    const child = await runNode(script, [locked, tempDbPath()]);
    await holder.exited;
    assert.equal(child.code, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'granted 1');
});

// The timeout only stops a deadlock from hanging the suite; nothing is timed.
test('keeper calls that wait for a kept lease\'s earlier calls do not deadlock the store', { timeout: 60_000 }, async () => {
    const file = tempDbPath();
    const wall = new pkg.ManualClock(1_000_000);
    const store = new pkg.SqliteLeaseStore({ path: file, nowMs: wall });
    const keeper = pkg.LeaseKeeper.start({
        store, replicaId: 'r', ttlMs: 3_000, marginMs: 300, clock: new pkg.ManualClock(0), withoutThread: true,
    });
    const first = await keeper.acquire('a');
    await keeper.acquire('b');
    const holder = holdWriteLock(file, 1);
    await holder.locked;
    // The keeper is busy for a second (its acquire waits for the lock), so remove() and
    // shutdown() only run after the renewals made below have taken their place in the leases'
    // queues: they have to wait for those renewals, which must not be stuck behind them.
    const acquired = keeper.acquire('c');
    const removed = keeper.remove('a');
    const renewed = first.renew();
    const report = keeper.shutdown(10_000);
    const renewedB = keeper.get('b').renew();
    await Promise.all([acquired, renewed, renewedB]);
    assert.equal(await removed, true);
    assert.deepEqual((await report).released.sort(), ['b', 'c']);
    for (const key of ['a', 'b']) assert.deepEqual(store.history(key).map(e => e.op), ['acquire', 'renew', 'release']);
    await holder.exited;
    store.close();
});

test('UV_THREADPOOL_SIZE sets how many threads the stores share, as it does for libuv\'s pool', async () => {
    const lockedFile = tempDbPath();
    new pkg.SqliteLeaseStore({ path: lockedFile }).close();
    const script = `
        const { SqliteLeaseStore } = require(process.argv[1]);
        const waiting = new SqliteLeaseStore({ path: process.argv[2] });
        const free = new SqliteLeaseStore({ path: process.argv[3] });
        const order = [];
        Promise.all([
            waiting.acquire('k', 'o', 1000).then(() => order.push('waiting')),
            free.acquire('k', 'o', 1000).then(() => order.push('free')),
        ]).then(() => console.log(order.join(' ')));
    `;
    const outcomes = {};
    for (const threads of ['1', '2']) {
        const holder = holdWriteLock(lockedFile, 1);
        await holder.locked;
        const child = await runNode(script, [lockedFile, tempDbPath()], { UV_THREADPOOL_SIZE: threads });
        await holder.exited;
        assert.equal(child.code, 0, child.stderr);
        outcomes[threads] = child.stdout.trim();
    }
    // One thread: the free store's call waits behind the call that waits for the lock.
    assert.deepEqual(outcomes, { 1: 'waiting free', 2: 'free waiting' });
});
