'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const path = require('node:path');

const ids = require('..');
const { KEY } = require('./helpers');

const TENANT = `t-${'0a'.repeat(16)}`;

/** The derivation in plain node:crypto, written from the specification, to compare against. */
function plainTenantId(key, issuer, subject) {
    const mac = crypto.createHmac('sha256', key).update(issuer, 'utf8').update(Buffer.from([0])).update(subject, 'utf8');
    return `t-${mac.digest('hex').slice(0, 32)}`;
}

function plainPartition(key, tenant) {
    const mac = crypto.createHmac('sha256', key).update('gotry/prompt-cache-partition/v1').update(Buffer.from([0])).update(tenant);
    return `pc-${mac.digest('hex').slice(0, 32)}`;
}

function isIdInvalid(error) {
    assert.ok(error instanceof ids.InvalidTenantIdError, `${error && error.name}: ${error && error.message}`);
    assert.equal(error.code, 'GOTRY_TENANT_ID_INVALID');
    return true;
}

test('organization ids: the reference regex, anchored at the true end', () => {
    for (const good of ['acme', 'a', '0', 'a-', 'a--b', 'a'.repeat(63)]) assert.equal(ids.assertOrganizationId(good), good);
    for (const bad of ['acme\n', 'Acme', 'a'.repeat(64), '-acme', '', 'ac me', 'acmé', 'a_b', '\nacme', 'acme\uD800']) {
        assert.throws(() => ids.assertOrganizationId(bad), isIdInvalid, JSON.stringify(bad));
    }
    for (const notString of [undefined, null, 7, {}, ['acme'], Buffer.from('acme')]) {
        assert.throws(() => ids.assertOrganizationId(notString), isIdInvalid);
    }
});

test('ledger tenant ids and prompt cache partitions', () => {
    assert.equal(ids.assertLedgerTenantId(TENANT), TENANT);
    for (const bad of [`${TENANT}\n`, TENANT.toUpperCase(), `t-${'0'.repeat(31)}`, `t-${'g'.repeat(32)}`, `x${TENANT}`, 42]) {
        assert.throws(() => ids.assertLedgerTenantId(bad), isIdInvalid);
    }
    const pc = `pc-${'f'.repeat(32)}`;
    assert.equal(ids.assertPromptCachePartition(pc), pc);
    for (const bad of [`${pc}\n`, TENANT, null]) assert.throws(() => ids.assertPromptCachePartition(bad), isIdInvalid);
});

test('derivations match an independent HMAC and the core vector', () => {
    const id = ids.deriveLedgerTenantId(KEY, 'https://idp.example', 'user-1');
    assert.equal(id, 't-20464cc2afc52b55ccbd6928130a63fd');
    assert.equal(ids.derivePromptCachePartition(KEY, id), 'pc-60e2110c6da3c630ee5bdcbb56ee01f3');
    for (let i = 0; i < 200; i += 1) {
        const key = crypto.randomBytes(32 + (i % 40));
        const issuer = `https://idp-${i}.example/${'é'.repeat(i % 7)}`;
        const subject = `user-${crypto.randomBytes(8).toString('hex')}-😀`;
        const tenant = ids.deriveLedgerTenantId(key, issuer, subject);
        assert.equal(tenant, plainTenantId(key, issuer, subject));
        assert.equal(ids.derivePromptCachePartition(key, tenant), plainPartition(key, tenant));
    }
});

test('claims: NUL, empty, non-string, 512 against 513 UTF-8 bytes, no normalization', () => {
    assert.throws(() => ids.deriveLedgerTenantId(KEY, 'i\u0000x', 's'), isIdInvalid);
    assert.throws(() => ids.deriveLedgerTenantId(KEY, 'i', 's\u0000'), isIdInvalid);
    assert.throws(() => ids.deriveLedgerTenantId(KEY, '', 's'), isIdInvalid);
    assert.throws(() => ids.deriveLedgerTenantId(KEY, 'i', ''), isIdInvalid);
    for (const notString of [undefined, null, 1, {}, Buffer.from('s'), ['s']]) {
        assert.throws(() => ids.deriveLedgerTenantId(KEY, notString, 's'), isIdInvalid);
        assert.throws(() => ids.deriveLedgerTenantId(KEY, 'i', notString), isIdInvalid);
    }
    assert.equal(ids.deriveLedgerTenantId(KEY, 'a'.repeat(512), 's'), plainTenantId(KEY, 'a'.repeat(512), 's'));
    assert.throws(() => ids.deriveLedgerTenantId(KEY, 'a'.repeat(513), 's'), isIdInvalid);
    assert.equal(ids.deriveLedgerTenantId(KEY, 'i', 'é'.repeat(256)), plainTenantId(KEY, 'i', 'é'.repeat(256)));
    assert.throws(() => ids.deriveLedgerTenantId(KEY, 'i', `${'é'.repeat(256)}a`), isIdInvalid);
    assert.notEqual(ids.deriveLedgerTenantId(KEY, 'i', '\u00e9'), ids.deriveLedgerTenantId(KEY, 'i', 'e\u0301'));
});

test('a lone surrogate in a claim is refused, never turned into U+FFFD', () => {
    for (const lone of ['a\uD800', '\uDC00a', 'x\uDBFFy', '\uD83D']) {
        assert.throws(() => ids.deriveLedgerTenantId(KEY, lone, 's'), isIdInvalid);
        assert.throws(() => ids.deriveLedgerTenantId(KEY, 'i', lone), isIdInvalid);
    }
    // The replacement character itself is an ordinary claim, and a surrogate pair is fine.
    assert.equal(ids.deriveLedgerTenantId(KEY, 'i', 'a\uFFFD'), plainTenantId(KEY, 'i', 'a\uFFFD'));
    assert.equal(ids.deriveLedgerTenantId(KEY, 'i', 'a\uD83D\uDE00'), plainTenantId(KEY, 'i', 'a😀'));
});

test('the organization key: any Uint8Array of at least 32 bytes, views honoured, nothing else', () => {
    const expected = plainTenantId(KEY, 'i', 's');
    assert.equal(ids.deriveLedgerTenantId(new Uint8Array(KEY), 'i', 's'), expected);
    // A view at an offset into a larger buffer must use exactly its own bytes.
    const big = Buffer.concat([Buffer.from('garbage-before'), KEY, Buffer.from('garbage-after')]);
    const view = big.subarray(14, 14 + 32);
    assert.equal(ids.deriveLedgerTenantId(view, 'i', 's'), expected);
    const typedView = new Uint8Array(big.buffer, big.byteOffset + 14, 32);
    assert.equal(ids.deriveLedgerTenantId(typedView, 'i', 's'), expected);
    assert.equal(ids.derivePromptCachePartition(view, TENANT), plainPartition(KEY, TENANT));
    assert.throws(() => ids.deriveLedgerTenantId(KEY.subarray(0, 31), 'i', 's'), isIdInvalid);
    assert.throws(() => ids.deriveLedgerTenantId(new Uint8Array(0), 'i', 's'), isIdInvalid);
    const notKeys = [
        KEY.toString('latin1'), Array.from(KEY), KEY.buffer.slice(KEY.byteOffset, KEY.byteOffset + 32),
        new DataView(new ArrayBuffer(32)), new Uint8ClampedArray(32), new Int8Array(32), new Uint16Array(16),
        undefined, null, 32,
    ];
    for (const notKey of notKeys) {
        assert.throws(() => ids.deriveLedgerTenantId(notKey, 'i', 's'), isIdInvalid);
        assert.throws(() => ids.derivePromptCachePartition(notKey, TENANT), isIdInvalid);
    }
    assert.throws(() => ids.derivePromptCachePartition(KEY, 't-nope'), isIdInvalid);
});

test('lease keys and tenant roots resolve exactly as path.resolve does', () => {
    assert.equal(ids.leaseKeyFor('acme', TENANT), `acme/${TENANT}`);
    assert.throws(() => ids.leaseKeyFor('acme', 't-x'), isIdInvalid);
    assert.throws(() => ids.leaseKeyFor(7, TENANT), isIdInvalid);
    for (const root of ['a/./b/../c', '//x//y/', '', 'rel', '/..', '/srv/state/../state2/.', '/tmp/😀/x']) {
        const expected = path.join(path.resolve(root), 'orgs', 'acme', 'tenants', TENANT);
        assert.equal(ids.tenantRootFor(root, 'acme', TENANT), expected, JSON.stringify(root));
    }
    assert.throws(() => ids.tenantRootFor('/s', '../etc', TENANT), isIdInvalid);
    assert.throws(() => ids.tenantRootFor('/s', 'acme', 't-../../x'), isIdInvalid);
    assert.throws(() => ids.tenantRootFor(undefined, 'acme', TENANT), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
    assert.throws(() => ids.tenantRootFor('/s\uD800', 'acme', TENANT), RangeError);
});

test('every path argument refuses a NUL, where the system would cut the path', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const cut = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gotry-nul-')), 'a');
    const isNul = error => error instanceof RangeError && /must not contain a NUL byte/.test(error.message);
    assert.throws(() => ids.tenantRootFor(`${cut}\0b`, 'acme', TENANT), isNul);
    assert.throws(() => new ids.SqliteLeaseStore({ path: `${cut}\0b.db` }), isNul);
    await assert.rejects(ids.openLeaseStore(`sqlite://${cut}\0b.db`), isNul);
    assert.throws(() => new ids.DirectoryDurableStore({ path: `${cut}\0b` }), isNul);
    await assert.rejects(async () => ids.openDurableStore(`file://${cut}\0b`), isNul);
    assert.equal(fs.existsSync(cut), false, 'the path cut at its NUL was created');
});
