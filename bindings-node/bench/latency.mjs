// Each store operation through the package against the reference JavaScript (better-sqlite3)
// in the same process, alternating rounds, each side with a store of its own on the same disk,
// and against one fdatasync of that disk measured in the same rounds: one at a time (what a
// request handler that awaits each call waits), then with 16 and 256 in flight. Run with
// `npm run bench`; BENCH_ROUNDS and BENCH_SCALE shorten or lengthen it.
//
// The reference is loaded from /work/shared/reference (GOTRY_REFERENCE_DIR overrides), copied
// into a temporary folder whose node_modules is this package's, where its better-sqlite3 is.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { SqliteLeaseStore } from '@gotry/tenant-state';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const REFERENCE = process.env.GOTRY_REFERENCE_DIR ?? '/work/shared/reference/tenant-state-js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gotry-latency-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

async function loadReference() {
    const copy = path.join(dir, 'reference');
    fs.cpSync(REFERENCE, copy, { recursive: true });
    fs.writeFileSync(path.join(copy, 'package.json'), JSON.stringify({ type: 'module' }));
    fs.symlinkSync(path.join(HERE, '..', 'node_modules'), path.join(copy, 'node_modules'), 'dir');
    return import(pathToFileURL(path.join(copy, 'lease-store.js')).href);
}
const reference = await loadReference();

let opened = 0;
const sides = {
    reference: () => new reference.SqliteLeaseStore({ path: path.join(dir, `reference-${(opened += 1)}.db`) }),
    ours: () => new SqliteLeaseStore({ path: path.join(dir, `ours-${(opened += 1)}.db`) }),
};

/** Microseconds of one 4 KiB append + fdatasync on the disk the stores use. */
function fdatasyncUs(writes = 50) {
    const fd = fs.openSync(path.join(dir, 'fsync-probe'), 'w');
    const block = Buffer.alloc(4096, 0x5a);
    const start = process.hrtime.bigint();
    for (let i = 0; i < writes; i += 1) {
        fs.writeSync(fd, block);
        fs.fdatasyncSync(fd);
    }
    const us = Number(process.hrtime.bigint() - start) / 1e3 / writes;
    fs.closeSync(fd);
    return us;
}

/** Microseconds per call of `call(i)` for `total` calls, `inFlight` callers awaiting each in turn. */
async function timed(inFlight, total, call) {
    const each = Math.ceil(total / inFlight);
    const start = process.hrtime.bigint();
    await Promise.all(
        Array.from({ length: inFlight }, async (_, caller) => {
            for (let i = 0; i < each; i += 1) await call(caller * each + i);
        }),
    );
    return Number(process.hrtime.bigint() - start) / 1e3 / (each * inFlight);
}

/**
 * One round of one side: reads of a held key, then acquire, renew and release of fresh keys,
 * each operation timed on its own phase. Returns microseconds per operation by name.
 */
async function round(open, inFlight, tag) {
    const store = open();
    await store.acquire('read-me', 'o', 600_000);
    const durable = Math.ceil(Math.max(40 * SCALE, inFlight) / inFlight) * inFlight;
    const keys = Array.from({ length: durable }, (_, i) => `${tag}-${i}`);
    const epochs = [];
    const us = {
        read: await timed(inFlight, Math.round(3_000 * SCALE), () => store.read('read-me')),
        acquire: await timed(inFlight, durable, async i => {
            epochs[i] = (await store.acquire(keys[i], 'o', 600_000)).record.epoch;
        }),
        renew: await timed(inFlight, durable, i => store.renew(keys[i], 'o', epochs[i], 600_000)),
        release: await timed(inFlight, durable, i => store.release(keys[i], 'o', epochs[i])),
    };
    store.close();
    return us;
}

const OPERATIONS = ['read', 'acquire', 'renew', 'release'];
const median = values => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)];

// Untimed: the JS is compiled, the addon's threads are started.
for (const open of Object.values(sides)) await round(open, 1, 'warm');

for (const inFlight of [1, 16, 256]) {
    const samples = { reference: [], ours: [], fdatasync: [] };
    for (let r = 0; r < ROUNDS; r += 1) {
        const order = r % 2 === 0 ? ['reference', 'ours'] : ['ours', 'reference'];
        for (const side of order) samples[side].push(await round(sides[side], inFlight, `${side}-${inFlight}-${r}`));
        samples.fdatasync.push(fdatasyncUs());
    }
    const sync = median(samples.fdatasync);
    console.log(
        `lease store, ${inFlight === 1 ? 'one call at a time' : `${inFlight} calls in flight`} (median of ${ROUNDS} alternating rounds; one 4 KiB append + fdatasync: ${sync.toFixed(0)} us)`,
    );
    for (const op of OPERATIONS) {
        const ref = median(samples.reference.map(us => us[op]));
        const ours = median(samples.ours.map(us => us[op]));
        // The per-round ratio, so that a disk that slows down in one round slows both sides.
        const ratio = median(samples.ours.map((us, i) => us[op] / samples.reference[i][op]));
        const toSync = median(samples.ours.map((us, i) => us[op] / samples.fdatasync[i]));
        const refToSync = median(samples.reference.map((us, i) => us[op] / samples.fdatasync[i]));
        const durable = op === 'read' ? '' : `   per fdatasync: ours ${toSync.toFixed(2)} x, reference ${refToSync.toFixed(2)} x`;
        console.log(
            `  ${op.padEnd(8)} reference ${ref.toFixed(1).padStart(8)} us   ours ${ours.toFixed(1).padStart(8)} us   ours / reference ${ratio.toFixed(2)}${durable}`,
        );
    }
}
