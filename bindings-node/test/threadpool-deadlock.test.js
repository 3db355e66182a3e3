'use strict';
/**
 * The deadlock this guards against: a keeper's `remove()` and `shutdown()` run on the addon's
 * shared store threads (as many as `UV_THREADPOOL_SIZE`) and wait for the renewals and
 * releases that the kept leases' handles queued before them, which run on the store's lane,
 * on those same threads. With as many keepers in `remove()`/`shutdown()` at once as there are
 * threads, plus two, and a long queue of handle renewals in front of them, every thread could
 * end up waiting for a renewal that needs a thread.
 *
 * Each run is a child process with a small pool (`UV_THREADPOOL_SIZE` 1 and 2), so that a hang
 * is a child killed by the guard's timeout, never a stuck test run. The timeout is only a hang
 * guard; the time taken is printed, not asserted.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const { tempDbPath } = require('./helpers');

const PACKAGE = path.join(__dirname, '..');
/** Far beyond what the run needs (well under a second when it does not hang). */
const HANG_GUARD_MS = 60_000;

const SCRIPT = `
    const { SqliteLeaseStore, LeaseKeeper } = require(process.argv[1]);
    const [file, threads, leasesPerKeeper] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
    (async () => {
        const store = new SqliteLeaseStore({ path: file });
        const keepers = [];
        for (let k = 0; k < threads + 2; k++) {
            keepers.push(LeaseKeeper.start({ store, replicaId: 'r' + k, ttlMs: 60_000, marginMs: 1_000 }));
        }
        const leases = await Promise.all(keepers.map((keeper, k) =>
            Promise.all(Array.from({ length: leasesPerKeeper }, (_, i) => keeper.acquire('k' + k + '-' + i)))));
        const started = Date.now();
        // Every handle renews first (far more calls than one thread runs in a turn), then
        // every keeper removes or shuts down at once: half remove each of their leases,
        // half shut down.
        const renewals = leases.flat().map(lease => lease.renew());
        const ends = keepers.map((keeper, k) => k % 2 === 0
            ? Promise.all(leases[k].map((_, i) => keeper.remove('k' + k + '-' + i)))
            : keeper.shutdown(30_000));
        await Promise.all(renewals);
        const outcomes = await Promise.all(ends);
        for (const keeper of keepers) await keeper.shutdown(1_000);
        const ops = store.history().map(entry => entry.op);
        console.log(JSON.stringify({
            ms: Date.now() - started,
            removed: outcomes.filter(Array.isArray).flat().filter(Boolean).length,
            shutdownReleased: outcomes.filter(o => !Array.isArray(o)).map(o => o.released.length),
            releases: ops.filter(op => op === 'release').length,
            renews: ops.filter(op => op === 'renew').length,
        }));
        store.close();
    })().catch(error => { console.error(error && error.stack); process.exit(2); });
`;

for (const threads of [1, 2]) {
    test(`UV_THREADPOOL_SIZE=${threads}: ${threads + 2} keepers in remove() or shutdown() at once do not hang`, t => {
        const leasesPerKeeper = 40;
        const child = spawnSync(process.execPath, ['-e', SCRIPT, PACKAGE, tempDbPath(), String(threads), String(leasesPerKeeper)], {
            encoding: 'utf8',
            env: { ...process.env, UV_THREADPOOL_SIZE: String(threads) },
            timeout: HANG_GUARD_MS,
            killSignal: 'SIGKILL',
        });
        assert.equal(child.signal, null, `hung: killed after ${HANG_GUARD_MS} ms\n${child.stderr}`);
        assert.equal(child.status, 0, child.stderr);
        const result = JSON.parse(child.stdout.trim());
        t.diagnostic(`UV_THREADPOOL_SIZE=${threads}: ${JSON.stringify(result)}`);
        const keepers = threads + 2;
        assert.equal(result.releases, keepers * leasesPerKeeper);
        assert.equal(result.renews >= keepers * leasesPerKeeper, true);
        const removers = Math.ceil(keepers / 2);
        assert.equal(result.removed, removers * leasesPerKeeper);
        assert.deepEqual(result.shutdownReleased, Array(keepers - removers).fill(leasesPerKeeper));
    });
}
