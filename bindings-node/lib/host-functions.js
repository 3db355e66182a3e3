'use strict';
/**
 * The host's own functions that the core calls while it copies or restores a tenant root
 * (`verify` and `snapshot`, of EpochCopies and of the TenantRouter), and the snapshot
 * function for hosts that keep their ledgers open with better-sqlite3.
 *
 * The addon calls a host function from one of its threads, through a threadsafe function,
 * and waits for the promise it returns. So each one is wrapped here into a function that
 * always returns a promise: a throw (a synchronous one too) rejects it, and the copy or
 * restore then rejects with the thrown value itself.
 */
const fs = require('node:fs');

/** Calls `fn` in a promise reaction, so that a synchronous throw becomes a rejection. */
function hostCall(fn, settled) {
    return (...args) => Promise.resolve(args).then(received => fn(...received)).then(settled);
}

/**
 * A host's `verify(dir)` as the addon calls it: a promise of a boolean, so that a verdict
 * that is not a boolean fails the restore rather than being taken as true or false.
 */
function checkOf(verify) {
    if (verify === undefined || verify === null) return null;
    if (typeof verify !== 'function') throw new TypeError('verify must be a function (dir) => boolean | Promise<boolean>');
    return hostCall(verify, verdict => {
        if (typeof verdict !== 'boolean') {
            throw new TypeError(`verify must return a boolean or a promise of one, got ${verdict === null ? 'null' : typeof verdict}`);
        }
        return verdict;
    });
}

/** A host's `snapshot(source, image)` as the addon calls it: a promise of nothing. */
function snapshotOf(snapshot) {
    if (snapshot === undefined || snapshot === null) return null;
    if (typeof snapshot !== 'function') {
        throw new TypeError('snapshot must be a function (source, image) => void | Promise<void>');
    }
    return hostCall(snapshot, () => undefined);
}

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** Whether `file` starts with SQLite's header (an empty or shorter file does not). */
async function isSqliteFile(file) {
    const handle = await fs.promises.open(file, 'r');
    try {
        const header = Buffer.alloc(SQLITE_HEADER.length);
        const { bytesRead } = await handle.read(header, 0, header.length, 0);
        return bytesRead === header.length && header.equals(SQLITE_HEADER);
    } finally {
        await handle.close();
    }
}

/**
 * The `snapshot` function for a host whose ledgers are open in better-sqlite3: give it the
 * host's own `Database` class (`betterSqlite3Snapshot(require('better-sqlite3'))`).
 *
 * Why the host's own class: the core refuses to read a file that this process has open
 * because its own SQLite (a second copy of the library, inside this addon), closing its
 * connection, would drop the POSIX locks of the host's connection (they belong to the
 * process, not to a descriptor) and, finding no other connection it knows of, would
 * checkpoint and delete the WAL the host still writes to. A SQLite library only knows about
 * its own connections. A better-sqlite3 loaded from another path (another node_modules, a
 * bundled copy) is another SQLite library in the same process, with the same defect: only
 * the class that opened the ledger can open it a second time safely.
 *
 * For a SQLite file it opens `source` read-only with that class, takes the database page for
 * page with `db.serialize()` (SQLite's `sqlite3_serialize`: every page read in one read
 * transaction, so the image is one committed state whatever the host writes meanwhile, rows
 * still only in the WAL included), writes it to `image` and closes. Page for page matters:
 * a copy stores only the 4 KiB blocks that differ from the lineage's last copy, and an image
 * laid out anew (`VACUUM INTO` rebuilds every table) differs almost everywhere, so each copy
 * would store most of the ledger again. Chosen over `db.backup()` because a step-wise backup
 * from a second connection starts over each time the host writes between two steps (and,
 * under a steady write load, may never end). Its cost: it runs on the event loop while the
 * pages are read (the host's own connection is synchronous too), and the image is held in
 * memory once, as the copy holds it anyway.
 *
 * A file the host holds open that is not a SQLite database (a log kept open with `fs.open`)
 * is copied as it is, as the core copies files nobody holds.
 */
function betterSqlite3Snapshot(Database) {
    if (typeof Database !== 'function') {
        throw new TypeError("betterSqlite3Snapshot needs the host's better-sqlite3 Database class (require('better-sqlite3'))");
    }
    return async function snapshot(source, image) {
        if (!(await isSqliteFile(source))) {
            await fs.promises.copyFile(source, image, fs.constants.COPYFILE_EXCL);
            return;
        }
        const db = new Database(source, { readonly: true, fileMustExist: true });
        let pages;
        try {
            pages = db.serialize();
        } finally {
            db.close();
        }
        await fs.promises.writeFile(image, pages, { flag: 'wx' });
    };
}

module.exports = {
    betterSqlite3Snapshot,
    // Internal to this package (not re-exported by index.js).
    checkOf,
    snapshotOf,
};
