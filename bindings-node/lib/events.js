'use strict';
/**
 * The events of a LeaseKeeper or a TenantRouter, handed from the native queue to the host's
 * onEvent on the event loop.
 */
const { translate } = require('./translate');

/**
 * The `deliver(native, onEvent)` of one class: hands the events `native.takeEvents()` holds to
 * `onEvent`, oldest first, each `error` translated; never throws.
 *
 * An onEvent handler that threw (or whose promise rejected) is the host's bug, not the
 * `owner`'s: it is reported as a process warning (printed to stderr unless the host listens for
 * 'warning'), named `${owner}Warning` with `code`, and the owner carries on. Rethrowing would
 * end the process, and with it the leases or the tenants of every other tenant.
 */
function eventDelivery(owner, noun, code) {
    function warn(message, error) {
        const warning = new Error(message, { cause: error });
        warning.name = `${owner}Warning`;
        warning.code = code;
        process.emitWarning(warning);
    }

    function reportHandlerFailure(error) {
        warn(`a ${owner} onEvent handler failed; the ${noun} carries on`, error);
    }

    return function deliver(native, onEvent) {
        if (onEvent === null) return;
        let events;
        try {
            events = native.takeEvents();
        } catch (error) {
            warn(`the ${owner}'s events could not be read; the ${noun} carries on`, error);
            return;
        }
        for (const event of events) {
            if (event.error !== undefined) event.error = translate(event.error);
            try {
                const result = onEvent(event);
                if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
                    result.then(undefined, reportHandlerFailure);
                }
            } catch (error) {
                reportHandlerFailure(error);
            }
        }
    };
}

/**
 * The report of a keeper's `shutdown` or a router's `close` (`stop()`), its `failed` errors
 * translated. The events told before it stopped reach onEvent (`deliver()`) before this
 * settles, whether it resolves or rejects.
 */
async function finalReport(stop, deliver) {
    let report;
    try {
        report = await stop();
    } finally {
        deliver();
    }
    return { ...report, failed: report.failed.map(({ key, error }) => ({ key, error: translate(error) })) };
}

module.exports = { eventDelivery, finalReport };
