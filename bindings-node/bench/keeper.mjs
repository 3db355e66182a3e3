// The per-lease cost of a renewal round through the package, at 1, 100, 1,000 and 10,000
// leases a round on a file store, as a ratio to one lease renewed by store.renew measured in
// the same run on the same disk. Two ways to renew a round: store.renewBatch (one store
// transaction per call) and a LeaseKeeper's round (keeper.tick() on a manual clock, batches
// of the default 1,000). Run with `npm run bench`; BENCH_LEASES=1,100 picks other sizes.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { LeaseKeeper, ManualClock, SqliteLeaseStore } from '@gotry/tenant-state';

const SIZES = (process.env.BENCH_LEASES ?? '1,100,1000,10000').split(',').map(Number);
const SINGLE_RENEWALS = Number(process.env.BENCH_SINGLE ?? 200);
const TTL_MS = 600_000;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gotry-bench-keeper-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

const median = values => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const elapsedUs = start => Number(process.hrtime.bigint() - start) / 1e3;

const store = new SqliteLeaseStore({ path: path.join(dir, 'leases.db') });
const clock = new ManualClock(0);
const keeper = LeaseKeeper.start({ store, replicaId: 'bench', ttlMs: TTL_MS, marginMs: 1_000, clock, withoutThread: true });
const interval = TTL_MS / 3;

/** Microseconds per lease of `store.renew`, one awaited after the other: the baseline. */
async function singleRenewUs(keys) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < SINGLE_RENEWALS; i += 1) await store.renew(keys[i % keys.length], 'bench', 1, TTL_MS);
    return elapsedUs(start) / SINGLE_RENEWALS;
}

async function batchUs(keys) {
    const start = process.hrtime.bigint();
    const answers = await store.renewBatch('bench', TTL_MS, keys.map(key => [key, 1]));
    const us = elapsedUs(start) / keys.length;
    if (!answers.every(answer => answer.ok)) throw new Error('a batched renewal was refused');
    return us;
}

async function keeperRoundUs(size) {
    clock.advance(interval);
    const start = process.hrtime.bigint();
    const report = await keeper.tick();
    const us = elapsedUs(start) / size;
    if (report.renewed !== size) throw new Error(`a round renewed ${report.renewed} of ${size} leases`);
    return us;
}

const keys = [];
console.log(`per-lease cost of a renewal round on a file store (ratio to one store.renew measured beside it)`);
for (const size of SIZES) {
    // The keeper holds `size` leases: acquire the missing ones (one durable write each).
    while (keys.length < size) {
        const key = `bench-${keys.length}`;
        await keeper.acquire(key);
        keys.push(key);
    }
    // One round first, so that every lease is due at the same time in the measured rounds.
    clock.advance(interval);
    await keeper.tick();
    const rounds = size >= 10_000 ? 3 : 7;
    const single = [];
    const batched = [];
    const kept = [];
    for (let round = 0; round < rounds; round += 1) {
        single.push(await singleRenewUs(keys));
        batched.push(await batchUs(keys));
        kept.push(await keeperRoundUs(size));
    }
    const ratio = values => median(values.map((value, round) => value / single[round])).toFixed(4);
    console.log(
        `  ${String(size).padStart(6)} leases: single renew ${median(single).toFixed(0)} us;` +
        ` renewBatch ${median(batched).toFixed(1)} us/lease (ratio ${ratio(batched)});` +
        ` keeper round ${median(kept).toFixed(1)} us/lease (ratio ${ratio(kept)})`,
    );
}
console.log('  ratio: the per-lease cost over one single renew, median of the per-round ratios; target at 1,000 leases: at most 0.02 (1/50)');
await keeper.shutdown(60_000);
store.close();
