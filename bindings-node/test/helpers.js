'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

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

const KEY = Buffer.from('0123456789abcdef0123456789abcdef');

module.exports = { tempDbPath, rejection, KEY };
