'use strict';
// The core's metrics for a Node host: the text to serve as it is, and a bridge into a
// prom-client registry so that a host with its own /metrics serves ours beside its own.
// Every number is counted and written by the core; this file only reshapes the text into the
// objects prom-client's registry asks its metrics for.

const native = require('./native');

/** The media type of `metrics()`'s text (the Prometheus text format 0.0.4). */
const METRICS_CONTENT_TYPE = native.METRICS_CONTENT_TYPE;

/** Every metric family of this process, in the Prometheus text format 0.0.4. */
async function metrics() {
    return native.metricsText();
}

const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;

function unescapeLabel(value) {
    return value.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
}

function sampleValue(text) {
    if (text === '+Inf') return Infinity;
    if (text === '-Inf') return -Infinity;
    return Number(text);
}

/** The families of a text in the format 0.0.4, in order, as prom-client's `get()` shapes them. */
function parseText(text) {
    const families = new Map();
    let current;
    for (const line of text.split('\n')) {
        if (line === '') continue;
        if (line.startsWith('# HELP ')) {
            const [, name, help] = /^# HELP (\S+) ?(.*)$/.exec(line);
            current = { name, help, type: 'untyped', values: [] };
            families.set(name, current);
        } else if (line.startsWith('# TYPE ')) {
            const [, name, type] = /^# TYPE (\S+) (\S+)$/.exec(line);
            current = families.get(name) ?? { name, help: '', values: [] };
            current.type = type;
            families.set(name, current);
        } else if (!line.startsWith('#')) {
            const match = SAMPLE.exec(line);
            if (match === null || current === undefined) throw new Error(`not a metrics sample: ${line}`);
            const [, metricName, labelText = '', value] = match;
            const labels = {};
            for (const [, label, labelValue] of labelText.matchAll(LABEL)) labels[label] = unescapeLabel(labelValue);
            const sample = { labels, value: sampleValue(value) };
            // Histogram lines carry their own names (_bucket, _sum, _count). A counter's
            // samples keep the family's name, so that prom-client's OpenMetrics mode, which
            // strips `_total` from the family and adds it to each sample, writes them right.
            if (metricName !== current.name) sample.metricName = metricName;
            current.values.push(sample);
        }
    }
    return [...families.values()];
}

/**
 * Registers every family of ours in a prom-client `Registry` (e.g. prom-client's default
 * `register`), so `registry.metrics()` serves them with the host's own. Each scrape reads
 * the core's counters once, however many of our families the registry asks for. Returns the
 * names registered; prom-client refuses a name registered twice by another metric.
 */
function registerPromClient(registry) {
    if (registry === null || typeof registry !== 'object' || typeof registry.registerMetric !== 'function') {
        throw new TypeError('registerPromClient expects a prom-client Registry (an object with registerMetric)');
    }
    // One reading serves every family of one scrape: prom-client's metrics() and
    // getMetricsAsJSON() call every metric's get() in one synchronous pass, before they await
    // any. It is dropped at the next microtask, so a later scrape reads again even in the same
    // turn of the event loop (dropped at setImmediate, a scrape right after a store call that
    // settled in the same poll phase was served the reading from before it).
    let reading;
    const read = () => {
        if (reading === undefined) {
            reading = new Map(parseText(native.metricsText()).map((family) => [family.name, family]));
            queueMicrotask(() => {
                reading = undefined;
            });
        }
        return reading;
    };
    const names = [];
    for (const family of parseText(native.metricsText())) {
        const metric = {
            name: family.name,
            help: family.help,
            type: family.type,
            aggregator: 'sum',
            async get() {
                const now = read().get(family.name);
                const current = now?.values ?? [];
                // OpenMetrics mode renames a counter family (without `_total`): answer with
                // the name it now has.
                return { name: metric.name, help: family.help, type: family.type, values: current, aggregator: 'sum' };
            },
            reset() {},
        };
        registry.registerMetric(metric);
        names.push(family.name);
    }
    return names;
}

module.exports = { metrics, METRICS_CONTENT_TYPE, registerPromClient };
