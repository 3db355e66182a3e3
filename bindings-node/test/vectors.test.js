'use strict';
/**
 * The shared vectors of tests/vectors/, played through the package as a host would call it.
 *
 * Their expected values come from tests/vectors/generate.py (Python's own HMAC and an
 * independent model of the lease rules), never from the core: a rule that this package alone
 * gets wrong, or that the core and every binding get wrong together, fails here. The vectors
 * spell an answer as JSON with snake_case names: a value, `{"error": CODE}` with CODE the
 * error's `code`, or `INVALID_ARGUMENT` for a plain RangeError.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const pkg = require('..');
const { tempDbPath } = require('./helpers');

const VECTORS = path.join(__dirname, '..', '..', 'tests', 'vectors');
const INVALID_ARGUMENT = 'INVALID_ARGUMENT';
const ID_INVALID = 'GOTRY_TENANT_ID_INVALID';

function load(name) {
    return JSON.parse(fs.readFileSync(path.join(VECTORS, name), 'utf8'));
}

const IDS = load('ids.json');
const SCENARIOS = load('store-scenarios.json');

/** A section of ids.json; an empty one would only run no test, so it is refused. */
function section(name) {
    const cases = IDS[name];
    assert.ok(Array.isArray(cases) && cases.length > 0, `no ${name} cases in ids.json`);
    return cases;
}

const VALIDATORS = {
    organization_ids: pkg.assertOrganizationId,
    ledger_tenant_ids: pkg.assertLedgerTenantId,
    prompt_cache_partitions: pkg.assertPromptCachePartition,
};
/** Every section this file plays; one added to the vectors and played by nobody fails below. */
const ID_SECTIONS = ['derive', 'derive_utf16', 'lease_keys', 'tenant_roots', ...Object.keys(VALIDATORS)];

function recordJson(record) {
    if (record === null) return null;
    return {
        key: record.key,
        owner: record.owner,
        epoch: record.epoch,
        lease_until_ms: record.leaseUntilMs,
        forgotten_at_epoch: record.forgottenAtEpoch,
    };
}

/** The error in the vectors' spelling; anything they cannot spell is thrown again. */
function errorJson(error) {
    if (error instanceof pkg.LeaseHeldError) return { error: error.code, record: recordJson(error.record) };
    if (error instanceof pkg.TenantStateError) return { error: error.code };
    // Exactly RangeError: a subclass, or a TypeError, is some other failure than a refused argument.
    if (error instanceof Error && Object.getPrototypeOf(error) === RangeError.prototype) return { error: INVALID_ARGUMENT };
    throw error;
}

function outcome(call) {
    try {
        return call();
    } catch (error) {
        return errorJson(error);
    }
}

async function asyncOutcome(call) {
    try {
        return await call();
    } catch (error) {
        return errorJson(error);
    }
}

/**
 * A claim as text, or built from its UTF-16 code units so that a lone surrogate reaches the
 * package as itself (JSON text cannot carry one portably).
 */
function claim(testCase, name) {
    if (name in testCase) return testCase[name];
    return String.fromCharCode(...testCase[`${name}_utf16`]);
}

function label(value) {
    return JSON.stringify(value.length <= 40 ? value : `${value.slice(0, 20)}...(${value.length} units)`);
}

test('every section of ids.json is played here', () => {
    assert.deepEqual(Object.keys(IDS).sort(), [...ID_SECTIONS].sort());
});

test('the UTF-16 claims really carry lone surrogates', () => {
    const built = section('derive_utf16').flatMap(c => [claim(c, 'issuer'), claim(c, 'subject')]);
    assert.ok(built.some(text => /[\uD800-\uDFFF]/.test(text) && !text.isWellFormed()));
});

for (const testCase of [...section('derive'), ...section('derive_utf16')]) {
    test(`derive: ${testCase.note}`, () => {
        const key = Buffer.from(testCase.key_hex, 'hex');
        const issuer = claim(testCase, 'issuer');
        const subject = claim(testCase, 'subject');
        const got = outcome(() => {
            const tenant = pkg.deriveLedgerTenantId(key, issuer, subject);
            return { ledger_tenant_id: tenant, prompt_cache_partition: pkg.derivePromptCachePartition(key, tenant) };
        });
        assert.deepEqual(got, testCase.expect);
    });
}

for (const [name, validate] of Object.entries(VALIDATORS)) {
    for (const testCase of section(name)) {
        test(`${name}: ${label(testCase.value)}`, () => {
            // The vectors say only valid or not; the reference refuses every malformed id with
            // InvalidTenantIdError, so that is the code a refusal carries.
            const expect = testCase.valid ? testCase.value : { error: ID_INVALID };
            assert.deepEqual(outcome(() => validate(testCase.value)), expect);
        });
    }
}

for (const testCase of section('lease_keys')) {
    test(`lease key: ${testCase.org} / ${testCase.tenant}`, () => {
        assert.deepEqual(outcome(() => pkg.leaseKeyFor(testCase.org, testCase.tenant)), testCase.expect);
    });
}

for (const testCase of section('tenant_roots')) {
    test(`tenant root: ${testCase.state_root} | ${testCase.org} | ${testCase.tenant}`, () => {
        const got = outcome(() => pkg.tenantRootFor(testCase.state_root, testCase.org, testCase.tenant));
        assert.deepEqual(got, testCase.expect);
    });
}

function grantJson(grant) {
    return { record: recordJson(grant.record), ttl_ms: grant.ttlMs };
}

/** One call step against the store, answered in the vectors' spelling. */
async function play(store, step) {
    switch (step.call) {
        case 'read':
            return { record: recordJson(await store.read(step.key)) };
        case 'acquire':
            return grantJson(await store.acquire(step.key, step.owner, step.ttl_ms));
        case 'renew':
            return grantJson(await store.renew(step.key, step.owner, step.epoch, step.ttl_ms));
        case 'release':
            return { record: recordJson(await store.release(step.key, step.owner, step.epoch)) };
        case 'mark_forgotten':
            return { record: recordJson(await store.markForgotten(step.key, step.owner, step.epoch)) };
        case 'history':
            return {
                history: store.history(step.key).map(e => ({ key: e.key, op: e.op, owner: e.owner, epoch: e.epoch, at_ms: e.atMs })),
            };
        default:
            throw new Error(`a store call this test does not know: ${JSON.stringify(step)}`);
    }
}

/**
 * The two kinds of store clock take different paths: a ManualClock is read natively inside
 * the transaction, a JS function on the JS thread when the call is made.
 */
const CLOCKS = {
    'ManualClock': start => {
        const clock = new pkg.ManualClock(start);
        return { nowMs: clock, advance: ms => clock.advance(ms) };
    },
    'nowMs function': start => {
        let now = start;
        return { nowMs: () => now, advance: ms => { now += ms; } };
    },
};

assert.ok(SCENARIOS.length > 0, 'no store scenarios in store-scenarios.json');
for (const scenario of SCENARIOS) {
    test(`store scenario: ${scenario.name}`, async t => {
        for (const [kind, makeClock] of Object.entries(CLOCKS)) {
            await t.test(kind, async () => {
                const clock = makeClock(scenario.start_ms);
                const store = new pkg.SqliteLeaseStore({ path: tempDbPath(), nowMs: clock.nowMs });
                let calls = 0;
                try {
                    for (const [index, step] of scenario.steps.entries()) {
                        if ('advance_ms' in step) {
                            clock.advance(step.advance_ms);
                            continue;
                        }
                        const got = await asyncOutcome(() => play(store, step));
                        assert.deepEqual(got, step.expect, `step ${index}: ${JSON.stringify(step)}`);
                        calls += 1;
                    }
                } finally {
                    store.close();
                }
                assert.ok(calls > 0, 'a scenario without a call proves nothing');
            });
        }
    });
}
