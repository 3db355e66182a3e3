'use strict';
/**
 * Tenant and organization ids. Every rule runs in the Rust core; these wrappers only give the
 * core's errors their classes. Claims cross into Rust as UTF-16 and are decoded strictly, so a
 * lone surrogate is refused instead of becoming U+FFFD.
 */
const native = require('./native');
const { guard } = require('./translate');

function assertOrganizationId(value) {
    return guard(() => native.assertOrganizationId(value));
}

function assertLedgerTenantId(value) {
    return guard(() => native.assertLedgerTenantId(value));
}

function assertPromptCachePartition(value) {
    return guard(() => native.assertPromptCachePartition(value));
}

/** `t-` + the first 128 bits of HMAC-SHA256(organizationKey, issuer 0x00 subject). */
function deriveLedgerTenantId(organizationKey, issuer, subject) {
    return guard(() => native.deriveLedgerTenantId(organizationKey, issuer, subject));
}

/** `pc-` + the first 128 bits of HMAC-SHA256(organizationKey, context 0x00 ledgerTenantId). */
function derivePromptCachePartition(organizationKey, ledgerTenantId) {
    return guard(() => native.derivePromptCachePartition(organizationKey, ledgerTenantId));
}

/** `<organization>/<ledger tenant>`. */
function leaseKeyFor(organizationId, ledgerTenantId) {
    return guard(() => native.leaseKeyFor(organizationId, ledgerTenantId));
}

/** `<path.resolve(stateRoot)>/orgs/<organization>/tenants/<ledger tenant>`. */
function tenantRootFor(stateRoot, organizationId, ledgerTenantId) {
    // path.resolve's own refusal, which the reference meets first.
    if (typeof stateRoot !== 'string') {
        const error = new TypeError(`The "stateRoot" argument must be of type string. Received ${typeof stateRoot}`);
        error.code = 'ERR_INVALID_ARG_TYPE';
        throw error;
    }
    return guard(() => native.tenantRootFor(stateRoot, organizationId, ledgerTenantId));
}

module.exports = {
    assertOrganizationId,
    assertLedgerTenantId,
    deriveLedgerTenantId,
    assertPromptCachePartition,
    derivePromptCachePartition,
    leaseKeyFor,
    tenantRootFor,
};
