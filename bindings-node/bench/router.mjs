// The overhead of a router call: `router.run(key, fn)` (begin off the event loop, fn on it,
// finish off it) against the same `fn` awaited directly, as a ratio, one call at a time and
// BENCH_CONCURRENCY (16) at once. `fn` is an empty async function, so the figures are the
// router's own cost; async durability with a long interval, so no copy runs meanwhile.
// Printed, not asserted. Run with `npm run bench` (release build), or `node bench/router.mjs`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { DirectoryDurableStore, SqliteLeaseStore, TenantRouter, leaseKeyFor } from '@gotry/tenant-state';

const CALLS = Number(process.env.BENCH_CALLS ?? 20_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gotry-bench-router-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

const leaseStore = new SqliteLeaseStore({ path: path.join(dir, 'leases.db') });
const router = await TenantRouter.start({
    leaseStore,
    durableStore: new DirectoryDurableStore({ path: path.join(dir, 'durable') }),
    stateRoot: path.join(dir, 'state'),
    replicaId: 'bench',
    ttlMs: 60_000,
    marginMs: 5_000,
    copyPolicy: { durability: 'async', intervalMs: 3_600_000 },
});
const tenant = `t-${'0'.repeat(32)}`;
const key = leaseKeyFor('acme', tenant);
await router.open('acme', tenant);

let sink = 0;
const fn = async handle => { sink += handle === undefined ? 0 : 1; };
const direct = () => fn(null);
const routed = () => router.run(key, fn);

const median = values => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Microseconds per call of `call`, `concurrency` in flight at a time. */
async function perCallUs(call, concurrency) {
    const start = process.hrtime.bigint();
    for (let done = 0; done < CALLS; done += concurrency) {
        const batch = [];
        for (let i = 0; i < concurrency; i += 1) batch.push(call());
        await Promise.all(batch);
    }
    return Number(process.hrtime.bigint() - start) / 1e3 / CALLS;
}

console.log(`router.run overhead: ${CALLS} calls a round, median of ${ROUNDS} rounds`);
for (const concurrency of [1, CONCURRENCY]) {
    // A round of each first, to warm up.
    await perCallUs(direct, concurrency);
    await perCallUs(routed, concurrency);
    const directUs = [];
    const routedUs = [];
    for (let round = 0; round < ROUNDS; round += 1) {
        directUs.push(await perCallUs(direct, concurrency));
        routedUs.push(await perCallUs(routed, concurrency));
    }
    const [d, r] = [median(directUs), median(routedUs)];
    console.log(
        `  ${String(concurrency).padStart(2)} in flight: direct ${d.toFixed(2)} us, router.run ${r.toFixed(1)} us a call: ` +
            `${(r / d).toFixed(0)} times the direct call (${(r - d).toFixed(1)} us of overhead)`,
    );
}
const status = router.status()[0];
if (status.inFlight !== 0) throw new Error(`calls left in flight: ${status.inFlight}`);
await router.close(1_000);
leaseStore.close();
if (sink === 0) console.log('');
