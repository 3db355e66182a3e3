// What a strict-durability write costs through the router, the way gotry's host runs it: the
// tenant's ledger kept open in better-sqlite3 (WAL mode) for the tenure and handed to the
// router's copies through `betterSqlite3Snapshot`, one small row written per call, every
// acknowledgement waiting for its copy. Against the same insert into a ledger of the same
// size without the router, in the same process, rounds alternating: as the host writes it
// (WAL, synchronous=NORMAL: no fsync at commit) and made durable by itself (synchronous=FULL:
// the WAL flushed at each commit). With the bytes of pieces and deltas the copies uploaded per
// write (the core's metrics; each copy's manifest, about 1 KB, aside) and what the store keeps
// per write (read from its folder: the router's retention deletes older copies as it goes).
// Printed, not asserted. `node bench/copies.mjs` (BENCH_SIZES_MB=0.25,4,32, BENCH_CALLS=40);
// with BENCH_DURABLE_URL (an s3:// URL, such as one on moto) the copies go there instead of a
// folder, and the bytes stored are not read back.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

import {
    DirectoryDurableStore, SqliteLeaseStore, TenantRouter, betterSqlite3Snapshot, leaseKeyFor, metrics, openDurableStore,
} from '@gotry/tenant-state';

const Database = createRequire(import.meta.url)('better-sqlite3');
const SIZES_MB = (process.env.BENCH_SIZES_MB ?? '0.25,4,32').split(',').map(Number);
const CALLS = Number(process.env.BENCH_CALLS ?? 40);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROW = 1024;
const DURABLE_URL = process.env.BENCH_DURABLE_URL;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gotry-bench-copies-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

const median = values => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The bytes of the files under `folder`, walked again if the router's collection (which runs
 * behind its copies) removes a file or folder during the walk. */
function treeBytes(folder) {
    for (;;) {
        try {
            let total = 0;
            for (const entry of fs.readdirSync(folder, { withFileTypes: true, recursive: true })) {
                if (entry.isFile()) total += fs.statSync(path.join(entry.parentPath, entry.name)).size;
            }
            return total;
        } catch (error) {
            if (error.code !== 'ENOENT') throw error;
        }
    }
}

/** A ledger of about `mb` megabytes at `file`, open in WAL mode, as the host keeps it. */
function ledger(file, mb, synchronous = 'NORMAL') {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    db.exec('CREATE TABLE IF NOT EXISTS entries (n INTEGER PRIMARY KEY, body BLOB NOT NULL)');
    const insert = db.prepare('INSERT INTO entries (body) VALUES (?)');
    const rows = Math.ceil((mb * 1024 * 1024) / (ROW + 40));
    db.transaction(() => {
        for (let i = 0; i < rows; i += 1) insert.run(Buffer.alloc(ROW, i % 251));
    })();
    return db;
}

const write = db => db.prepare('INSERT INTO entries (body) VALUES (?)').run(Buffer.from('one small row'));

console.log(`strict-durability router call vs the same insert, ${CALLS} calls a round, median of ${ROUNDS} rounds`);
for (const mb of SIZES_MB) {
    const here = path.join(dir, String(mb));
    const durable = path.join(here, 'durable');
    const leaseStore = new SqliteLeaseStore({ path: path.join(here, 'leases.db') });
    const router = await TenantRouter.start({
        leaseStore,
        durableStore: DURABLE_URL ? await openDurableStore(DURABLE_URL) : new DirectoryDurableStore({ path: durable }),
        stateRoot: path.join(here, 'state'),
        replicaId: 'bench',
        ttlMs: 60_000,
        marginMs: 5_000,
        copyPolicy: { durability: 'strict' },
        snapshot: betterSqlite3Snapshot(Database),
    });
    // A tenant of its own per size and run, so copies in a shared bucket never meet.
    const tenant = `t-${process.hrtime.bigint().toString(16).padStart(32, '0').slice(-32)}`;
    const key = leaseKeyFor('acme', tenant);
    const handle = await router.open('acme', tenant);
    const routed = ledger(path.join(handle.root, 'ledger.db'), mb);
    const raw = ledger(path.join(here, 'raw', 'ledger.db'), mb);
    const full = ledger(path.join(here, 'full', 'ledger.db'), mb, 'FULL');
    // The first copy stores the whole ledger; what follows is what one row costs.
    await router.run(key, () => write(routed));

    const perCallMs = async call => {
        const start = process.hrtime.bigint();
        for (let i = 0; i < CALLS; i += 1) await call();
        return Number(process.hrtime.bigint() - start) / 1e6 / CALLS;
    };
    const rawMs = [];
    const fullMs = [];
    const routedMs = [];
    const stored = () => (DURABLE_URL ? 0 : treeBytes(durable));
    const uploaded = async () => Number((await metrics()).match(/^gotry_tenant_copy_bytes_total (\S+)$/m)[1]);
    const [storedBefore, uploadedBefore] = [stored(), await uploaded()];
    for (let round = 0; round < ROUNDS; round += 1) {
        rawMs.push(await perCallMs(async () => write(raw)));
        fullMs.push(await perCallMs(async () => write(full)));
        routedMs.push(await perCallMs(() => router.run(key, () => write(routed))));
    }
    const writes = CALLS * ROUNDS;
    const [storedPerWrite, uploadedPerWrite] = [(stored() - storedBefore) / writes, ((await uploaded()) - uploadedBefore) / writes];
    const [r, f, s] = [median(rawMs), median(fullMs), median(routedMs)];
    console.log(
        `  ${String(mb).padStart(5)} MB ledger: router call ${s.toFixed(2)} ms; insert alone ${r.toFixed(3)} ms ` +
            `(${(s / r).toFixed(0)} times), durable by itself ${f.toFixed(3)} ms (${(s / f).toFixed(1)} times)` +
            `; ${(uploadedPerWrite / 1024).toFixed(1)} KB of deltas uploaded per write` +
            (DURABLE_URL ? ' on S3' : `, ${(storedPerWrite / 1024).toFixed(1)} KB kept per write`),
    );
    await router.close(1_000);
    routed.close();
    raw.close();
    full.close();
    leaseStore.close();
}
