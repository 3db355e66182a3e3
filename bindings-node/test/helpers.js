'use strict';
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const Database = require('better-sqlite3');

/** The temporary folders made here, removed when the process exits (one listener for all). */
const tempDirs = [];
process.on('exit', () => {
    for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh store file path in its own temporary folder, removed when the process exits. */
function tempDbPath(name = 'leases.db') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gotry-node-'));
    tempDirs.push(dir);
    return path.join(dir, name);
}

/** Asserts that `promise` rejects with an error for which `check` holds, and returns it. */
async function rejection(promise) {
    let settled;
    try {
        settled = { value: await promise };
    } catch (error) {
        return error;
    }
    throw new Error(`expected a rejection, got ${JSON.stringify(settled.value)}`);
}

/**
 * Another process (Python's standard sqlite3 module) that takes the store file's write lock
 * with BEGIN IMMEDIATE, logs one row, and commits after `seconds`. `locked` resolves once it
 * holds the lock, `exited` once it has committed and exited.
 */
const HOLDER = `
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT INTO lease_log (key, op, owner, epoch, at_ms) VALUES ('held', 'acquire', 'python', 1, 0)")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
print("released", flush=True)
`;

function holdWriteLock(file, seconds) {
    const child = spawn('python3', ['-c', HOLDER, file, String(seconds)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = readline.createInterface({ input: child.stdout });
    const exited = new Promise((resolve, reject) => {
        child.on('error', reject);
        child.on('exit', code => (code === 0 ? resolve() : reject(new Error(`lock holder exited with ${code}`))));
    });
    const locked = new Promise((resolve, reject) => {
        lines.on('line', line => { if (line === 'locked') resolve(); });
        exited.then(() => reject(new Error('lock holder exited before locking')), reject);
    });
    return { locked, exited };
}

/** Where a tenant root keeps the host's SQLite ledger in these tests. */
const LEDGER = path.join('gotry-state', 'gotry-state.db');

/** Appends entries to a root's ledger (created on first use), one connection per write. */
function appendLedger(root, ...texts) {
    fs.mkdirSync(path.join(root, 'gotry-state'), { recursive: true });
    const db = new Database(path.join(root, LEDGER));
    try {
        db.pragma('journal_mode = WAL');
        db.exec('CREATE TABLE IF NOT EXISTS entries (n INTEGER PRIMARY KEY, text TEXT NOT NULL)');
        const insert = db.prepare('INSERT INTO entries (text) VALUES (?)');
        for (const text of texts) insert.run(text);
    } finally {
        db.close();
    }
}

/** A ledger's entries. Read-write, so that closing leaves no -wal or -shm file behind. */
function ledgerOf(root) {
    const db = new Database(path.join(root, LEDGER), { fileMustExist: true });
    try {
        return db.prepare('SELECT text FROM entries ORDER BY n').all().map(row => row.text);
    } finally {
        db.close();
    }
}

/** An `assert.rejects`/`throws` check: the error is a TenantStateError of class `cls` with `code`. */
function isA(cls, code) {
    const { TenantStateError } = require('..');
    return error => {
        assert.ok(error instanceof cls, `${error && error.name}: ${error && error.message}`);
        assert.ok(error instanceof TenantStateError);
        assert.equal(error.code, code);
        return true;
    };
}

const KEY = Buffer.from('0123456789abcdef0123456789abcdef');

/** Counts timer ticks until `promise` settles: a loop blocked by the wait would count none. */
async function ticksWhile(promise) {
    let ticks = 0;
    const timer = setInterval(() => { ticks += 1; }, 10);
    try {
        return { outcome: await promise.then(value => ({ value }), error => ({ error })), ticks };
    } finally {
        clearInterval(timer);
    }
}

/** A TCP listener on a free local port; `sockets` are the connections it accepted. */
async function listener(onConnection) {
    const sockets = [];
    const server = net.createServer(socket => {
        sockets.push(socket);
        socket.on('error', () => {});
        onConnection(socket);
    });
    await new Promise(resolve => server.listen(0, '127.0.0.1', resolve));
    const close = () => new Promise(resolve => {
        for (const socket of sockets) socket.destroy();
        server.close(resolve);
    });
    return { port: server.address().port, sockets, close };
}

module.exports = { tempDbPath, rejection, isA, holdWriteLock, KEY, LEDGER, appendLedger, ledgerOf, ticksWhile, listener };
