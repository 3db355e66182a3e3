// The addon's own executor (src/executor.rs: per-store lanes on threads of its own) against
// what it replaced: napi's AsyncTask on libuv's thread pool, with the calls to one store
// chained in JS (each call starts once the one before it settled), which keeps one store's
// calls in call order as the lanes do. Both sides make the same core call (`renew`) through
// the same translation; only where it runs differs. An unchained AsyncTask (no call order,
// each call parks a pool thread on the store) is printed beside them.
//
// In one process, in alternating rounds (the order of the sides reversed every other round),
// for a SQLite store on a real file (durable: each renewal syncs), one on tmpfs (/dev/shm,
// where a sync costs nothing and the hops are all there is), and a MySQL/MariaDB store
// (GOTRY_MYSQL_URL, or the local test server), at 1, 16 and 256 calls in flight. Figures swing
// with the machine's load; compare the ratios of one run. Run with
// `npm run build:release && node bench/executor.mjs`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { SqliteLeaseStore, openLeaseStore } = require('..');
// Internal: the native handle of a store, which carries the baseline's entry point.
const { nativeStoreOf } = require('../lib/store-handles');
const { settle } = require('../lib/translate');

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const IN_FLIGHT = [1, 16, 256];
const TTL_MS = 600_000;
const OWNER = 'bench';
const MYSQL_URL = process.env.GOTRY_MYSQL_URL || 'mysql://root@127.0.0.1:3306/test';

const folders = [];
process.on('exit', () => folders.forEach(dir => fs.rmSync(dir, { recursive: true, force: true })));
function folderIn(parent) {
    const dir = fs.mkdtempSync(path.join(parent, 'gotry-bench-executor-'));
    folders.push(dir);
    return dir;
}

const noop = () => {};

/** The three ways to run one renewal; each takes `(key, epoch)` and returns a promise. */
function sides(store) {
    const handle = nativeStoreOf(store);
    const onLibuv = (key, epoch) =>
        settle(() => handle.native.benchRenewOnLibuv(key, OWNER, epoch, TTL_MS, undefined));
    let tail = Promise.resolve();
    const chained = (key, epoch) => {
        const call = tail.then(() => onLibuv(key, epoch));
        tail = call.then(noop, noop);
        return call;
    };
    return {
        executor: (key, epoch) => store.renew(key, OWNER, epoch, TTL_MS),
        'AsyncTask + chain': chained,
        'AsyncTask unchained': onLibuv,
    };
}

/** Calls per second: `inFlight` callers, each renewing its own lease, one call after another. */
async function callsPerSecond(renew, leases, inFlight, total) {
    const perCaller = Math.max(2, Math.ceil(total / inFlight));
    const caller = async ({ key, epoch }) => {
        for (let i = 0; i < perCaller; i += 1) await renew(key, epoch);
    };
    const start = process.hrtime.bigint();
    await Promise.all(leases.slice(0, inFlight).map(caller));
    return (perCaller * inFlight) / (Number(process.hrtime.bigint() - start) / 1e9);
}

const quantile = (values, q) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * q)];
const median = values => quantile(values, 0.5);

async function measure(name, store, total) {
    const tag = crypto.randomBytes(4).toString('hex');
    const leases = [];
    for (let i = 0; i < Math.max(...IN_FLIGHT); i += 1) {
        const grant = await store.acquire(`bench-${tag}-${i}`, OWNER, TTL_MS);
        leases.push({ key: grant.record.key, epoch: grant.record.epoch });
    }
    const ways = Object.entries(sides(store));
    // Untimed: threads started, code compiled, the store's pages cached.
    for (const [, renew] of ways) await callsPerSecond(renew, leases, 16, Math.min(total, 200));
    console.log(`${name} (${total} renewals per side and round, ${ROUNDS} rounds; calls/s, median of the rounds)`);
    for (const inFlight of IN_FLIGHT) {
        const figures = Object.fromEntries(ways.map(([way]) => [way, []]));
        for (let round = 0; round < ROUNDS; round += 1) {
            const order = round % 2 === 0 ? ways : [...ways].reverse();
            for (const [way, renew] of order) figures[way].push(await callsPerSecond(renew, leases, inFlight, total));
        }
        const ratios = figures.executor.map((ours, round) => ours / figures['AsyncTask + chain'][round]);
        const shown = ways.map(([way]) => `${way} ${median(figures[way]).toFixed(0)}`).join(', ');
        console.log(
            `  ${String(inFlight).padStart(3)} in flight: ${shown}; executor / (AsyncTask + chain) ` +
                `${median(ratios).toFixed(2)} (rounds ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)})`,
        );
    }
    store.close();
}

console.log(`UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE ?? '(4)'}, ${os.cpus().length} CPUs, load ${os.loadavg()[0].toFixed(1)}`);
await measure(`SQLite on a file in ${os.tmpdir()}`, new SqliteLeaseStore({ path: path.join(folderIn(os.tmpdir()), 'leases.db') }), 400);
if (fs.existsSync('/dev/shm')) {
    await measure('SQLite on tmpfs (/dev/shm)', new SqliteLeaseStore({ path: path.join(folderIn('/dev/shm'), 'leases.db') }), 4_000);
} else {
    console.log('SQLite on tmpfs: not measured, this machine has no /dev/shm');
}
const prefix = `gtbench${process.pid}_`;
let mysql;
try {
    mysql = await openLeaseStore(`${MYSQL_URL}${MYSQL_URL.includes('?') ? '&' : '?'}prefix=${prefix}`);
} catch (error) {
    console.log(`MySQL: not measured, no server at ${MYSQL_URL.replace(/\/\/[^@/]*@/, '//')}: ${error.message}`);
}
if (mysql) {
    await measure('MySQL/MariaDB', mysql, 600);
    console.log(`  (tables ${prefix}leases and ${prefix}lease_log are left on the server)`);
}
