/*
 * The ids, paths and names of gotry_tenant_state.h and their failure paths, from C: the
 * status table (numbers, names and codes of this release), the version, the derivation of
 * ledger tenant ids and prompt cache partitions (their rules, lengths and buffers), the
 * validators, lease keys and tenant roots, and every accessor of an error.
 *
 * One of the suites of the C API by area, with store_test.c (the lease store) and
 * lease_test.c (holders and the keeper). Each compiles as C11 (gcc -std=c11) and as C++17
 * (g++ -std=c++17 -x c++), so the header is proven usable from both with one body of checks,
 * and run.sh runs both under valgrind, so a leaked error or a read past a lent string fails
 * the run.
 *
 * Usage: ids_test
 */
#define _POSIX_C_SOURCE 200809L

/* Every failure's error is proven whole: status, code and a message (see test_common.h). */
#define CHECK_WHOLE_ERRORS
#include "test_common.h"

#include <limits.h>

#define FAILS_ID(call) FAILS(call, GOTRY_STATUS_ID_INVALID, "GOTRY_TENANT_ID_INVALID")

static const uint8_t *const KEY = (const uint8_t *)"0123456789abcdef0123456789abcdef";
/* Computed independently with Python's hmac module (see core/src/ids.rs). */
static const char TENANT[] = "t-20464cc2afc52b55ccbd6928130a63fd";
static const char PARTITION[] = "pc-60e2110c6da3c630ee5bdcbb56ee01f3";

static void test_status_table(void) {
    /* The numbers of this release, as a compiled host holds them: the constants of the
     * header, their numbers and their names must all agree, and never change. */
    static const struct {
        int constant;
        int number;
        const char *name;
        const char *code; /* NULL outside the registry's block */
    } released[] = {
        {GOTRY_STATUS_OK, 0, "GOTRY_STATUS_OK", NULL},
        {GOTRY_STATUS_LEASE_HELD, 1, "GOTRY_STATUS_LEASE_HELD", "GOTRY_TENANT_LEASE_HELD"},
        {GOTRY_STATUS_LEASE_LOST, 2, "GOTRY_STATUS_LEASE_LOST", "GOTRY_TENANT_LEASE_LOST"},
        {GOTRY_STATUS_FENCED, 3, "GOTRY_STATUS_FENCED", "GOTRY_TENANT_FENCED"},
        {GOTRY_STATUS_LEASE_STORE_UNAVAILABLE, 4, "GOTRY_STATUS_LEASE_STORE_UNAVAILABLE",
         "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE"},
        {GOTRY_STATUS_ID_INVALID, 5, "GOTRY_STATUS_ID_INVALID", "GOTRY_TENANT_ID_INVALID"},
        {GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE, 6, "GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE",
         "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE"},
        {GOTRY_STATUS_RESTORE_INVALID, 7, "GOTRY_STATUS_RESTORE_INVALID", "GOTRY_TENANT_RESTORE_INVALID"},
        {GOTRY_STATUS_COPY_CONFLICT, 8, "GOTRY_STATUS_COPY_CONFLICT", "GOTRY_TENANT_COPY_CONFLICT"},
        {GOTRY_STATUS_DRAINING, 9, "GOTRY_STATUS_DRAINING", "GOTRY_TENANT_DRAINING"},
        {GOTRY_STATUS_DRAIN_TIMEOUT, 10, "GOTRY_STATUS_DRAIN_TIMEOUT", "GOTRY_TENANT_DRAIN_TIMEOUT"},
        {GOTRY_STATUS_ROUTER_CLOSED, 11, "GOTRY_STATUS_ROUTER_CLOSED", "GOTRY_TENANT_ROUTER_CLOSED"},
        {GOTRY_STATUS_REPLICA_AT_CAPACITY, 12, "GOTRY_STATUS_REPLICA_AT_CAPACITY",
         "GOTRY_TENANT_REPLICA_AT_CAPACITY"},
        {GOTRY_STATUS_BUSY, 13, "GOTRY_STATUS_BUSY", "GOTRY_TENANT_BUSY"},
        {GOTRY_STATUS_OPEN_IN_PROCESS, 14, "GOTRY_STATUS_OPEN_IN_PROCESS", "GOTRY_TENANT_OPEN_IN_PROCESS"},
        {GOTRY_STATUS_CALL_IN_DOUBT, 15, "GOTRY_STATUS_CALL_IN_DOUBT", "GOTRY_TENANT_CALL_IN_DOUBT"},
        {GOTRY_STATUS_INVALID_ARGUMENT, 100, "GOTRY_STATUS_INVALID_ARGUMENT", NULL},
        {GOTRY_STATUS_STORAGE_ERROR, 101, "GOTRY_STATUS_STORAGE_ERROR", NULL},
        {GOTRY_STATUS_NULL_ARGUMENT, 102, "GOTRY_STATUS_NULL_ARGUMENT", NULL},
        {GOTRY_STATUS_BUFFER_TOO_SMALL, 103, "GOTRY_STATUS_BUFFER_TOO_SMALL", NULL},
        {GOTRY_STATUS_NO_VALUE, 104, "GOTRY_STATUS_NO_VALUE", NULL},
        {GOTRY_STATUS_INTERNAL_ERROR, 105, "GOTRY_STATUS_INTERNAL_ERROR", NULL},
        {GOTRY_STATUS_HOST_CALLBACK_FAILED, 106, "GOTRY_STATUS_HOST_CALLBACK_FAILED", NULL},
    };
    const size_t count = sizeof released / sizeof released[0];
    for (size_t i = 0; i < count; i++) {
        CHECK(released[i].constant == released[i].number);
        const char *name = gotry_status_name(released[i].number);
        CHECK(name != NULL && strcmp(name, released[i].name) == 0);
        const char *code = gotry_status_code(released[i].number);
        CHECK(released[i].code == NULL ? code == NULL : code != NULL && strcmp(code, released[i].code) == 0);
    }
    /* Every other value, the reserved blocks included, has neither a name nor a code. */
    int named = 0;
    for (int value = -300; value <= 300; value++) {
        if (gotry_status_name(value) != NULL) named++;
        if (gotry_status_code(value) != NULL) CHECK(value >= 1 && value <= 99);
    }
    CHECK(named == (int)count);
    CHECK(gotry_status_name(16) == NULL && gotry_status_name(99) == NULL && gotry_status_name(107) == NULL);
    CHECK(gotry_status_name(INT_MIN) == NULL && gotry_status_name(INT_MAX) == NULL);
    CHECK(strcmp(gotry_fence_reason_name(GOTRY_FENCE_REASON_LEASE_RELEASED), "lease_released") == 0);
    CHECK(strcmp(gotry_fence_reason_name(GOTRY_FENCE_REASON_LEASE_LOST), "lease_lost") == 0);
    CHECK(strcmp(gotry_fence_reason_name(GOTRY_FENCE_REASON_LEASE_EXPIRED_LOCALLY), "lease_expired_locally") ==
          0);
    CHECK(gotry_fence_reason_name(0) == NULL && gotry_fence_reason_name(4) == NULL);
    CHECK(strcmp(gotry_lease_op_name(GOTRY_LEASE_OP_ACQUIRE), "acquire") == 0);
    CHECK(strcmp(gotry_lease_op_name(GOTRY_LEASE_OP_RENEW), "renew") == 0);
    CHECK(strcmp(gotry_lease_op_name(GOTRY_LEASE_OP_RELEASE), "release") == 0);
    CHECK(strcmp(gotry_lease_op_name(GOTRY_LEASE_OP_FORGET), "forget") == 0);
    CHECK(gotry_lease_op_name(0) == NULL && gotry_lease_op_name(5) == NULL);
}

/* The library loaded is the one the header describes, and the macros spell one version. */
static void test_version(void) {
    const char *loaded = gotry_version();
    CHECK(loaded != NULL && strcmp(loaded, GOTRY_TENANT_STATE_VERSION) == 0);
    char spelled[64];
    snprintf(spelled, sizeof spelled, "%d.%d.%d", GOTRY_TENANT_STATE_VERSION_MAJOR, GOTRY_TENANT_STATE_VERSION_MINOR,
             GOTRY_TENANT_STATE_VERSION_PATCH);
    CHECK(strcmp(spelled, GOTRY_TENANT_STATE_VERSION) == 0);
}

static void test_derivation(void) {
    GotryError *err = NULL;
    char id[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    char pc[GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN];

    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, S("https://idp.example"), S("user-1"), id, sizeof id, &err),
           GOTRY_STATUS_OK);
    CHECK(strcmp(id, TENANT) == 0);
    CHECK(err == NULL);
    STATUS(gotry_derive_prompt_cache_partition(KEY, 32, S(TENANT), pc, sizeof pc, NULL), GOTRY_STATUS_OK);
    CHECK(strcmp(pc, PARTITION) == 0);
    /* A longer key is a different key. */
    STATUS(gotry_derive_ledger_tenant_id((const uint8_t *)"0123456789abcdef0123456789abcdef!", 33,
                                         S("https://idp.example"), S("user-1"), id, sizeof id, NULL),
           GOTRY_STATUS_OK);
    CHECK(strcmp(id, TENANT) != 0 && strncmp(id, "t-", 2) == 0 && strlen(id) == 34);

    /* NULL is refused even with a length of zero; the status names the argument. */
    FAILS_NULL(gotry_derive_ledger_tenant_id(NULL, 0, S("i"), S("s"), id, sizeof id, &err));
    FAILS_NULL(gotry_derive_ledger_tenant_id(KEY, 32, NULL, 0, S("s"), id, sizeof id, &err));
    FAILS_NULL(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), NULL, 1, id, sizeof id, &err));
    FAILS_NULL(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("s"), NULL, 35, &err));
    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("s"), NULL, 35, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    /* A length no object can have is refused before anything is read. */
    FAILS_RANGE(gotry_derive_ledger_tenant_id(KEY, SIZE_MAX, S("i"), S("s"), id, sizeof id, &err));
    FAILS_RANGE(gotry_derive_ledger_tenant_id(KEY, 32, "i", (size_t)PTRDIFF_MAX + 1, S("s"), id, sizeof id, &err));

    /* The buffer is checked before the rules, and left untouched when it is too small. */
    memset(id, 'X', sizeof id);
    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("s"), id, 34, &err), GOTRY_STATUS_BUFFER_TOO_SMALL);
    size_t needed = 0;
    STATUS(gotry_error_buffer_len(err, &needed), GOTRY_STATUS_OK);
    CHECK(needed == GOTRY_LEDGER_TENANT_ID_BUFFER_LEN);
    ERROR_IS(GOTRY_STATUS_BUFFER_TOO_SMALL, "GOTRY_STATUS_BUFFER_TOO_SMALL");
    CHECK(id[0] == 'X' && id[34] == 'X');
    FAILS(gotry_derive_ledger_tenant_id(KEY, 31, S("i"), S("s"), id, 0, &err), GOTRY_STATUS_BUFFER_TOO_SMALL,
          "GOTRY_STATUS_BUFFER_TOO_SMALL");

    /* The rules: key length, empty, NUL, UTF-8, 512 bytes. */
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 31, S("i"), S("s"), id, sizeof id, &err));
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, S(""), S("s"), id, sizeof id, &err));
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S(""), id, sizeof id, &err));
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, S("i\0x"), S("s"), id, sizeof id, &err));
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("s\0"), id, sizeof id, &err));
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("a\xff"), id, sizeof id, &err));
    /* A UTF-16 surrogate smuggled as three bytes, and an overlong '/', are not UTF-8. */
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("a\xed\xa0\x80"), id, sizeof id, &err));
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, S("\xc0\xaf"), S("s"), id, sizeof id, &err));
    /* The replacement character itself is a valid claim, distinct from "a". */
    char with_fffd[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    char plain[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("a\xef\xbf\xbd"), with_fffd, sizeof with_fffd, NULL),
           GOTRY_STATUS_OK);
    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("a"), plain, sizeof plain, NULL), GOTRY_STATUS_OK);
    CHECK(strcmp(with_fffd, plain) != 0);

    char claim[600];
    memset(claim, 'a', sizeof claim);
    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, claim, 512, S("s"), id, sizeof id, NULL), GOTRY_STATUS_OK);
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, claim, 513, S("s"), id, sizeof id, &err));
    /* 256 two-byte characters are 512 bytes: accepted; one byte more is refused. */
    for (int i = 0; i < 256; i++) {
        claim[2 * i] = '\xc3';
        claim[2 * i + 1] = '\xa9';
    }
    claim[512] = 'a';
    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), claim, 512, id, sizeof id, NULL), GOTRY_STATUS_OK);
    FAILS_ID(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), claim, 513, id, sizeof id, &err));

    /* No normalization: a composed and a decomposed e-acute are two tenants. */
    char composed[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    char decomposed[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("\xc3\xa9"), composed, sizeof composed, NULL),
           GOTRY_STATUS_OK);
    STATUS(gotry_derive_ledger_tenant_id(KEY, 32, S("i"), S("e\xcc\x81"), decomposed, sizeof decomposed, NULL),
           GOTRY_STATUS_OK);
    CHECK(strcmp(composed, decomposed) != 0);

    /* The partition. */
    FAILS_ID(gotry_derive_prompt_cache_partition(KEY, 32, S("t-nope"), pc, sizeof pc, &err));
    FAILS_ID(gotry_derive_prompt_cache_partition(KEY, 32, S("t-20464cc2afc52b55ccbd6928130a63fd\n"), pc,
                                                 sizeof pc, &err));
    FAILS_ID(gotry_derive_prompt_cache_partition(KEY, 16, S(TENANT), pc, sizeof pc, &err));
    FAILS_ID(gotry_derive_prompt_cache_partition(KEY, 32, S("t-\xff"), pc, sizeof pc, &err));
    FAILS(gotry_derive_prompt_cache_partition(KEY, 32, S(TENANT), pc, 35, &err), GOTRY_STATUS_BUFFER_TOO_SMALL,
          "GOTRY_STATUS_BUFFER_TOO_SMALL");
    FAILS_NULL(gotry_derive_prompt_cache_partition(NULL, 32, S(TENANT), pc, sizeof pc, &err));
    FAILS_NULL(gotry_derive_prompt_cache_partition(KEY, 32, NULL, 34, pc, sizeof pc, &err));
    FAILS_NULL(gotry_derive_prompt_cache_partition(KEY, 32, S(TENANT), NULL, sizeof pc, &err));
}

static void test_validators(void) {
    GotryError *err = NULL;
    char long_id[70];
    memset(long_id, 'a', sizeof long_id);

    STATUS(gotry_assert_organization_id(S("acme"), &err), GOTRY_STATUS_OK);
    STATUS(gotry_assert_organization_id(S("a-"), NULL), GOTRY_STATUS_OK);
    STATUS(gotry_assert_organization_id(long_id, 63, NULL), GOTRY_STATUS_OK);
    FAILS_ID(gotry_assert_organization_id(long_id, 64, &err));
    FAILS_ID(gotry_assert_organization_id(S("acme\n"), &err));
    FAILS_ID(gotry_assert_organization_id(S("acme\0"), &err));
    FAILS_ID(gotry_assert_organization_id(S("Acme"), &err));
    FAILS_ID(gotry_assert_organization_id(S("-acme"), &err));
    FAILS_ID(gotry_assert_organization_id(S(""), &err));
    FAILS_ID(gotry_assert_organization_id(S("a_b"), &err));
    FAILS_ID(gotry_assert_organization_id(S("acm\xc3\xa9"), &err));
    FAILS_ID(gotry_assert_organization_id(S("acme\xff"), &err));
    FAILS_NULL(gotry_assert_organization_id(NULL, 0, &err));
    FAILS_RANGE(gotry_assert_organization_id("acme", SIZE_MAX, &err));

    STATUS(gotry_assert_ledger_tenant_id(S(TENANT), &err), GOTRY_STATUS_OK);
    FAILS_ID(gotry_assert_ledger_tenant_id(S("t-20464cc2afc52b55ccbd6928130a63fd\n"), &err));
    FAILS_ID(gotry_assert_ledger_tenant_id(S("t-20464CC2afc52b55ccbd6928130a63fd"), &err));
    FAILS_ID(gotry_assert_ledger_tenant_id(S("t-20464cc2afc52b55ccbd6928130a63f"), &err));
    FAILS_ID(gotry_assert_ledger_tenant_id(TENANT, 33, &err));
    FAILS_ID(gotry_assert_ledger_tenant_id(S(PARTITION), &err));
    FAILS_NULL(gotry_assert_ledger_tenant_id(NULL, 34, &err));

    STATUS(gotry_assert_prompt_cache_partition(S(PARTITION), &err), GOTRY_STATUS_OK);
    FAILS_ID(gotry_assert_prompt_cache_partition(S("pc-60e2110c6da3c630ee5bdcbb56ee01f3\n"), &err));
    FAILS_ID(gotry_assert_prompt_cache_partition(S(TENANT), &err));
    FAILS_ID(gotry_assert_prompt_cache_partition(S("pc-60e2110c6da3c630ee5bdcbb56ee01f\0"), &err));
    FAILS_NULL(gotry_assert_prompt_cache_partition(NULL, 0, &err));
}

static void test_paths(void) {
    GotryError *err = NULL;
    char key[GOTRY_LEASE_KEY_BUFFER_LEN];
    STATUS(gotry_lease_key_for(S("acme"), S(TENANT), key, sizeof key, &err), GOTRY_STATUS_OK);
    CHECK(strcmp(key, "acme/t-20464cc2afc52b55ccbd6928130a63fd") == 0);
    /* The longest organization id fills the constant exactly. */
    char long_org[63];
    memset(long_org, 'z', sizeof long_org);
    STATUS(gotry_lease_key_for(long_org, 63, S(TENANT), key, sizeof key, NULL), GOTRY_STATUS_OK);
    CHECK(strlen(key) == GOTRY_LEASE_KEY_BUFFER_LEN - 1);
    FAILS(gotry_lease_key_for(S("acme"), S(TENANT), key, sizeof key - 1, &err), GOTRY_STATUS_BUFFER_TOO_SMALL,
          "GOTRY_STATUS_BUFFER_TOO_SMALL");
    FAILS_ID(gotry_lease_key_for(S("../etc"), S(TENANT), key, sizeof key, &err));
    FAILS_ID(gotry_lease_key_for(S("acme"), S("t-x"), key, sizeof key, &err));
    FAILS_ID(gotry_lease_key_for(S("acme"), S("t-20464cc2afc52b55ccbd6928130a63f\xff"), key, sizeof key, &err));
    FAILS_NULL(gotry_lease_key_for(NULL, 4, S(TENANT), key, sizeof key, &err));
    FAILS_NULL(gotry_lease_key_for(S("acme"), NULL, 34, key, sizeof key, &err));
    FAILS_NULL(gotry_lease_key_for(S("acme"), S(TENANT), NULL, sizeof key, &err));

    char path[4096];
    size_t path_len = 0;
    STATUS(gotry_tenant_root_for(S("/srv/state/../state2/."), S("acme"), S(TENANT), path, sizeof path, &path_len,
                                 &err),
           GOTRY_STATUS_OK);
    CHECK(LENT_IS(path, path_len, "/srv/state2/orgs/acme/tenants/t-20464cc2afc52b55ccbd6928130a63fd"));
    STATUS(gotry_tenant_root_for(S("//x//y/"), S("acme"), S(TENANT), path, sizeof path, &path_len, NULL),
           GOTRY_STATUS_OK);
    CHECK(LENT_IS(path, path_len, "/x/y/orgs/acme/tenants/t-20464cc2afc52b55ccbd6928130a63fd"));
    STATUS(gotry_tenant_root_for(S("/.."), S("acme"), S(TENANT), path, sizeof path, &path_len, NULL),
           GOTRY_STATUS_OK);
    CHECK(LENT_IS(path, path_len, "/orgs/acme/tenants/t-20464cc2afc52b55ccbd6928130a63fd"));
    /* A relative root resolves against the working directory. */
    char cwd[2048];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    char expected[4096];
    snprintf(expected, sizeof expected, "%s/rel/orgs/acme/tenants/%s", strcmp(cwd, "/") == 0 ? "" : cwd, TENANT);
    STATUS(gotry_tenant_root_for(S("rel/./x/.."), S("acme"), S(TENANT), path, sizeof path, &path_len, NULL),
           GOTRY_STATUS_OK);
    CHECK(path_len == strlen(expected) && strcmp(path, expected) == 0);
    /* Too small: nothing written, and the error says how much is needed. */
    size_t untouched = 12345;
    STATUS(gotry_tenant_root_for(S("/srv"), S("acme"), S(TENANT), path, 10, &untouched, &err),
           GOTRY_STATUS_BUFFER_TOO_SMALL);
    size_t needed = 0;
    STATUS(gotry_error_buffer_len(err, &needed), GOTRY_STATUS_OK);
    CHECK(needed == strlen("/srv/orgs/acme/tenants/") + 34 + 1);
    CHECK(untouched == 12345);
    gotry_error_free(err);
    err = NULL;
    STATUS(gotry_tenant_root_for(S("/srv"), S("acme"), S(TENANT), path, needed, &path_len, NULL), GOTRY_STATUS_OK);
    CHECK(path_len == needed - 1);
    FAILS_RANGE(gotry_tenant_root_for(S("/srv\0/etc"), S("acme"), S(TENANT), path, sizeof path, &path_len, &err));
    FAILS_RANGE(gotry_tenant_root_for(S("/srv\xff"), S("acme"), S(TENANT), path, sizeof path, &path_len, &err));
    FAILS_ID(gotry_tenant_root_for(S("/srv"), S("../etc"), S(TENANT), path, sizeof path, &path_len, &err));
    FAILS_ID(gotry_tenant_root_for(S("/srv"), S("acme"), S("t-../../x"), path, sizeof path, &path_len, &err));
    FAILS_NULL(gotry_tenant_root_for(NULL, 0, S("acme"), S(TENANT), path, sizeof path, &path_len, &err));
    FAILS_NULL(gotry_tenant_root_for(S("/srv"), NULL, 4, S(TENANT), path, sizeof path, &path_len, &err));
    FAILS_NULL(gotry_tenant_root_for(S("/srv"), S("acme"), NULL, 34, path, sizeof path, &path_len, &err));
    FAILS_NULL(gotry_tenant_root_for(S("/srv"), S("acme"), S(TENANT), NULL, sizeof path, &path_len, &err));
    FAILS_NULL(gotry_tenant_root_for(S("/srv"), S("acme"), S(TENANT), path, sizeof path, NULL, &err));
}

static void test_error_accessors(void) {
    GotryError *err = NULL;
    /* Produce one ordinary error and ask it for every detail it does not have. */
    STATUS(gotry_assert_organization_id(S("Nope"), &err), GOTRY_STATUS_ID_INVALID);
    GotryRecordView view;
    GotryFenceReason reason;
    const char *text = NULL;
    size_t len = 0;
    int64_t epoch = 0;
    uint64_t number = 0;
    GotrySkippedCopy skipped;
    STATUS(gotry_error_record(err, &view), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_fence_reason(err, &reason), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_key(err, &text, &len), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_epoch(err, &epoch), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_in_flight(err, &number), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_timeout_ms(err, &number), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_limit(err, &number), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_skipped_count(err, &len), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_skipped(err, 0, &skipped), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_backend_code(err, &text), GOTRY_STATUS_NO_VALUE);
    STATUS(gotry_error_buffer_len(err, &len), GOTRY_STATUS_NO_VALUE);
    /* NULL out-parameters... */
    STATUS(gotry_error_code(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_message(err, &text, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_message(err, NULL, &len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_record(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_fence_reason(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_key(err, NULL, &len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_epoch(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_in_flight(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_timeout_ms(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_limit(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_skipped_count(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_skipped(err, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_backend_code(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_buffer_len(err, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    /* ...and a NULL error. */
    CHECK(gotry_error_status(NULL) == GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_code(NULL, &text), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_message(NULL, &text, &len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_record(NULL, &view), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_fence_reason(NULL, &reason), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_key(NULL, &text, &len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_epoch(NULL, &epoch), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_in_flight(NULL, &number), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_timeout_ms(NULL, &number), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_limit(NULL, &number), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_skipped_count(NULL, &len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_skipped(NULL, 0, &skipped), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_backend_code(NULL, &text), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_error_buffer_len(NULL, &len), GOTRY_STATUS_NULL_ARGUMENT);
    ERROR_IS(GOTRY_STATUS_ID_INVALID, "GOTRY_TENANT_ID_INVALID");
    gotry_error_free(NULL);
    gotry_record_free(NULL);
    gotry_record_list_free(NULL);
    gotry_history_free(NULL);
}

int main(int argc, char **argv) {
    if (argc != 1) {
        fprintf(stderr, "usage: %s\n", argv[0]);
        return 2;
    }
    test_status_table();
    test_version();
    test_derivation();
    test_validators();
    test_paths();
    test_error_accessors();
    printf("ids_test (%s): %d checks, %d failed\n", LANGUAGE, checks, failures);
    return failures == 0 ? 0 : 1;
}
