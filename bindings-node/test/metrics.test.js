'use strict';
// The core's metrics through the Node door: lease operations on a real SQLite store, read
// back from metrics() and from a prom-client registry that serves ours beside its own. The
// counters are the process's, so each test compares readings taken before and after.
const test = require('node:test');
const assert = require('node:assert/strict');
const client = require('prom-client');

const { SqliteLeaseStore, metrics, METRICS_CONTENT_TYPE, registerPromClient } = require('..');
const { tempDbPath, rejection } = require('./helpers');

/** The value of the sample written exactly as `series` (name and labels), 0 when absent. */
function value(text, series) {
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const ACQUIRED = 'gotry_tenant_lease_operations_total{store="sqlite",op="acquire",outcome="granted"}';
const HELD = 'gotry_tenant_lease_operations_total{store="sqlite",op="acquire",outcome="held"}';
const TIMED = 'gotry_tenant_store_operation_duration_seconds_count{store="sqlite",op="acquire"}';

async function grantAndRefuse(key) {
    const store = new SqliteLeaseStore({ path: tempDbPath() });
    await store.acquire(key, 'a', 5_000);
    await rejection(store.acquire(key, 'b', 5_000));
    store.close();
}

test('metrics() resolves to the text, which counts a granted and a held acquire', async () => {
    const before = await metrics();
    await grantAndRefuse('metrics/text');
    const after = await metrics();
    assert.deepEqual(
        [ACQUIRED, HELD, TIMED].map((s) => value(after, s) - value(before, s)),
        [1, 1, 2],
    );
    assert.match(after, /^# HELP gotry_tenant_lease_operations_total /);
    assert.equal(METRICS_CONTENT_TYPE, 'text/plain; version=0.0.4; charset=utf-8');
    assert.equal(METRICS_CONTENT_TYPE, client.Registry.PROMETHEUS_CONTENT_TYPE);
});

test("a prom-client registry serves ours beside the host's own metrics", async () => {
    const registry = new client.Registry();
    const hostCounter = new client.Counter({ name: 'host_requests_total', help: 'The host\'s own.', registers: [registry] });
    hostCounter.inc(3);
    const names = registerPromClient(registry);
    assert.ok(names.includes('gotry_tenant_leases_lost_total'), names.join());
    assert.ok(names.includes('gotry_tenant_store_operation_duration_seconds'), names.join());

    const before = await registry.metrics();
    await grantAndRefuse('metrics/prom-client');
    const after = await registry.metrics();
    assert.equal(value(after, 'host_requests_total'), 3);
    assert.deepEqual(
        [ACQUIRED, HELD, TIMED].map((s) => value(after, s) - value(before, s)),
        [1, 1, 2],
    );
    // The registry's text is ours, family for family: the same lines in the same order.
    const ours = (await metrics()).split('\n').filter((l) => l.startsWith('# ') && l.includes(' gotry_'));
    const served = after.split('\n').filter((l) => l.startsWith('# ') && l.includes(' gotry_'));
    assert.deepEqual(served, ours);
    const sample = 'gotry_tenant_keeper_batch_size_bucket{le="+Inf"}';
    assert.ok(after.includes(`\n${sample} `), after);
    // Its JSON form carries the families with their samples too.
    const json = await registry.getMetricsAsJSON();
    const lost = json.find((m) => m.name === 'gotry_tenant_leases_lost_total');
    assert.equal(lost.type, 'counter');
    assert.equal(lost.values.length, 1);
    // A name is registered once: a second bridge into the same registry is refused.
    assert.throws(() => registerPromClient(registry), /already been registered/);
    assert.throws(() => registerPromClient({}), TypeError);
});

test('in OpenMetrics mode prom-client writes our counters with one _total', async () => {
    const registry = new client.Registry(client.Registry.OPENMETRICS_CONTENT_TYPE);
    registerPromClient(registry);
    await grantAndRefuse('metrics/openmetrics');
    const text = await registry.metrics();
    assert.match(text, /^# TYPE gotry_tenant_lease_operations counter$/m);
    assert.ok(value(text, ACQUIRED) >= 1, text);
    assert.doesNotMatch(text, /_total_total/);
    assert.match(text, /# EOF\n$/);
});

// ---- per-tenant series: TenantRouter.start({ tenantMetrics: true }) ----

const fs = require('node:fs');
const path = require('node:path');
const { TenantRouter, DirectoryDurableStore, ManualClock, leaseKeyFor } = require('..');

const ORG = 'acme';
const TENANTS = ['t-0123456789abcdef0123456789abcdef', 't-11111111111111111111111111111111'];

/** A router with no thread of its own on a manual clock, its stores in a fresh folder. */
async function startRouter(replicaId, options) {
    const dir = path.dirname(tempDbPath('unused'));
    const leaseStore = new SqliteLeaseStore({ path: path.join(dir, 'leases.db') });
    const clock = new ManualClock(0);
    const router = await TenantRouter.start({
        leaseStore,
        durableStore: new DirectoryDurableStore({ path: path.join(dir, 'durable') }),
        stateRoot: path.join(dir, 'state'),
        replicaId,
        ttlMs: 3_000,
        marginMs: 500,
        clock,
        withoutThread: true,
        copyPolicy: { intervalMs: 3_600_000 },
        ...options,
    });
    return { router, clock, close: async () => { await router.close(100); leaseStore.close(); } };
}

/** The samples of one family in a prom-client registry, read through its JSON form. */
async function samplesOf(registry, name) {
    const family = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
    assert.ok(family !== undefined, `${name} is registered`);
    return family.values;
}

test('a router started with tenantMetrics shows each tenant in a prom-client registry until it leaves', async () => {
    const registry = new client.Registry();
    registerPromClient(registry);
    const { router, clock, close } = await startRouter('replica-node-tm', { tenantMetrics: true });
    // The call held in flight returns `released`, settled however the test ends: the router's
    // drain runs on the manual clock, so a close would wait for a held call for good.
    let release;
    const released = new Promise((resolve) => { release = resolve; });
    let held;
    try {
        const [one, two] = TENANTS.map((tenant) => leaseKeyFor(ORG, tenant));
        for (const tenant of TENANTS) await router.open(ORG, tenant);
        const write = (handle) => fs.writeFileSync(path.join(handle.root, 'notes.txt'), 'x');
        await router.run(one, write);
        await router.run(one, write);
        // Read once the call is running: its start is one hop of the addon away.
        let started;
        const running = new Promise((resolve) => { started = resolve; });
        held = router.run(one, () => { started(); return released; });
        await running;
        clock.advance(1_500);

        const labels = (key) => ({ replica: 'replica-node-tm', tenant: key });
        const state = await samplesOf(registry, 'gotry_tenant_router_tenant_state');
        assert.deepEqual(state, [
            { labels: { ...labels(one), state: 'serving' }, value: 1 },
            { labels: { ...labels(two), state: 'serving' }, value: 1 },
        ]);
        const valueOf = async (name, key) => (await samplesOf(registry, name))
            .find((s) => s.labels.tenant === key)?.value;
        assert.equal(await valueOf('gotry_tenant_router_tenant_calls_in_flight', one), 1);
        assert.equal(await valueOf('gotry_tenant_router_tenant_copy_lag_writes', one), 2);
        assert.equal(await valueOf('gotry_tenant_router_tenant_copy_lag_seconds', one), 1.5);
        assert.equal(await valueOf('gotry_tenant_router_tenant_copy_lag_writes', two), 0);
        // A scrape right after another, in the same turn of the event loop, reads the core again.
        clock.advance(500);
        assert.equal(await valueOf('gotry_tenant_router_tenant_copy_lag_seconds', one), 2);
        // The registry's text carries the label as the core wrote it.
        const text = await registry.metrics();
        assert.ok(text.includes(`gotry_tenant_router_tenant_copy_lag_writes{replica="replica-node-tm",tenant="${one}"} 2\n`), text);

        await router.handoff(two, { timeoutMs: 1_000 });
        assert.deepEqual((await samplesOf(registry, 'gotry_tenant_router_tenant_state')).map((s) => s.labels.tenant), [one]);
        release();
        await held;
    } finally {
        release();
        await held?.catch(() => {});
        await close();
    }
    assert.doesNotMatch(await registry.metrics(), /tenant="/);
});

test('without tenantMetrics no series names a tenant; the option is a boolean', async () => {
    const { router, close } = await startRouter('replica-node-plain', {});
    try {
        await router.open(ORG, TENANTS[0]);
        await router.run(leaseKeyFor(ORG, TENANTS[0]), () => null);
        const text = await metrics();
        assert.ok(value(text, 'gotry_tenant_router_tenants{state="serving"}') >= 1, text);
        assert.doesNotMatch(text, /tenant="/);
    } finally {
        await close();
    }
    await assert.rejects(startRouter('replica-node-bad', { tenantMetrics: 1 }), { name: 'TypeError', message: /tenantMetrics must be a boolean/ });
});
