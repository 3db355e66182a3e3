'use strict';
/**
 * Durable stores and epoch-scoped copies through the package: the stale writer
 * (on the directory backend, and on S3 when GOTRY_S3_URL names a server), every reason a
 * restore skips a copy, conflicts, an unusable store, and restores that keep the event loop
 * turning and cannot deadlock on a `verify` that waits for other calls.
 *
 * Ledgers are real SQLite files written with better-sqlite3. Most writes open and close their
 * connection; the tests at the end keep a host connection open, with rows only in its WAL,
 * while copies and restores run: without a snapshot function they are refused
 * (OPEN_IN_PROCESS) and the WAL survives, with betterSqlite3Snapshot the copy holds every
 * committed row.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const Database = require('better-sqlite3');

const pkg = require('..');
const { tempDbPath, rejection, isA, LEDGER, appendLedger, ledgerOf } = require('./helpers');

const { SqliteLeaseStore, TenantLease, ManualClock, EpochCopies, DirectoryDurableStore, openDurableStore } = pkg;

const ORG = 'acme';
const NOTES = path.join('notes', 'readme.txt');
const TTL_MS = 1_000;
const S3_URL = process.env.GOTRY_S3_URL;

/** A tenant of its own per test, so that copies in a shared S3 bucket never meet. */
function newTenant() {
    const tenant = `t-${crypto.randomBytes(16).toString('hex')}`;
    return { tenant, key: pkg.leaseKeyFor(ORG, tenant) };
}

function tempDir() {
    return path.dirname(tempDbPath('unused'));
}

/** One lease store on a manual wall clock; every holder gets a manual monotonic clock. */
function leases() {
    const wall = new ManualClock(1_000_000);
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: wall });
    const acquire = (key, replicaId) =>
        TenantLease.acquire({ key, replicaId, store, ttlMs: TTL_MS, marginMs: 100, clock: new ManualClock(0) });
    /** Lets every lease run out on the store's clock (a holder's own clock stays where it is). */
    const expireAll = () => wall.advance(TTL_MS + 1);
    return { store, acquire, expireAll };
}

/** A tenant root of one replica: its own state folder, laid out as tenantRootFor says. */
/** A fresh tenant, held by `a` in a fresh lease store, and copies in a fresh durable store. */
async function heldTenant() {
    const { tenant, key } = newTenant();
    const { store, acquire, expireAll } = leases();
    const copies = new EpochCopies({ store: directoryStore().store });
    const a = await acquire(key, 'a');
    return { tenant, key, store, acquire, expireAll, copies, a };
}

function tenantRoot(tenant) {
    return pkg.tenantRootFor(tempDir(), ORG, tenant);
}

function writeNotes(root, text) {
    fs.mkdirSync(path.join(root, 'notes'), { recursive: true });
    fs.writeFileSync(path.join(root, NOTES), text);
}

/** Every file under `dir`, relative, sorted. */
function filesOf(dir) {
    return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter(entry => entry.isFile())
        .map(entry => path.relative(dir, path.join(entry.parentPath ?? entry.path, entry.name)))
        .sort();
}

const pad = (n, width) => String(n).padStart(width, '0');

/**
 * Flips a byte of what copy (epoch, seq) made for file `index` (files are numbered in path
 * order) on the directory backend: its object, or its bytes inline in the manifest when they
 * were small enough to ride there, so a test damages the same bytes wherever they are kept.
 */
function damageObject(storeDir, tenant, epoch, seq, index) {
    const epochs = path.join(storeDir, 'orgs', ORG, 'tenants', tenant, 'epochs');
    const manifestPath = path.join(epochs, pad(epoch, 20), `${pad(seq, 20)}.json`);
    const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
    const file = manifest.files[index];
    const own = `${pad(epoch, 20)}/${pad(seq, 20)}/files/${pad(index, 6)}`;
    const made = [file.base, ...(file.base_pieces ?? []), ...(file.deltas ?? [])].filter(o => o.object.startsWith(own));
    assert.ok(made.length > 0, `copy ${epoch}/${seq} made nothing for file ${index}`);
    const object = made[made.length - 1];
    if (object.inline === undefined) {
        flipByte(path.join(epochs, object.object));
        return;
    }
    const bytes = Buffer.from(object.inline, 'base64');
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    object.inline = bytes.toString('base64');
    fs.writeFileSync(manifestPath, JSON.stringify(manifest));
}

function flipByte(file) {
    const bytes = fs.readFileSync(file);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    fs.writeFileSync(file, bytes);
}

function directoryStore() {
    const dir = path.join(tempDir(), 'copies');
    return { dir, store: new DirectoryDurableStore({ path: dir }) };
}

/**
 * The stale writer: A (epoch 1) copies, stalls past its TTL while its own gate still
 * passes, B (epoch 2) restores A's last copy and writes its own, A wakes and writes another
 * copy into epoch 1, and C (epoch 3) restores B's copy, never A's late one.
 */
async function staleWriter(durable) {
    const { tenant, key } = newTenant();
    const { store, acquire, expireAll } = leases();
    const copies = new EpochCopies({ store: durable });
    assert.equal(copies.store, durable);

    const a = await acquire(key, 'replica-a');
    assert.equal(a.epoch, 1);
    const rootA = tenantRoot(tenant);
    assert.deepEqual(await copies.restore(a, rootA), { restored: null, skipped: [], files: 0, bytes: 0 });
    appendLedger(rootA, 'a1');
    writeNotes(rootA, 'from A');
    const first = await copies.writeCopy(a, rootA);
    assert.equal(first.epoch, 1);
    assert.equal(first.seq, 1);
    assert.equal(first.files, 2, 'the ledger and the notes');
    appendLedger(rootA, 'a2');
    const last = await copies.writeCopy(a, rootA);
    assert.deepEqual([last.epoch, last.seq], [1, 2]);

    // A stalls: its lease runs out on the store's clock, while its own clock stands still, so
    // its gate still passes (the frozen process that checked before it froze).
    expireAll();
    a.assertHeld();

    const b = await acquire(key, 'replica-b');
    assert.equal(b.epoch, 2);
    const rootB = tenantRoot(tenant);
    const restoredB = await copies.restore(b, rootB);
    assert.deepEqual(restoredB.restored, { epoch: 1, seq: 2 });
    assert.deepEqual(restoredB.skipped, []);
    assert.equal(restoredB.files, 2);
    assert.deepEqual(ledgerOf(rootB), ['a1', 'a2']);
    assert.equal(fs.readFileSync(path.join(rootB, NOTES), 'utf8'), 'from A');
    assert.deepEqual(filesOf(rootB), [LEDGER, NOTES].sort());
    appendLedger(rootB, 'b1');
    writeNotes(rootB, 'from B');
    const fromB = await copies.writeCopy(b, rootB);
    assert.deepEqual([fromB.epoch, fromB.seq], [2, 1]);

    // A wakes and writes again: the store takes it, but only into epoch 1's prefix.
    appendLedger(rootA, 'a-late');
    writeNotes(rootA, 'late from A');
    const late = await copies.writeCopy(a, rootA);
    assert.deepEqual([late.epoch, late.seq], [1, 3]);
    const listed = await copies.list(key);
    assert.deepEqual(listed.map(c => [c.epoch, c.seq, c.complete]), [[1, 1, true], [1, 2, true], [1, 3, true], [2, 1, true]]);
    // Each copy is its manifest alone: files this small ride inline in it, those that changed
    // and those carried from the copy before.
    assert.ok(listed.every(c => c.objects === 1 && c.bytes > 0), JSON.stringify(listed));

    expireAll();
    const c = await acquire(key, 'replica-c');
    assert.equal(c.epoch, 3);
    const rootC = tenantRoot(tenant);
    const restoredC = await copies.restore(c, rootC);
    assert.deepEqual(restoredC.restored, { epoch: 2, seq: 1 });
    assert.deepEqual(ledgerOf(rootC), ['a1', 'a2', 'b1']);
    assert.equal(fs.readFileSync(path.join(rootC, NOTES), 'utf8'), 'from B');
    store.close();
}

test('the stale writer over a directory: C restores B\'s copy, never A\'s late one', async () => {
    await staleWriter(directoryStore().store);
});

if (S3_URL) {
    test('the stale writer over S3 (GOTRY_S3_URL)', async () => {
        const durable = await openDurableStore(S3_URL);
        assert.match(durable.location, /^s3:\/\//);
        // The URL's credentials never show: the location is safe to log.
        const { username, password } = new URL(S3_URL.replace(/^s3:/, 'http:'));
        assert.doesNotMatch(durable.location, /^s3:\/\/[^/]*@/, 'the location shows a credential');
        if (password) assert.ok(!durable.location.includes(`${username}:${password}`), 'the location shows a credential');
        await staleWriter(durable);
    });
} else {
    const note = 'GOTRY_S3_URL is not set: the stale-writer scenario over S3 did not run (scripts/test.sh starts a moto server and sets it)';
    process.stderr.write(`NOTE test/copies.test.js: ${note}\n`);
    test('the stale writer over S3', { skip: note }, () => {});
}

test('a written copy says what it stored and what it reused of its lineage', async () => {
    const { tenant, copies, a } = await heldTenant();
    const root = tenantRoot(tenant);
    appendLedger(root, 'a1');
    writeNotes(root, 'unchanged');
    const first = await copies.writeCopy(a, root);
    // Nothing to build on yet: every file is made whole, and both are small enough to ride
    // inline in the manifest (no object of their own).
    assert.deepEqual(
        [first.piecesUploaded, first.bytesUploaded, first.piecesReused, first.bytesReused],
        [0, first.bytes, 0, 0],
    );
    const again = await copies.writeCopy(a, root);
    assert.equal(again.seq, 2);
    // Nothing changed: both files are carried from the first copy, nothing made again.
    assert.deepEqual(
        [again.piecesUploaded, again.bytesUploaded, again.piecesReused, again.bytesReused],
        [0, 0, 0, first.bytesUploaded],
    );
    writeNotes(root, 'changed');
    const third = await copies.writeCopy(a, root);
    assert.deepEqual([third.piecesUploaded, third.bytesUploaded], [0, 'changed'.length]);
    assert.equal(third.bytesReused, first.bytes - 'unchanged'.length, 'the ledger');
});

test('B crashes before its first copy: C skips A\'s late copy as superseded', async () => {
    const { tenant, key, store, acquire, expireAll, copies, a } = await heldTenant();
    const rootA = tenantRoot(tenant);
    appendLedger(rootA, 'a1');
    await copies.writeCopy(a, rootA);
    expireAll();
    const b = await acquire(key, 'b');
    assert.deepEqual((await copies.restore(b, tenantRoot(tenant))).restored, { epoch: 1, seq: 1 });
    // B dies here. A wakes and writes a copy that B's tenure never saw.
    appendLedger(rootA, 'a-late');
    assert.deepEqual((await copies.writeCopy(a, rootA)).seq, 2);
    expireAll();
    const c = await acquire(key, 'c');
    const rootC = tenantRoot(tenant);
    const report = await copies.restore(c, rootC);
    assert.deepEqual(report.restored, { epoch: 1, seq: 1 });
    assert.deepEqual(report.skipped, [{ epoch: 1, seq: 2, reason: 'superseded' }]);
    assert.deepEqual(ledgerOf(rootC), ['a1']);
    store.close();
});

test('a flipped byte is skipped as checksum; no copy that verifies is RestoreVerificationError with every skip', async () => {
    const { tenant, key } = newTenant();
    const { store, acquire, expireAll } = leases();
    const { dir, store: durable } = directoryStore();
    const copies = new EpochCopies({ store: durable });
    const a = await acquire(key, 'a');
    const rootA = tenantRoot(tenant);
    appendLedger(rootA, 'one');
    writeNotes(rootA, 'n');
    await copies.writeCopy(a, rootA);
    appendLedger(rootA, 'two');
    await copies.writeCopy(a, rootA);
    // Files are numbered in path order: the ledger (gotry-state/...) is 0, the notes 1.
    damageObject(dir, tenant, 1, 2, 0);

    expireAll();
    const b = await acquire(key, 'b');
    const rootB = tenantRoot(tenant);
    const report = await copies.restore(b, rootB);
    assert.deepEqual(report.restored, { epoch: 1, seq: 1 });
    assert.deepEqual(report.skipped, [{ epoch: 1, seq: 2, reason: 'checksum' }]);
    assert.deepEqual(ledgerOf(rootB), ['one']);

    damageObject(dir, tenant, 1, 1, 1);
    expireAll();
    const c = await acquire(key, 'c');
    const rootC = tenantRoot(tenant);
    writeNotes(rootC, 'what C had');
    const error = await rejection(copies.restore(c, rootC));
    assert.ok(isA(pkg.RestoreVerificationError, 'GOTRY_TENANT_RESTORE_INVALID')(error));
    // B's tenure began from (1, 1): the later (1, 2) of epoch 1 is superseded for C.
    assert.deepEqual(error.skipped, [
        { epoch: 1, seq: 2, reason: 'superseded' },
        { epoch: 1, seq: 1, reason: 'checksum' },
    ]);
    assert.equal(fs.readFileSync(path.join(rootC, NOTES), 'utf8'), 'what C had', 'a refused restore leaves the root alone');
    store.close();
});

test('verify: false skips a copy as fold, sees the fetched copy, and may be async', async () => {
    const { tenant, key, store, acquire, expireAll, copies, a } = await heldTenant();
    const rootA = tenantRoot(tenant);
    appendLedger(rootA, 'good');
    await copies.writeCopy(a, rootA);
    appendLedger(rootA, 'bad fold');
    await copies.writeCopy(a, rootA);

    expireAll();
    const b = await acquire(key, 'b');
    const rootB = tenantRoot(tenant);
    const seen = [];
    const report = await copies.restore(b, rootB, {
        verify: async dir => {
            seen.push({ dir, ledger: ledgerOf(dir) });
            await new Promise(resolve => setTimeout(resolve, 5));
            return !ledgerOf(dir).includes('bad fold');
        },
    });
    assert.deepEqual(report.restored, { epoch: 1, seq: 1 });
    assert.deepEqual(report.skipped, [{ epoch: 1, seq: 2, reason: 'fold' }]);
    assert.deepEqual(seen.map(s => s.ledger), [['good', 'bad fold'], ['good']]);
    for (const { dir } of seen) {
        assert.notEqual(dir, rootB);
        assert.equal(path.dirname(dir), path.dirname(rootB), 'fetched beside the root, to be renamed into place');
        assert.equal(fs.existsSync(dir), false, 'the scratch folder is gone after the restore');
    }
    assert.deepEqual(ledgerOf(rootB), ['good']);

    // Every copy refused by the host: RESTORE_INVALID, the synchronous verdict taken as well.
    expireAll();
    const c = await acquire(key, 'c');
    const error = await rejection(copies.restore(c, tenantRoot(tenant), { verify: () => false }));
    assert.ok(isA(pkg.RestoreVerificationError, 'GOTRY_TENANT_RESTORE_INVALID')(error));
    assert.deepEqual(error.skipped, [{ epoch: 1, seq: 2, reason: 'superseded' }, { epoch: 1, seq: 1, reason: 'fold' }]);
    store.close();
});

test('a verify that throws or rejects rejects the restore with that very value; a non-boolean is a TypeError', async () => {
    const { tenant, key, store, acquire, expireAll, copies, a } = await heldTenant();
    const rootA = tenantRoot(tenant);
    appendLedger(rootA);
    await copies.writeCopy(a, rootA);
    expireAll();
    const b = await acquire(key, 'b');
    const rootB = tenantRoot(tenant);
    writeNotes(rootB, 'before');

    const thrown = new Error('the fold does not add up');
    assert.equal(await rejection(copies.restore(b, rootB, { verify: () => { throw thrown; } })), thrown);
    const rejected = new pkg.LeaseLostError('a host error of this package');
    assert.equal(await rejection(copies.restore(b, rootB, { verify: async () => { throw rejected; } })), rejected);
    const notBoolean = await rejection(copies.restore(b, rootB, { verify: () => 1 }));
    assert.ok(notBoolean instanceof TypeError, String(notBoolean));
    assert.match(notBoolean.message, /boolean/);
    assert.ok((await rejection(copies.restore(b, rootB, { verify: 'yes' }))) instanceof TypeError);
    // None of those touched the root; the same tenure then restores.
    assert.equal(fs.readFileSync(path.join(rootB, NOTES), 'utf8'), 'before');
    assert.deepEqual((await copies.restore(b, rootB, { verify: () => true })).restored, { epoch: 1, seq: 1 });
    assert.deepEqual(filesOf(rootB), [LEDGER]);
    store.close();
});

/**
 * Fails when `promise` has not settled after `ms`, and then ends the process: the calls a
 * deadlock leaves pending keep the event loop alive, so the runner would wait forever.
 */
function within(ms, promise, what) {
    let timer;
    const expired = new Promise((_, reject) => {
        timer = setTimeout(() => {
            process.stderr.write(`${what} did not settle within ${ms} ms: ending the process\n`);
            setTimeout(() => process.exit(1), 100);
            reject(new Error(`${what} did not settle within ${ms} ms`));
        }, ms);
    });
    return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

test('restores whose verify waits for other calls of the addon do not deadlock, more of them than threads', async () => {
    const { store, acquire, expireAll } = leases();
    const copies = new EpochCopies({ store: directoryStore().store });
    // More restores at once than the addon has threads for durable work (4 by default).
    const tenants = Array.from({ length: 8 }, newTenant);
    for (const { tenant, key } of tenants) {
        const root = tenantRoot(tenant);
        writeNotes(root, key);
        await copies.writeCopy(await acquire(key, 'a'), root);
    }
    expireAll();
    const holders = await Promise.all(tenants.map(({ key }) => acquire(key, 'b')));
    const reports = await within(30_000, Promise.all(tenants.map(({ tenant, key }, i) =>
        copies.restore(holders[i], tenantRoot(tenant), {
            verify: async dir => {
                // A copy call on the same store's lane and a lease store call, from inside.
                const listed = await copies.list(key);
                const record = await store.read(key);
                return listed.length === 1 && record.owner === 'b' && fs.readFileSync(path.join(dir, NOTES), 'utf8') === key;
            },
        }))), 'the restores');
    assert.deepEqual(reports.map(r => r.restored), tenants.map(() => ({ epoch: 1, seq: 1 })));
    store.close();
});

test('a foreign object in the holder\'s own epoch prefix is CopyConflictError', async () => {
    const { tenant, key } = newTenant();
    const { store, acquire } = leases();
    const { store: durable } = directoryStore();
    const copies = new EpochCopies({ store: durable });
    const a = await acquire(key, 'a');
    const root = tenantRoot(tenant);
    writeNotes(root, 'x');
    await copies.writeCopy(a, root);
    const foreign = `orgs/${ORG}/tenants/${tenant}/epochs/${pad(1, 20)}/${pad(7, 20)}/files/${pad(0, 6)}`;
    assert.equal(await durable.putNew(foreign, Buffer.from('not mine')), 'created');
    const error = await rejection(copies.writeCopy(a, root));
    assert.ok(isA(pkg.CopyConflictError, 'GOTRY_TENANT_COPY_CONFLICT')(error));
    assert.match(error.message, /not written by this holder/);
    store.close();
});

test('an unusable store folder is DurableStoreUnavailableError with the errno as cause.code; the lease is unaffected', async () => {
    const base = tempDir();
    const file = path.join(base, 'a-file');
    fs.writeFileSync(file, '');
    const unavailable = isA(pkg.DurableStoreUnavailableError, 'GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE');
    const backendCode = code => error => {
        assert.ok(error.cause instanceof Error, 'the backend code travels as cause');
        assert.equal(error.cause.code, code);
        return true;
    };
    // As root, permissions stop nothing: a file where a folder must be fails for everyone.
    assert.throws(() => new DirectoryDurableStore({ path: path.join(file, 'store') }), unavailable);
    assert.throws(() => new DirectoryDurableStore({ path: path.join(file, 'store') }), backendCode('ENOTDIR'));
    const opened = await rejection(openDurableStore(`file://${path.join(file, 'store')}`));
    assert.ok(unavailable(opened) && backendCode('ENOTDIR')(opened));

    // A store that breaks after it was opened: the next copy fails, the gate stays open, and
    // once the folder is usable again the copy after succeeds.
    const { tenant, key } = newTenant();
    const { store, acquire } = leases();
    const { dir, store: durable } = directoryStore();
    const copies = new EpochCopies({ store: durable });
    const a = await acquire(key, 'a');
    const root = tenantRoot(tenant);
    writeNotes(root, 'x');
    fs.writeFileSync(path.join(dir, 'orgs'), 'in the way');
    const error = await rejection(copies.writeCopy(a, root));
    assert.ok(unavailable(error) && backendCode('ENOTDIR')(error));
    a.assertHeld();
    fs.rmSync(path.join(dir, 'orgs'));
    const written = await copies.writeCopy(a, root);
    assert.equal(written.epoch, 1);
    assert.deepEqual((await copies.list(key)).map(c => c.complete), [true]);
    store.close();
});

test('a large restore leaves the event loop free: the loop keeps turning', async t => {
    const { tenant, key } = newTenant();
    const { store, acquire, expireAll } = leases();
    const copies = new EpochCopies({ store: directoryStore().store });
    const root = tenantRoot(tenant);
    appendLedger(root, ...Array.from({ length: 2_000 }, (_, i) => `entry ${i} ${'x'.repeat(500)}`));
    for (let i = 0; i < 6; i += 1) {
        fs.mkdirSync(path.join(root, 'blobs'), { recursive: true });
        fs.writeFileSync(path.join(root, 'blobs', `b${i}`), crypto.randomBytes(4 << 20));
    }
    const written = await copies.writeCopy(await acquire(key, 'a'), root);
    assert.ok(written.bytes > 24 << 20, `only ${written.bytes} bytes`);
    expireAll();
    const b = await acquire(key, 'b');

    // Turns of the loop, counted by a chain of setImmediate callbacks: one runs on every
    // turn. A restore done on the calling thread would return a settled promise, and the
    // await would resume before any turn; one done off the loop leaves it turning (thousands
    // of turns while tens of megabytes are fetched, hashed, checked and flushed), with no
    // figure of time in the test.
    let turns = 0;
    let counting = true;
    const turn = () => {
        turns += 1;
        if (counting) setImmediate(turn);
    };
    setImmediate(turn);
    const started = performance.now();
    const report = await copies.restore(b, tenantRoot(tenant));
    const elapsed = performance.now() - started;
    const turnsDuring = turns;
    counting = false;
    t.diagnostic(`restored ${report.bytes} bytes in ${elapsed.toFixed(0)} ms, ${turnsDuring} turns of the loop meanwhile`);
    assert.equal(report.bytes, written.bytes);
    assert.ok(turnsDuring >= 10, `only ${turnsDuring} turns of the loop during a restore of ${elapsed.toFixed(0)} ms`);
    store.close();
});

test('gc keeps the newest valid copies; forgetCopies deletes up to the forgotten floor', async () => {
    const { tenant, key, store, acquire, expireAll, copies, a } = await heldTenant();
    const root = tenantRoot(tenant);
    for (const text of ['1', '2', '3']) {
        writeNotes(root, text);
        await copies.writeCopy(a, root);
    }
    assert.deepEqual(await copies.gc(a, { keep: 2 }), {
        kept: [{ epoch: 1, seq: 3 }, { epoch: 1, seq: 2 }],
        deleted: [{ epoch: 1, seq: 1 }],
    });
    assert.ok((await rejection(copies.gc(a, { keep: 0 }))) instanceof RangeError);
    assert.ok((await rejection(copies.gc(a, { keep: 1.5 }))) instanceof RangeError);
    assert.ok((await rejection(copies.gc(a))) instanceof TypeError);

    expireAll();
    const b = await acquire(key, 'b');
    const rootB = tenantRoot(tenant);
    assert.deepEqual((await copies.restore(b, rootB)).restored, { epoch: 1, seq: 3 });
    await copies.writeCopy(b, rootB);
    // A's lease is gone from the store: it cannot delete anything any more.
    assert.ok((await rejection(copies.forgetCopies(a))) instanceof pkg.LeaseLostError);
    assert.equal((await b.markForgotten()).forgottenAtEpoch, 2);
    assert.deepEqual(await copies.forgetCopies(b), [{ epoch: 1, seq: 2 }, { epoch: 1, seq: 3 }, { epoch: 2, seq: 1 }]);
    // A copy now would lie below the floor, where no restore looks: refused, nothing written.
    assert.ok((await rejection(copies.writeCopy(b, rootB))) instanceof pkg.CopyConflictError);
    assert.deepEqual(await copies.list(key), []);
    store.close();
});

test('a lease held by a LeaseKeeper writes and restores copies too', async () => {
    const { tenant, key } = newTenant();
    const clock = new ManualClock(0);
    const store = new SqliteLeaseStore({ path: tempDbPath(), nowMs: new ManualClock(5_000) });
    const keeper = pkg.LeaseKeeper.start({ store, replicaId: 'kept', ttlMs: TTL_MS, marginMs: 100, clock, withoutThread: true });
    const copies = new EpochCopies({ store: directoryStore().store });
    const lease = await keeper.acquire(key);
    const root = tenantRoot(tenant);
    assert.equal((await copies.restore(lease, root)).restored, null);
    writeNotes(root, 'kept');
    assert.deepEqual(await copies.writeCopy(keeper.get(key), root), {
        epoch: 1, seq: 1, files: 1, bytes: 4, piecesUploaded: 0, bytesUploaded: 4, piecesReused: 0, bytesReused: 0,
    });
    await keeper.shutdown();
    store.close();
});

test('the durable store itself: create-only puts, get, list, delete', async () => {
    const { store: durable, dir } = directoryStore();
    assert.equal(durable.location, `file://${dir}`);
    assert.equal(await durable.putNew('a/b', Buffer.from('one')), 'created');
    assert.equal(await durable.putNew('a/b', new Uint8Array([1, 2])), 'alreadyExists');
    const got = await durable.get('a/b');
    assert.ok(Buffer.isBuffer(got));
    assert.equal(got.toString(), 'one', 'a refused put leaves the object as it was');
    assert.equal(await durable.get('a/missing'), null);
    assert.equal(await durable.putNew('a/c', new Uint8Array(0)), 'created');
    assert.deepEqual(await durable.list('a/'), [{ key: 'a/b', size: 3 }, { key: 'a/c', size: 0 }]);
    assert.deepEqual(await durable.list(), await durable.list('a/'));
    // '/' names no folder of the store: an empty answer would read as "no objects".
    assert.ok((await rejection(durable.list('/'))) instanceof RangeError);
    await durable.delete('a/b');
    await durable.delete('a/b');
    assert.deepEqual((await durable.list('a/')).map(o => o.key), ['a/c']);
    for (const key of ['../x', '/abs', '.hidden', 'a//b', '']) {
        assert.ok((await rejection(durable.putNew(key, Buffer.from('x')))) instanceof RangeError, key);
    }
    assert.ok((await rejection(durable.putNew('k', 'a string'))) instanceof RangeError);
    assert.ok((await rejection(openDurableStore('gs://bucket'))) instanceof RangeError);
});

test('arguments that are not this package\'s objects are refused', async () => {
    assert.throws(() => new EpochCopies({ store: {} }), TypeError);
    assert.throws(() => new EpochCopies(), TypeError);
    assert.throws(() => new DirectoryDurableStore('a path'), TypeError);
    assert.throws(() => new DirectoryDurableStore({ path: 1 }), { code: 'ERR_INVALID_ARG_TYPE' });
    const copies = new EpochCopies({ store: directoryStore().store });
    const { key, tenant } = newTenant();
    const { store, acquire } = leases();
    const lease = await acquire(key, 'a');
    assert.ok((await rejection(copies.writeCopy({ key }, tenantRoot(tenant)))) instanceof TypeError);
    assert.equal((await rejection(copies.writeCopy(lease, 42))).code, 'ERR_INVALID_ARG_TYPE');
    assert.ok((await rejection(copies.list('no-slash'))) instanceof pkg.InvalidTenantIdError);
    store.close();
});

// ---- ledgers the host keeps open: the host snapshot --------------------------------------

const INSERT = 'INSERT INTO entries (text) VALUES (?)';
const SELECT = 'SELECT text FROM entries ORDER BY n';
const rowsOf = db => db.prepare(SELECT).all().map(row => row.text);

/**
 * The host's connection to a root's ledger, kept open, holding `texts` only in its WAL: the
 * ledger starts with 'first' (checkpointed into the database file), and checkpoints are off,
 * so the rows written here are in the `-wal` file alone.
 */
function openLiveLedger(root, ...texts) {
    appendLedger(root, 'first');
    const checkpointed = ledgerOf(root);
    const live = new Database(path.join(root, LEDGER));
    live.pragma('wal_autocheckpoint = 0');
    const insert = live.prepare(INSERT);
    for (const text of texts) insert.run(text);
    // Proof that they are in the WAL only: the database file alone does not have them.
    const alone = path.join(tempDir(), 'main-file-alone.db');
    fs.copyFileSync(path.join(root, LEDGER), alone);
    const db = new Database(alone, { readonly: true });
    try {
        assert.deepEqual(rowsOf(db), checkpointed);
    } finally {
        db.close();
    }
    return live;
}

/**
 * A ledger's entries as another process reads them (Python's sqlite3, read-only): what a
 * reader that shares nothing with this process sees, the WAL's content included.
 */
function ledgerFromAnotherProcess(root) {
    const read = 'import json, sqlite3, sys\n'
        + 'db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)\n'
        + 'print(json.dumps([row[0] for row in db.execute("SELECT text FROM entries ORDER BY n")]))\n';
    const result = spawnSync('python3', ['-c', read, path.join(root, LEDGER)], { encoding: 'utf8' });
    assert.equal(result.status, 0, result.stderr);
    return JSON.parse(result.stdout);
}

/** The `-wal` file is still there, the same file, at least as long as it was. */
function assertSameWal(root, before) {
    const wal = path.join(root, `${LEDGER}-wal`);
    assert.ok(fs.existsSync(wal), 'the host connection\'s WAL file was deleted');
    const after = fs.statSync(wal);
    assert.equal(after.ino, before.ino, 'the WAL file was replaced');
    assert.ok(after.size >= before.size, `the WAL shrank from ${before.size} to ${after.size} bytes`);
}

test('a copy of a root whose ledger the host holds open, without a snapshot, is OPEN_IN_PROCESS and leaves the WAL alone', async () => {
    const { tenant, key } = newTenant();
    const { store, acquire } = leases();
    const copies = new EpochCopies(directoryStore().store);
    const lease = await acquire(key, 'a');
    const root = tenantRoot(tenant);
    const live = openLiveLedger(root, 'wal only');
    try {
        const wal = fs.statSync(path.join(root, `${LEDGER}-wal`));
        const error = await rejection(copies.writeCopy(lease, root));
        // A code of the registry, with a message that names the file and what to do in Node.
        assert.ok(error instanceof pkg.OpenInProcessError, String(error));
        assert.equal(error.code, 'GOTRY_TENANT_OPEN_IN_PROCESS');
        assert.ok(error.message.includes(path.join(root, LEDGER)), error.message);
        assert.match(error.message, /betterSqlite3Snapshot\(Database\)/);
        assertSameWal(root, wal);
        // The host's connection reads and writes as before, and another process sees it all.
        live.prepare(INSERT).run('after the refusal');
        assert.deepEqual(rowsOf(live), ['first', 'wal only', 'after the refusal']);
        assert.deepEqual(ledgerFromAnotherProcess(root), ['first', 'wal only', 'after the refusal']);
        assert.deepEqual(await copies.list(key), [], 'nothing was written');
        lease.assertHeld();
    } finally {
        live.close();
        store.close();
    }
});

test('with betterSqlite3Snapshot(Database), a copy of a live ledger holds its WAL-only rows and the host connection keeps working', async () => {
    const { tenant, key } = newTenant();
    const { store, acquire, expireAll } = leases();
    const copies = new EpochCopies(directoryStore().store, { snapshot: pkg.betterSqlite3Snapshot(Database) });
    const a = await acquire(key, 'a');
    const root = tenantRoot(tenant);
    writeNotes(root, 'notes');
    const live = openLiveLedger(root, 'wal 1', 'wal 2');
    let written;
    try {
        const wal = fs.statSync(path.join(root, `${LEDGER}-wal`));
        written = await copies.writeCopy(a, root);
        assert.deepEqual([written.epoch, written.seq, written.files], [1, 1, 2], 'the ledger (its WAL inside its image) and the notes');
        assertSameWal(root, wal);
        live.prepare(INSERT).run('after the copy');
        assert.deepEqual(rowsOf(live), ['first', 'wal 1', 'wal 2', 'after the copy']);
        assert.deepEqual(ledgerFromAnotherProcess(root), ['first', 'wal 1', 'wal 2', 'after the copy']);
        // A second copy while the connection stays open: from the frames since the first.
        assert.equal((await copies.writeCopy(a, root)).seq, 2);
        live.prepare(INSERT).run('after the second copy');
    } finally {
        live.close();
    }
    // The host closed (its close checkpoints the WAL into the file): the next holder restores.
    expireAll();
    const b = await acquire(key, 'b');
    const rootB = tenantRoot(tenant);
    const report = await copies.restore(b, rootB);
    assert.deepEqual(report.restored, { epoch: 1, seq: 2 });
    // Every row committed before the copy (all of them in the WAL only), none written after.
    assert.deepEqual(ledgerOf(rootB), ['first', 'wal 1', 'wal 2', 'after the copy']);
    assert.equal(fs.readFileSync(path.join(rootB, NOTES), 'utf8'), 'notes');
    assert.deepEqual(filesOf(rootB), [LEDGER, NOTES].sort(), 'the image is self-contained: no -wal or -shm');
    store.close();
});

test('a snapshot function is called only for the files the host holds, and its throw or rejection fails the copy with that value', async () => {
    const { tenant, key } = newTenant();
    const { store, acquire } = leases();
    const calls = [];
    const failure = new Error('the host cannot snapshot now');
    let mode = 'image';
    // Not an async function: it throws synchronously, or returns a promise.
    const snapshot = (source, image) => {
        calls.push({ source, image });
        if (mode === 'throw') throw failure;
        if (mode === 'reject') return Promise.reject(failure);
        return pkg.betterSqlite3Snapshot(Database)(source, image);
    };
    const durable = directoryStore().store;
    // The options form of the constructor takes the snapshot too.
    const copies = new EpochCopies({ store: durable, snapshot });
    const lease = await acquire(key, 'a');
    const root = tenantRoot(tenant);
    appendLedger(root, 'closed');
    writeNotes(root, 'n');
    await copies.writeCopy(lease, root);
    assert.deepEqual(calls, [], 'nothing is held open: the core reads the files itself');

    const live = openLiveLedger(root, 'live');
    try {
        // Its WAL has frames: the core reads the file and the frames itself, without the host.
        await copies.writeCopy(lease, root);
        assert.deepEqual(calls, []);
        // Emptied by a checkpoint, the WAL tells nothing of the ledger: the copy asks the host.
        live.pragma('wal_checkpoint(TRUNCATE)');
        await copies.writeCopy(lease, root);
        assert.equal(calls.length, 1);
        assert.equal(calls[0].source, path.join(root, LEDGER));
        assert.notEqual(path.dirname(calls[0].image), path.dirname(calls[0].source));
        assert.equal(fs.existsSync(calls[0].image), false, 'the image is scratch, removed after the copy');

        mode = 'reject';
        assert.equal(await rejection(copies.writeCopy(lease, root)), failure);
        mode = 'throw';
        assert.equal(await rejection(copies.writeCopy(lease, root)), failure);
        assert.equal(calls.length, 3);
        assert.throws(() => new EpochCopies(durable, { snapshot: 'yes' }), TypeError);
        assertSameWal(root, fs.statSync(path.join(root, `${LEDGER}-wal`)));
        live.prepare(INSERT).run('still writing');
        assert.deepEqual(rowsOf(live), ['closed', 'first', 'live', 'still writing']);
    } finally {
        live.close();
        store.close();
    }
    // The failed copies left their sequence numbers unused, and no manifest.
    assert.deepEqual((await copies.list(key)).map(c => [c.seq, c.complete]), [[1, true], [2, true], [3, true]]);
});

test('a restore into a root whose ledger the host holds open is OPEN_IN_PROCESS and changes nothing', async () => {
    const { tenant, key } = newTenant();
    const { store, acquire, expireAll } = leases();
    const { store: durable } = directoryStore();
    const copies = new EpochCopies(durable);
    const a = await acquire(key, 'a');
    const rootA = tenantRoot(tenant);
    appendLedger(rootA, 'from A');
    await copies.writeCopy(a, rootA);
    expireAll();
    const b = await acquire(key, 'b');
    const rootB = tenantRoot(tenant);
    writeNotes(rootB, 'B\'s notes');
    const live = openLiveLedger(rootB, 'B wal only');
    try {
        const wal = fs.statSync(path.join(rootB, `${LEDGER}-wal`));
        const files = filesOf(rootB);
        const error = await rejection(copies.restore(b, rootB));
        assert.ok(error instanceof pkg.OpenInProcessError, String(error));
        assert.match(error.message, /restore/);
        assertSameWal(rootB, wal);
        assert.deepEqual(filesOf(rootB), files);
        assert.equal(fs.readFileSync(path.join(rootB, NOTES), 'utf8'), 'B\'s notes');
        live.prepare(INSERT).run('B after the refusal');
        assert.deepEqual(rowsOf(live), ['first', 'B wal only', 'B after the refusal']);
        assert.deepEqual(ledgerFromAnotherProcess(rootB), ['first', 'B wal only', 'B after the refusal']);
        // No tenure began: nothing was written under epoch 2.
        assert.deepEqual(await durable.list(`orgs/${ORG}/tenants/${tenant}/epochs/${pad(2, 20)}/`), []);
    } finally {
        live.close();
    }
    // Closed, the root can be replaced.
    assert.deepEqual((await copies.restore(b, rootB)).restored, { epoch: 1, seq: 1 });
    assert.deepEqual(ledgerOf(rootB), ['from A']);
    store.close();
});

test('an empty root, a store path of "" and a file-system root are RangeErrors before any I/O', async () => {
    const { key, store, copies, a } = await heldTenant();
    const cwdBefore = fs.readdirSync(process.cwd()).sort();
    for (const root of ['', '/', '//', '/..']) {
        const refused = what => error => error instanceof RangeError && error.message.includes(what);
        await assert.rejects(copies.writeCopy(a, root), refused('a tenant root must not be'), `writeCopy ${JSON.stringify(root)}`);
        await assert.rejects(copies.restore(a, root), refused('a tenant root must not be'), `restore ${JSON.stringify(root)}`);
        await assert.rejects(pkg.TenantRouter.start({
            leaseStore: store, durableStore: directoryStore().store, stateRoot: root,
            replicaId: 'r', ttlMs: 3_000, marginMs: 500,
        }), refused("a router's state root must not be"), `stateRoot ${JSON.stringify(root)}`);
    }
    for (const bad of ['', '/']) {
        assert.throws(() => new DirectoryDurableStore({ path: bad }), error => error instanceof RangeError
            && error.message.includes('a durable store folder must not be'), `path ${JSON.stringify(bad)}`);
    }
    // Nothing was written: no tenure marker, no copy, and the working directory as it was.
    assert.deepEqual(await copies.list(key), []);
    assert.deepEqual(fs.readdirSync(process.cwd()).sort(), cwdBefore);
});

test('a restore never replaces the folder holding the working directory', async () => {
    const { copies, a } = await heldTenant();
    const root = path.join(tempDir(), 'root');
    fs.mkdirSync(path.join(root, 'inner'), { recursive: true });
    fs.writeFileSync(path.join(root, 'keep.txt'), 'mine');
    const before = process.cwd();
    process.chdir(path.join(root, 'inner'));
    try {
        await assert.rejects(copies.restore(a, root), error => error instanceof RangeError && /working directory/.test(error.message));
        await assert.rejects(copies.restore(a, '..'), RangeError);
    } finally {
        process.chdir(before);
    }
    assert.equal(fs.readFileSync(path.join(root, 'keep.txt'), 'utf8'), 'mine');
});
