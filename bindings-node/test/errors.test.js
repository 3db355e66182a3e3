'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');

const pkg = require('..');
const native = require('../lib/native');
const { FROM_NATIVE, translate } = require('../lib/translate');
const { tempDbPath, rejection, KEY } = require('./helpers');

// Each class's name and code, how a host constructs one, and the values its message is made
// of, by the core's field names.
const CLASSES = [
    ['LeaseHeldError', 'GOTRY_TENANT_LEASE_HELD', () => new pkg.LeaseHeldError({ key: 'k', owner: 'o', epoch: 3 }), { record: { key: 'k', owner: 'o', epoch: 3 } }],
    ['LeaseLostError', 'GOTRY_TENANT_LEASE_LOST', () => new pkg.LeaseLostError('m'), { message: 'm' }],
    ['FencedError', 'GOTRY_TENANT_FENCED', () => new pkg.FencedError('lease_lost', 'k', 2), { reason: 'lease_lost', key: 'k', epoch: 2 }],
    ['LeaseStoreUnavailableError', 'GOTRY_TENANT_LEASE_STORE_UNAVAILABLE', () => new pkg.LeaseStoreUnavailableError('m'), { message: 'm' }],
    ['InvalidTenantIdError', 'GOTRY_TENANT_ID_INVALID', () => new pkg.InvalidTenantIdError('m'), { message: 'm' }],
    ['DurableStoreUnavailableError', 'GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE', () => new pkg.DurableStoreUnavailableError('m'), { message: 'm' }],
    ['RestoreVerificationError', 'GOTRY_TENANT_RESTORE_INVALID', () => new pkg.RestoreVerificationError('m'), { message: 'm' }],
    ['CopyConflictError', 'GOTRY_TENANT_COPY_CONFLICT', () => new pkg.CopyConflictError('m'), { message: 'm' }],
    ['TenantDrainingError', 'GOTRY_TENANT_DRAINING', () => new pkg.TenantDrainingError('k'), { key: 'k' }],
    ['DrainTimeoutError', 'GOTRY_TENANT_DRAIN_TIMEOUT', () => new pkg.DrainTimeoutError('k', 2, 500), { key: 'k', in_flight: 2, timeout_ms: 500 }],
    ['RouterClosedError', 'GOTRY_TENANT_ROUTER_CLOSED', () => new pkg.RouterClosedError(), {}],
    ['ReplicaAtCapacityError', 'GOTRY_TENANT_REPLICA_AT_CAPACITY', () => new pkg.ReplicaAtCapacityError(8), { limit: 8 }],
    ['TenantBusyError', 'GOTRY_TENANT_BUSY', () => new pkg.TenantBusyError('k', 2, 100), { key: 'k', running: 2, waited_ms: 100 }],
    ['OpenInProcessError', 'GOTRY_TENANT_OPEN_IN_PROCESS', () => new pkg.OpenInProcessError('m'), { message: 'm' }],
    ['CallInDoubtError', 'GOTRY_TENANT_CALL_IN_DOUBT', () => new pkg.CallInDoubtError('k', 2, { cause: new pkg.RouterClosedError() }), { key: 'k', epoch: 2 }],
];

test('the exported codes are exactly the core ErrorCode::ALL list, in its order', () => {
    const core = native.errorCodes();
    assert.equal(core.length, 15);
    assert.deepEqual([...pkg.ERROR_CODES], core);
    assert.deepEqual(Object.keys(FROM_NATIVE), core);
    assert.deepEqual(CLASSES.map(([, code]) => code), core);
});

test('a class a host constructs says what the core template of its code says', () => {
    const types = native.errorTypes();
    assert.deepEqual(types.map(type => type.code), native.errorCodes());
    assert.deepEqual(types.map(type => [type.className, type.code]), CLASSES.map(([name, code]) => [name, code]));
    for (const [[name, , make, values], type] of CLASSES.map((row, i) => [row, types[i]])) {
        for (const field of Object.keys(values)) assert.ok(type.fields.includes(field), `${name}: ${field}`);
        // Filled here by hand, so a class that worded its message itself would differ.
        const expected = type.template.replace(/\{([a-z_.]+)\}/g, (_, path) => {
            const [field, ...parts] = path.split('.');
            assert.ok(type.fields.includes(field), `${name}: {${path}} is not a field`);
            return String(parts.reduce((value, part) => value[part], values[field]));
        });
        assert.doesNotMatch(expected, /[{}]/, name);
        assert.equal(make().message, expected, name);
    }
    // The templates are the texts the reference's classes have: one of them, spelled out.
    assert.equal(new pkg.DrainTimeoutError('acme/t', 2, 500).message, 'tenant acme/t still had 2 call(s) running after 500 ms of draining');
    // A class that passes its message through, built with none, says what the reference's
    // (and `new Error()`) says: nothing.
    for (const name of ['LeaseLostError', 'InvalidTenantIdError', 'CopyConflictError', 'LeaseStoreUnavailableError']) {
        assert.equal(new pkg[name]().message, new Error().message, name);
    }
});

test('every class has the reference name, code, fields and base classes', () => {
    for (const [name, code, make] of CLASSES) {
        const error = make();
        assert.equal(error.name, name);
        assert.equal(error.code, code);
        assert.ok(error instanceof pkg[name]);
        assert.ok(error instanceof pkg.TenantStateError);
        assert.ok(error instanceof Error);
        assert.equal(typeof error.message, 'string');
    }
    assert.deepEqual(new pkg.LeaseHeldError({ key: 'k', owner: 'o', epoch: 3 }).record, { key: 'k', owner: 'o', epoch: 3 });
    assert.equal(new pkg.FencedError('lease_lost', 'k', 2).reason, 'lease_lost');
    assert.deepEqual(new pkg.RestoreVerificationError('m').skipped, []);
    const skipped = [{ epoch: 1, seq: 2, reason: 'checksum' }];
    assert.deepEqual(new pkg.RestoreVerificationError('m', skipped).skipped, skipped);
    const drain = new pkg.DrainTimeoutError('k', 2, 500);
    assert.equal(drain.inFlight, 2);
    assert.equal(drain.timeoutMs, 500);
    assert.equal(new pkg.ReplicaAtCapacityError(8).limit, 8);
    assert.equal(new pkg.TenantStateError('X', 'm', { cause: 1 }).cause, 1);
});

test('every native code is rebuilt as its class with its fields', () => {
    const fields = {
        record: { key: 'k', owner: 'o', epoch: 1, leaseUntilMs: 5, forgottenAtEpoch: 0 },
        reason: 'lease_released', key: 'k', epoch: 4, skipped: [{ epoch: 1, seq: 1, reason: 'fold' }], inFlight: 3, timeoutMs: 9, limit: 7,
        backendCode: 'EROFS',
    };
    for (const [name, code] of CLASSES) {
        const raw = Object.assign(new Error('native message'), { code }, fields);
        const error = translate(raw);
        assert.ok(error instanceof pkg[name], name);
        assert.equal(error.code, code);
        // The core wrote the message; no class words it again from the fields. OPEN_IN_PROCESS
        // alone adds, after the core's words, the way out a Node host has.
        if (code === 'GOTRY_TENANT_OPEN_IN_PROCESS') {
            assert.match(error.message, /^native message\. In Node\.js: .*betterSqlite3Snapshot\(Database\)/, name);
        } else {
            assert.equal(error.message, 'native message', name);
        }
        assert.equal(error.stack.split('\n')[0], `${name}: ${error.message}`);
    }
    assert.deepEqual(translate(Object.assign(new Error('m'), { code: 'GOTRY_TENANT_LEASE_HELD', record: fields.record })).record, fields.record);
    assert.equal(translate(Object.assign(new Error('m'), { code: 'GOTRY_TENANT_FENCED', reason: 'lease_lost' })).reason, 'lease_lost');
    assert.deepEqual(translate(Object.assign(new Error('m'), { code: 'GOTRY_TENANT_RESTORE_INVALID', skipped: fields.skipped })).skipped, fields.skipped);
    // The backend's code travels as the cause's code, as Node's fs errors carry theirs.
    const unavailable = translate(Object.assign(new Error('m'), { code: 'GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE', backendCode: 'EROFS' }));
    assert.ok(unavailable.cause instanceof Error);
    assert.equal(unavailable.cause.code, 'EROFS');
    assert.equal(unavailable.message, 'm');
    assert.equal(translate(Object.assign(new Error('m'), { code: 'GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE' })).cause, undefined);
    // Anything else passes through untouched, including a TenantStateError a host callback threw.
    const range = new RangeError('r');
    assert.equal(translate(range), range);
    const own = new pkg.LeaseLostError('host');
    assert.equal(translate(own), own);
    assert.equal(translate('plain'), 'plain');
    const sqlite = Object.assign(new Error('x'), { code: 'SQLITE_NOTADB' });
    assert.equal(translate(sqlite), sqlite);
    assert.equal(sqlite.message, 'x');
    // OPEN_IN_PROCESS is told what to do in Node, once.
    const native = Object.assign(new Error('/r/ledger.db is open'), { code: 'GOTRY_TENANT_OPEN_IN_PROCESS' });
    const open = translate(native);
    assert.ok(open instanceof pkg.OpenInProcessError);
    assert.equal(translate(open), open);
    assert.match(open.message, /^\/r\/ledger\.db is open\. In Node\.js: .*betterSqlite3Snapshot\(Database\)/);
    assert.equal(open.message.split('In Node.js').length, 2);
    // An in-doubt call's cause is translated as well.
    const doubt = translate(Object.assign(new Error('in doubt'), {
        code: 'GOTRY_TENANT_CALL_IN_DOUBT', key: 'k', epoch: 3,
        cause: Object.assign(new Error('fenced'), { code: 'GOTRY_TENANT_FENCED', reason: 'lease_lost', key: 'k', epoch: 3 }),
    }));
    assert.ok(doubt instanceof pkg.CallInDoubtError && doubt.cause instanceof pkg.FencedError);
    assert.deepEqual([doubt.key, doubt.epoch, doubt.cause.reason], ['k', 3, 'lease_lost']);
});

test('errors thrown or rejected by the native side are instances of the package classes', async () => {
    assert.throws(() => pkg.assertOrganizationId('Acme'), error => {
        assert.ok(error instanceof pkg.InvalidTenantIdError);
        assert.ok(error instanceof pkg.TenantStateError);
        assert.equal(error.name, 'InvalidTenantIdError');
        assert.equal(error.code, 'GOTRY_TENANT_ID_INVALID');
        return true;
    });
    const store = new pkg.SqliteLeaseStore({ path: tempDbPath() });
    await store.acquire('k', 'a', 1000);
    const held = await rejection(store.acquire('k', 'b', 1000));
    assert.ok(held instanceof pkg.LeaseHeldError);
    assert.equal(held.name, 'LeaseHeldError');
    assert.equal(held.record.owner, 'a');
    // A credential in a field reaches the host as data, never in the message: the core masks it.
    await store.acquire('c', 'mysql://admin:hunter2@db.internal/leases', 1000);
    const masked = await rejection(store.acquire('c', 'b', 1000));
    assert.equal(masked.record.owner, 'mysql://admin:hunter2@db.internal/leases');
    assert.doesNotMatch(masked.message, /hunter2/);
    assert.match(masked.message, /^lease c is held by /);
    const lost = await rejection(store.renew('k', 'b', 1, 1000));
    assert.ok(lost instanceof pkg.LeaseLostError);
    const range = await rejection(store.acquire('k', 'b', 1000.5));
    assert.ok(range instanceof RangeError);
    // The reference's RangeErrors carry no code, and neither do ours.
    assert.equal(Object.hasOwn(range, 'code'), false);
    assert.equal(range.code, undefined);
    assert.throws(() => pkg.deriveLedgerTenantId(KEY.subarray(0, 31), 'i', 's'), pkg.InvalidTenantIdError);
    store.close();
});

/**
 * What the reference throws for an argument out of range (seen by running it): exactly
 * `new RangeError(message)`, own properties `stack` and `message` only, no `code` at all.
 */
function isReferenceRangeError(error) {
    assert.ok(error instanceof RangeError, String(error));
    assert.equal(Object.getPrototypeOf(error), RangeError.prototype);
    assert.equal(error.name, 'RangeError');
    assert.equal('code' in error, false, `${error.message}: code ${error.code}`);
    assert.deepEqual(Object.getOwnPropertyNames(error).sort(), ['message', 'stack']);
    assert.match(String(error), /^RangeError: /);
    return true;
}

test('an out-of-range TTL, margin, epoch or text length is a plain RangeError with no code, as in the reference', async () => {
    // Synchronous, as the reference's assertLeaseTtl.
    for (const bad of [99, 600_001, 1000.5]) assert.throws(() => pkg.assertLeaseTtl(bad), isReferenceRangeError);
    const store = new pkg.SqliteLeaseStore({ path: tempDbPath() });
    await store.acquire('k', 'o', 1_000);
    const refused = [
        () => store.acquire('k2', 'o', 50), // ttl
        () => store.renew('k', 'o', 1, 600_001), // ttl
        () => store.renew('k', 'o', 0, 1_000), // epoch
        () => store.release('k', 'o', 1.5), // epoch
        () => store.markForgotten('k', 'o', -1), // epoch
        () => store.acquire('', 'o', 1_000), // text length
        () => store.acquire('x'.repeat(201), 'o', 1_000), // text length
        () => store.acquire('k3', 'o'.repeat(201), 1_000), // text length
        () => store.read(''), // text length
        () => pkg.TenantLease.acquire({ store, key: 'm', replicaId: 'r', ttlMs: 1_000, marginMs: 1_000 }), // margin
        () => pkg.TenantLease.acquire({ store, key: 'm', replicaId: 'r', ttlMs: 1_000, marginMs: -1 }), // margin
        () => pkg.TenantLease.acquire({ store, key: 'm', replicaId: 'r', ttlMs: 99, marginMs: 10 }), // ttl
    ];
    // Each a rejection, as the reference's async methods give, never a synchronous throw.
    for (const call of refused) isReferenceRangeError(await rejection(call()));
    const [answer] = await store.renewBatch('o', 1_000, [['k', 0]]);
    assert.equal(answer.ok, false);
    isReferenceRangeError(answer.error);
    store.close();
});

test('a synchronous call translated by guard keeps the caller in its stack', () => {
    function callerOfTheCheck() {
        return pkg.assertOrganizationId('Not An Id');
    }
    const error = (() => {
        try {
            callerOfTheCheck();
        } catch (thrown) {
            return thrown;
        }
        return assert.fail('assertOrganizationId accepted "Not An Id"');
    })();
    assert.ok(error instanceof pkg.InvalidTenantIdError, error.name);
    assert.match(error.stack, /callerOfTheCheck/);
    assert.match(error.stack, /errors\.test\.js/);
});
