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
