'use strict';
/**
 * One replica for the multi-process test in router.test.js: a TenantRouter on the shared lease
 * store and durable store, driven by JSON lines on stdin, answering on stdout.
 *
 *   { id, op: 'write', tenant, value }  opens the tenant if needed, appends `value` in a call
 *   { id, op: 'handoff', tenant }       hands it off
 *   { id, op: 'read', tenant }          opens it if needed, reads the ledger in a call
 *   { id, op: 'size', tenant }          the size of a served tenant's ledger, in a call
 *   { id, op: 'copied' }                what this process's copies wrote: copies, bytes
 *   { id, op: 'close' }                 closes the router and exits
 *
 * Answers `{ id, ok: true, value }` or `{ id, ok: false, code, owner? }` (`owner` for
 * LEASE_HELD). A write's value says when its call ran (`process.hrtime`, CLOCK_MONOTONIC, one
 * clock for every process of the machine) and at which epoch.
 */
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const Database = require('better-sqlite3');

const pkg = require('..');

const [leasePath, durablePath, stateRoot, replicaId] = process.argv.slice(2);
const ORG = 'acme';
const LEDGER = path.join('gotry-state', 'gotry-state.db');

function withLedger(handle, use) {
    fs.mkdirSync(path.join(handle.root, 'gotry-state'), { recursive: true });
    const db = new Database(path.join(handle.root, LEDGER));
    try {
        db.pragma('journal_mode = WAL');
        db.exec('CREATE TABLE IF NOT EXISTS entries (n INTEGER PRIMARY KEY, text TEXT NOT NULL, replica TEXT NOT NULL, epoch INTEGER NOT NULL)');
        return use(db);
    } finally {
        db.close();
    }
}

async function served(router, tenant) {
    const key = pkg.leaseKeyFor(ORG, tenant);
    if (!router.status().some(status => status.key === key && status.state === 'serving')) await router.open(ORG, tenant);
    return key;
}

async function main() {
    const router = await pkg.TenantRouter.start({
        leaseStore: new pkg.SqliteLeaseStore({ path: leasePath }),
        durableStore: new pkg.DirectoryDurableStore({ path: durablePath }),
        stateRoot,
        replicaId,
        ttlMs: 5_000,
        marginMs: 1_000,
        copyPolicy: { durability: 'async', intervalMs: 60_000 },
    });
    const answer = message => process.stdout.write(`${JSON.stringify(message)}\n`);
    const ops = {
        async write({ tenant, value }) {
            const key = await served(router, tenant);
            return router.run(key, handle => {
                const start = process.hrtime.bigint();
                handle.assertHeld();
                withLedger(handle, db => db.prepare('INSERT INTO entries (text, replica, epoch) VALUES (?, ?, ?)').run(value, replicaId, handle.epoch));
                const end = process.hrtime.bigint();
                return { epoch: handle.epoch, start: String(start), end: String(end) };
            });
        },
        async handoff({ tenant }) {
            await router.handoff(pkg.leaseKeyFor(ORG, tenant), 5_000);
            return null;
        },
        async read({ tenant }) {
            const key = await served(router, tenant);
            return router.run(key, handle => withLedger(handle, db => db.prepare('SELECT text, replica, epoch FROM entries ORDER BY n').all()));
        },
        async size({ tenant }) {
            return router.run(pkg.leaseKeyFor(ORG, tenant), handle => fs.statSync(path.join(handle.root, LEDGER)).size);
        },
        async copied() {
            const text = await pkg.metrics();
            const value = series => Number(text.match(new RegExp(`^${series} (\\S+)$`, 'm'))?.[1] ?? 0);
            return {
                copies: value('gotry_tenant_copies_total\\{outcome="written"\\}'),
                bytes: value('gotry_tenant_copy_bytes_total'),
            };
        },
        async close() {
            return router.close(5_000);
        },
    };
    const lines = readline.createInterface({ input: process.stdin });
    lines.on('line', async line => {
        const request = JSON.parse(line);
        try {
            answer({ id: request.id, ok: true, value: await ops[request.op](request) });
        } catch (error) {
            answer({ id: request.id, ok: false, code: error.code, message: error.message, owner: error.record?.owner });
        }
        if (request.op === 'close') process.exit(0);
    });
    answer({ id: 0, ok: true, value: 'ready' });
}

main().catch(error => {
    process.stderr.write(`${error.stack}\n`);
    process.exit(1);
});
