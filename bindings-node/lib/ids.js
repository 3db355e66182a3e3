'use strict';
/**
 * Tenant and organization ids. Every rule runs in the Rust core; these wrappers only give the
 * core's errors their classes. Claims cross into Rust as UTF-16 and are decoded strictly, so a
 * lone surrogate is refused instead of becoming U+FFFD.
 */
const native = require('./native');
const { translate } = require('./translate');

function assertOrganizationId(value) {
    try {
        return native.assertOrganizationId(value);
    } catch (error) {
        throw translate(error);
    }
}

function assertLedgerTenantId(value) {
    try {
        return native.assertLedgerTenantId(value);
    } catch (error) {
        throw translate(error);
    }
}

function assertPromptCachePartition(value) {
    try {
        return native.assertPromptCachePartition(value);
    } catch (error) {
        throw translate(error);
    }
}

/** `t-` + the first 128 bits of HMAC-SHA256(organizationKey, issuer 0x00 subject). */
function deriveLedgerTenantId(organizationKey, issuer, subject) {
    try {
        return native.deriveLedgerTenantId(organizationKey, issuer, subject);
    } catch (error) {
        throw translate(error);
    }
}

/** `pc-` + the first 128 bits of HMAC-SHA256(organizationKey, context 0x00 ledgerTenantId). */
function derivePromptCachePartition(organizationKey, ledgerTenantId) {
    try {
        return native.derivePromptCachePartition(organizationKey, ledgerTenantId);
    } catch (error) {
        throw translate(error);
    }
}

/** `<organization>/<ledger tenant>`. */
function leaseKeyFor(organizationId, ledgerTenantId) {
    try {
        return native.leaseKeyFor(organizationId, ledgerTenantId);
    } catch (error) {
        throw translate(error);
    }
}

/** `<path.resolve(stateRoot)>/orgs/<organization>/tenants/<ledger tenant>`. */
function tenantRootFor(stateRoot, organizationId, ledgerTenantId) {
    // path.resolve's own refusal, which the reference meets first.
    if (typeof stateRoot !== 'string') {
        const error = new TypeError(`The "stateRoot" argument must be of type string. Received ${typeof stateRoot}`);
        error.code = 'ERR_INVALID_ARG_TYPE';
        throw error;
    }
    try {
        return native.tenantRootFor(stateRoot, organizationId, ledgerTenantId);
    } catch (error) {
        throw translate(error);
    }
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
