// The ES module face of the package; the CommonJS index.js is the one implementation.
import pkg from './index.js';

export const {
    TenantStateError,
    LeaseHeldError,
    LeaseLostError,
    FencedError,
    LeaseStoreUnavailableError,
    InvalidTenantIdError,
    DurableStoreUnavailableError,
    RestoreVerificationError,
    CopyConflictError,
    TenantDrainingError,
    DrainTimeoutError,
    RouterClosedError,
    ReplicaAtCapacityError,
    assertOrganizationId,
    assertLedgerTenantId,
    deriveLedgerTenantId,
    assertPromptCachePartition,
    derivePromptCachePartition,
    leaseKeyFor,
    tenantRootFor,
    MIN_LEASE_TTL_MS,
    MAX_LEASE_TTL_MS,
    assertLeaseTtl,
    SqliteLeaseStore,
    openLeaseStore,
    systemMonotonicClock,
    TenantLease,
    LeaseKeeper,
    ManualClock,
    ERROR_CODES,
} = pkg;

export default pkg;
