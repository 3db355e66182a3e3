'use strict';
/**
 * The shared router scenarios of tests/vectors/router-scenarios.json, replayed through the
 * addon as every door replays them (the file's comment says what world they assume). A
 * call held in flight (`begin`/`end`) is a `router.run` whose function waits on a promise
 * the scenario settles; a handoff (or a close) begun in the background is an unawaited
 * promise, and the step resolves once the router's `draining` event for the tenant came.
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const pkg = require('..');
const { tempDbPath } = require('./helpers');

const { TenantRouter, SqliteLeaseStore, DirectoryDurableStore, ManualClock } = pkg;

const DOC = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'vectors', 'router-scenarios.json'), 'utf8'));

/** `ok(value)` as it resolved, or `{ error: code }` as it rejected with a registry error. */
async function outcome(promise, ok) {
    try {
        return ok(await promise);
    } catch (error) {
        if (typeof error?.code !== 'string' || !error.code.startsWith('GOTRY_TENANT_')) throw error;
        return { error: error.code };
    }
}

function appendLine(handle, line) {
    fs.mkdirSync(handle.root, { recursive: true });
    fs.appendFileSync(path.join(handle.root, 'lines.txt'), `${line}\n`);
}

/**
 * The `draining` events one router told, by key: a step that begins a drain in the
 * background resolves once its drain was told, so the next step may assume it has begun.
 */
class Drains {
    #told = new Map();
    #waiting = [];

    /** The router's onEvent. */
    tell(event) {
        if (event.kind !== 'draining') return;
        this.#told.set(event.key, this.told(event.key) + 1);
        this.#waiting = this.#waiting.filter(waiter => !waiter.settle());
    }

    told(key) {
        return this.#told.get(key) ?? 0;
    }

    /**
     * Resolves once a drain of `key` is told beyond the `before` told already; rejects after
     * 30 s, a bound on a replay that would otherwise hang, not a time limit on the router.
     */
    untilTold(key, before) {
        return new Promise((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`no draining event told for ${key} within 30 s`)), 30_000);
            const waiter = {
                settle: () => {
                    if (this.told(key) <= before) return false;
                    clearTimeout(timer);
                    resolve();
                    return true;
                },
            };
            if (!waiter.settle()) this.#waiting.push(waiter);
        });
    }
}

/** A close report in the vectors' spelling; no tenant may fail in these scenarios. */
function closeReport(report) {
    assert.deepEqual(report.failed, []);
    return { handed_off: report.handedOff, timed_out: report.timedOut };
}

class Site {
    constructor() {
        this.dir = path.dirname(tempDbPath('unused'));
        this.clock = new ManualClock(DOC.start_ms);
        this.leaseStore = new SqliteLeaseStore({ path: path.join(this.dir, 'leases.db'), nowMs: this.clock });
        this.durableStore = new DirectoryDurableStore({ path: path.join(this.dir, 'durable') });
        this.routers = new Map();
        this.drains = new Map();
        this.calls = new Map();
        this.handoffs = new Map();
        this.closes = new Map();
    }

    key(step) {
        return pkg.leaseKeyFor(DOC.organization, step.tenant);
    }

    router(step) {
        return this.routers.get(step.replica);
    }

    /** Runs one step; resolves to what it answered, or undefined for a step that expects nothing. */
    async step(step) {
        switch (step.do) {
        case 'start': {
            const drains = new Drains();
            this.drains.set(step.replica, drains);
            this.routers.set(step.replica, await TenantRouter.start({
                leaseStore: this.leaseStore,
                durableStore: this.durableStore,
                stateRoot: path.join(this.dir, step.replica),
                replicaId: step.replica,
                ttlMs: DOC.ttl_ms,
                marginMs: DOC.margin_ms,
                capacity: step.capacity,
                copyPolicy: { intervalMs: DOC.copy_interval_ms, durability: step.durability },
                clock: this.clock,
                onEvent: event => drains.tell(event),
            }));
            return undefined;
        }
        case 'open':
            return outcome(this.router(step).open(DOC.organization, step.tenant), handle => ({ epoch: handle.epoch }));
        case 'run':
            return outcome(this.router(step).run(this.key(step), handle => appendLine(handle, step.line)), () => ({ ok: true }));
        case 'begin': {
            let entered;
            const running = new Promise(resolve => { entered = resolve; });
            let release;
            const released = new Promise(resolve => { release = resolve; });
            const answer = outcome(this.router(step).run(this.key(step), async handle => {
                appendLine(handle, step.call);
                entered();
                await released;
            }), () => ({ ok: true }));
            this.calls.set(step.call, { answer, release });
            // Begun once the function runs; a refusal settles the call before it could.
            return Promise.race([running.then(() => ({ ok: true })), answer]);
        }
        case 'end': {
            const call = this.calls.get(step.call);
            this.calls.delete(step.call);
            call.release();
            return call.answer;
        }
        case 'handoff':
            return outcome(this.router(step).handoff(this.key(step), { timeoutMs: step.timeout_ms }), () => ({ ok: true }));
        case 'handoff_start': {
            const router = this.router(step);
            const key = this.key(step);
            const drains = this.drains.get(step.replica);
            const before = drains.told(key);
            this.handoffs.set(step.handoff, outcome(router.handoff(key, { timeoutMs: step.timeout_ms }), () => ({ ok: true })));
            await drains.untilTold(key, before);
            return undefined;
        }
        case 'handoff_wait': {
            const answer = this.handoffs.get(step.handoff);
            this.handoffs.delete(step.handoff);
            return answer;
        }
        case 'close':
            return closeReport(await this.router(step).close({ timeoutMs: step.timeout_ms }));
        case 'close_start': {
            const key = this.key(step);
            const drains = this.drains.get(step.replica);
            const before = drains.told(key);
            this.closes.set(step.close, this.router(step).close({ timeoutMs: step.timeout_ms }));
            await drains.untilTold(key, before);
            return undefined;
        }
        case 'close_wait': {
            const report = this.closes.get(step.close);
            this.closes.delete(step.close);
            return closeReport(await report);
        }
        case 'status':
            return this.router(step).status().map(t => ({
                tenant: t.key.split('/')[1],
                state: t.state,
                epoch: t.epoch,
                in_flight: t.inFlight,
                writes_since_copy: t.writesSinceCopy,
            }));
        case 'lines': {
            const file = path.join(pkg.tenantRootFor(path.join(this.dir, step.replica), DOC.organization, step.tenant), 'lines.txt');
            return fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(line => line !== '') : [];
        }
        case 'advance':
            this.clock.advance(step.ms);
            return undefined;
        default:
            throw new Error(`a step this replayer does not know: ${step.do}`);
        }
    }

    async close() {
        // A scenario that failed mid-way may still hold calls: released, their runs end, and
        // nothing of the router keeps the process alive after the failure is reported.
        for (const call of this.calls.values()) call.release();
        for (const router of this.routers.values()) await router.close({ timeoutMs: 10_000 });
        this.leaseStore.close();
    }
}

const replayed = new Set();

for (const scenario of DOC.scenarios) {
    test(`router scenario: ${scenario.name}`, async () => {
        const site = new Site();
        try {
            for (const [n, step] of scenario.steps.entries()) {
                const answer = await site.step(step);
                if (answer !== undefined) assert.deepEqual(answer, step.expect, `step ${n}: ${JSON.stringify(step)}`);
            }
        } finally {
            await site.close();
        }
        replayed.add(scenario.name);
    });
}

test('every router scenario was replayed, each under its own name', () => {
    const names = DOC.scenarios.map(s => s.name);
    assert.ok(names.length >= 10, `the scenarios file lost scenarios: ${names.length}`);
    assert.equal(new Set(names).size, names.length, 'two scenarios share a name');
    assert.deepEqual([...replayed].sort(), [...names].sort());
});
