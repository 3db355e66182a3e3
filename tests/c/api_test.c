/*
 * Every function of gotry_tenant_state.h and its failure paths, from C.
 *
 * The same file compiles as C11 (gcc -std=c11) and as C++17 (g++ -std=c++17 -x c++), so the
 * header is proven usable from both with one body of checks; the C++ build adds a section
 * that holds every handle in a std::unique_ptr with its _free function. run.sh runs both
 * under valgrind, so a leaked error or record, or a read past a lent string, fails the run.
 *
 * Usage: api_test SCRATCH_DIR             (an existing, empty, writable directory)
 *        api_test SCRATCH_DIR MYSQL_URL   (only the checks of a store on a MySQL/MariaDB server,
 *                                          with a table prefix no one else uses)
 * Link with -pthread.
 */
#define _POSIX_C_SOURCE 200809L

/* This file proves each failure's error whole (status, code and a message), with STATUS,
 * ERROR_IS and FAILS of its own that test_common.h leaves in place. */
#define STATUS(call, want) check_status_at((call), (want), NULL, #call, __FILE__, __LINE__)
#define FAILS(call, want, code) check_failure((call), &err, (want), (code), #call, __LINE__)
#define ERROR_IS(want, code) check_failure((want), &err, (want), (code), "the error held", __LINE__)

#include "test_common.h"

#include <limits.h>
#include <pthread.h>

#ifdef __cplusplus
#include <memory>
#include <string>
#define LANGUAGE "C++"
#else
#define LANGUAGE "C"
#endif

/* True when a lent string is exactly `want`, NUL-terminated just after its length. */
static int lent_equals(const char *text, size_t len, const char *want, size_t want_len) {
    return text != NULL && len == want_len && memcmp(text, want, len) == 0 && text[len] == '\0';
}
#define LENT_IS(text, len, literal) lent_equals((text), (len), S(literal))

/*
 * A failed call: the status is `want`, the error object was created with the same status,
 * the code string is `code` and the message is not empty. Frees the error and clears *err.
 */
static void check_failure(GotryStatus got, GotryError **err, GotryStatus want, const char *code,
                          const char *call, int line) {
    check_status_at(got, want, NULL, call, __FILE__, line);
    checks++;
    if (*err == NULL) {
        failures++;
        fprintf(stderr, "api_test.c:%d: %s\n    left no error object\n", line, call);
        return;
    }
    const char *got_code = NULL;
    const char *message = NULL;
    size_t message_len = 0;
    int ok = gotry_error_status(*err) == want && gotry_error_code(*err, &got_code) == GOTRY_STATUS_OK &&
             strcmp(got_code, code) == 0 &&
             gotry_error_message(*err, &message, &message_len) == GOTRY_STATUS_OK && message_len > 0 &&
             message[message_len] == '\0';
    if (!ok) {
        failures++;
        fprintf(stderr, "api_test.c:%d: %s\n    error has status %s, code %s, expected %s\n", line, call,
                status_name(gotry_error_status(*err)), got_code ? got_code : "(none)", code);
    }
    gotry_error_free(*err);
    *err = NULL;
}
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

static void test_manual_clock(void) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    int64_t now = 0;
    STATUS(gotry_manual_clock_new(1000, &clock), GOTRY_STATUS_OK);
    STATUS(gotry_manual_clock_get(clock, &now), GOTRY_STATUS_OK);
    CHECK(now == 1000);
    STATUS(gotry_manual_clock_advance(clock, 250, &now, &err), GOTRY_STATUS_OK);
    CHECK(now == 1250);
    STATUS(gotry_manual_clock_advance(clock, -1250, &now, NULL), GOTRY_STATUS_OK);
    CHECK(now == 0);
    STATUS(gotry_manual_clock_set(clock, 5), GOTRY_STATUS_OK);
    STATUS(gotry_manual_clock_get(clock, &now), GOTRY_STATUS_OK);
    CHECK(now == 5);
    /* Overflow is refused and leaves both the clock and the out-parameter alone. */
    now = -7;
    FAILS_RANGE(gotry_manual_clock_advance(clock, INT64_MAX, &now, &err));
    CHECK(now == -7);
    STATUS(gotry_manual_clock_get(clock, &now), GOTRY_STATUS_OK);
    CHECK(now == 5);
    STATUS(gotry_manual_clock_new(0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_manual_clock_set(NULL, 1), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_manual_clock_get(NULL, &now), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_manual_clock_get(clock, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    FAILS_NULL(gotry_manual_clock_advance(NULL, 1, &now, &err));
    FAILS_NULL(gotry_manual_clock_advance(clock, 1, NULL, &err));
    gotry_manual_clock_free(clock);
    gotry_manual_clock_free(NULL);
}

/* Reads a record handle into a view, checking the call. */
static GotryRecordView view_of(const GotryRecord *record) {
    GotryRecordView view;
    memset(&view, 0, sizeof view);
    STATUS(gotry_record_view(record, &view), GOTRY_STATUS_OK);
    return view;
}

static void test_store(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryRecord *record = NULL;
    GotryRecordView view;
    int64_t ttl = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/nested/leases.db", dir);

    STATUS(gotry_manual_clock_new(1000000, &clock), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);
    CHECK(store != NULL && access(path, F_OK) == 0);
    int64_t now = 0;
    STATUS(gotry_store_now_ms(store, &now, &err), GOTRY_STATUS_OK);
    CHECK(now == 1000000);

    /* Nothing there yet: success with a NULL record. */
    record = (GotryRecord *)&view; /* a sentinel that must be overwritten */
    STATUS(gotry_store_read(store, S("k"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record == NULL);

    STATUS(gotry_store_acquire(store, S("k"), S("replica-a"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    view = view_of(record);
    CHECK(LENT_IS(view.key, view.key_len, "k") && LENT_IS(view.owner, view.owner_len, "replica-a"));
    CHECK(view.epoch == 1 && view.lease_until_ms == 1001000 && view.forgotten_at_epoch == 0 && ttl == 1000);
    gotry_record_free(record);

    /* Held by someone else: LEASE_HELD carries the holder's record. */
    record = NULL;
    STATUS(gotry_store_acquire(store, S("k"), S("replica-b"), 1000, &record, &ttl, &err), GOTRY_STATUS_LEASE_HELD);
    CHECK(record == NULL);
    GotryRecordView held;
    STATUS(gotry_error_record(err, &held), GOTRY_STATUS_OK);
    CHECK(LENT_IS(held.owner, held.owner_len, "replica-a") && held.epoch == 1 && held.lease_until_ms == 1001000);
    CHECK(LENT_IS(held.key, held.key_len, "k"));
    GotryFenceReason reason;
    STATUS(gotry_error_fence_reason(err, &reason), GOTRY_STATUS_NO_VALUE);
    ERROR_IS(GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");

    STATUS(gotry_manual_clock_advance(clock, 400, &now, NULL), GOTRY_STATUS_OK);
    STATUS(gotry_store_renew(store, S("k"), S("replica-a"), 1, 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).lease_until_ms == 1001400 && view_of(record).epoch == 1);
    gotry_record_free(record);
    FAILS(gotry_store_renew(store, S("k"), S("replica-b"), 1, 1000, &record, &ttl, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    FAILS(gotry_store_renew(store, S("k"), S("replica-a"), 2, 1000, &record, &ttl, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    STATUS(gotry_store_mark_forgotten(store, S("k"), S("replica-a"), 1, &record, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).forgotten_at_epoch == 1);
    gotry_record_free(record);

    /* Range checks: epoch, TTL bounds, text length in UTF-16 units, UTF-8. */
    FAILS_RANGE(gotry_store_renew(store, S("k"), S("replica-a"), 0, 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_renew(store, S("k"), S("replica-a"), 1, 99, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("other"), S("o"), 99, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("other"), S("o"), 600001, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("other"), S("o"), -1, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S(""), S("o"), 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("other"), S(""), 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("k\xff"), S("o"), 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("k"), S("o\xc0\xaf"), 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_release(store, S("k"), S("replica-a"), -3, &record, &err));
    FAILS_RANGE(gotry_store_mark_forgotten(store, S("k"), S("replica-a"), 0, &record, &err));
    FAILS_RANGE(gotry_store_read(store, S(""), &record, &err));
    char text[900];
    memset(text, 'x', sizeof text);
    STATUS(gotry_store_acquire(store, text, 200, S("o"), 100, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    FAILS_RANGE(gotry_store_acquire(store, text, 201, S("o"), 100, &record, &ttl, &err));
    /* 100 emoji are 400 bytes and 200 UTF-16 units: accepted; 101 are refused. */
    for (int i = 0; i < 101; i++) memcpy(text + 4 * i, "\xf0\x9f\x98\x80", 4);
    STATUS(gotry_store_acquire(store, S("emoji"), text, 400, GOTRY_MIN_LEASE_TTL_MS, &record, &ttl, &err),
           GOTRY_STATUS_OK);
    view = view_of(record);
    CHECK(view.owner_len == 400 && memcmp(view.owner, text, 400) == 0 && view.owner[400] == '\0');

    gotry_record_free(record);
    FAILS_RANGE(gotry_store_acquire(store, S("emoji2"), text, 404, 1000, &record, &ttl, &err));

    /* A key may hold a NUL (the rules allow it): it is kept whole, not cut at the NUL. */
    STATUS(gotry_store_acquire(store, S("n\0ul"), S("o"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_store_read(store, S("n\0ul"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record != NULL && LENT_IS(view_of(record).key, view_of(record).key_len, "n\0ul"));
    gotry_record_free(record);
    STATUS(gotry_store_read(store, S("n"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record == NULL);

    /* Expiry on the store's clock: renew and forget are refused, release is still allowed. */
    STATUS(gotry_manual_clock_advance(clock, 1000, &now, NULL), GOTRY_STATUS_OK);
    FAILS(gotry_store_renew(store, S("k"), S("replica-a"), 1, 1000, &record, &ttl, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    FAILS(gotry_store_mark_forgotten(store, S("k"), S("replica-a"), 1, &record, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    FAILS(gotry_store_release(store, S("k"), S("replica-b"), 1, &record, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    STATUS(gotry_store_release(store, S("k"), S("replica-a"), 1, &record, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).lease_until_ms == 1001400);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("k"), S("replica-b"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    view = view_of(record);
    CHECK(view.epoch == 2 && view.forgotten_at_epoch == 1 && view.lease_until_ms == 1002400);
    gotry_record_free(record);
    /* Release expires it at once: the next acquire needs no wait. */
    STATUS(gotry_store_release(store, S("k"), S("replica-b"), 2, &record, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).lease_until_ms == 1001400);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("k"), S("replica-a"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).epoch == 3);
    gotry_record_free(record);

    /* The log of one key, in order. */
    GotryHistory *history = NULL;
    size_t count = 0;
    STATUS(gotry_store_history(store, S("k"), &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 7);
    static const GotryLeaseOp ops[7] = {GOTRY_LEASE_OP_ACQUIRE, GOTRY_LEASE_OP_RENEW,   GOTRY_LEASE_OP_FORGET,
                                        GOTRY_LEASE_OP_RELEASE, GOTRY_LEASE_OP_ACQUIRE, GOTRY_LEASE_OP_RELEASE,
                                        GOTRY_LEASE_OP_ACQUIRE};
    static const int64_t epochs[7] = {1, 1, 1, 1, 2, 2, 3};
    static const int64_t at[7] = {1000000, 1000400, 1000400, 1001400, 1001400, 1001400, 1001400};
    for (size_t i = 0; i < 7 && i < count; i++) {
        GotryHistoryEntry entry;
        STATUS(gotry_history_get(history, i, &entry), GOTRY_STATUS_OK);
        CHECK(entry.op == ops[i] && entry.epoch == epochs[i] && entry.at_ms == at[i]);
        CHECK(LENT_IS(entry.key, entry.key_len, "k"));
        const char *owner = i == 4 || i == 5 ? "replica-b" : "replica-a";
        CHECK(lent_equals(entry.owner, entry.owner_len, owner, strlen(owner)));
    }
    GotryHistoryEntry entry;
    STATUS(gotry_history_get(history, 7, &entry), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_history_get(history, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_history_get(NULL, 0, &entry), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_history_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_history_len(history, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_history_free(history);
    /* All keys: NULL key. An empty key is a key like any other, with no log. */
    STATUS(gotry_store_history(store, NULL, 99, &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 10);
    gotry_history_free(history);
    STATUS(gotry_store_history(store, S(""), &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    gotry_history_free(history);
    FAILS_RANGE(gotry_store_history(store, S("\xff"), &history, &err));
    FAILS_NULL(gotry_store_history(store, NULL, 0, NULL, &err));
    FAILS_NULL(gotry_store_history(NULL, NULL, 0, &history, &err));

    /* Listing, ordered by key, by prefix. */
    GotryRecordList *list = NULL;
    STATUS(gotry_store_list(store, S(""), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_record_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 4);
    STATUS(gotry_record_list_get(list, 0, &view), GOTRY_STATUS_OK);
    CHECK(LENT_IS(view.key, view.key_len, "emoji"));
    STATUS(gotry_record_list_get(list, 1, &view), GOTRY_STATUS_OK);
    CHECK(LENT_IS(view.key, view.key_len, "k") && view.epoch == 3);
    STATUS(gotry_record_list_get(list, 4, &view), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_record_list_get(list, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_record_list_get(NULL, 0, &view), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_record_list_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_record_list_len(list, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_record_list_free(list);
    STATUS(gotry_store_list(store, S("n"), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_record_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 1);
    gotry_record_list_free(list);
    FAILS_NULL(gotry_store_list(store, NULL, 0, &list, &err));
    FAILS_NULL(gotry_store_list(store, S(""), NULL, &err));
    FAILS_RANGE(gotry_store_list(store, S("\xfe"), &list, &err));

    /* NULL anywhere a pointer is required. */
    FAILS_NULL(gotry_store_read(NULL, S("k"), &record, &err));
    FAILS_NULL(gotry_store_read(store, NULL, 1, &record, &err));
    FAILS_NULL(gotry_store_read(store, S("k"), NULL, &err));
    FAILS_NULL(gotry_store_acquire(NULL, S("k"), S("o"), 1000, &record, &ttl, &err));
    FAILS_NULL(gotry_store_acquire(store, S("k"), NULL, 1, 1000, &record, &ttl, &err));
    FAILS_NULL(gotry_store_acquire(store, S("k"), S("o"), 1000, NULL, &ttl, &err));
    FAILS_NULL(gotry_store_acquire(store, S("k"), S("o"), 1000, &record, NULL, &err));
    FAILS_NULL(gotry_store_renew(store, NULL, 0, S("o"), 1, 1000, &record, &ttl, &err));
    FAILS_NULL(gotry_store_renew(store, S("k"), S("o"), 1, 1000, &record, NULL, &err));
    FAILS_NULL(gotry_store_release(store, S("k"), S("o"), 1, NULL, &err));
    FAILS_NULL(gotry_store_release(NULL, S("k"), S("o"), 1, &record, &err));
    FAILS_NULL(gotry_store_mark_forgotten(store, S("k"), NULL, 0, 1, &record, &err));
    FAILS_NULL(gotry_store_now_ms(NULL, &now, &err));
    FAILS_NULL(gotry_store_now_ms(store, NULL, &err));
    STATUS(gotry_record_view(NULL, &view), GOTRY_STATUS_NULL_ARGUMENT);
    FAILS_NULL(gotry_store_open(NULL, 0, NULL, &store, &err));
    FAILS_NULL(gotry_store_open(path, strlen(path), NULL, NULL, &err));
    FAILS_NULL(gotry_store_close(NULL, &err));

    /* Use after close: a status, never a crash; closing twice is harmless. */
    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    FAILS(gotry_store_read(store, S("k"), &record, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FAILS(gotry_store_acquire(store, S("z"), S("o"), 1000, &record, &ttl, &err),
          GOTRY_STATUS_LEASE_STORE_UNAVAILABLE, "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FAILS(gotry_store_history(store, NULL, 0, &history, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FAILS(gotry_store_list(store, S(""), &list, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    gotry_store_free(store);
    gotry_store_free(NULL);

    /* The data outlived the connection: a fresh open (by URL, system clock) sees it. */
    char url[1100];
    snprintf(url, sizeof url, "sqlite://%s", path);
    STATUS(gotry_store_open_url(url, strlen(url), &store, &err), GOTRY_STATUS_OK);
    STATUS(gotry_store_read(store, S("k"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record != NULL && view_of(record).epoch == 3);
    gotry_record_free(record);
    STATUS(gotry_store_now_ms(store, &now, &err), GOTRY_STATUS_OK);
    CHECK(now > 1600000000000LL);
    gotry_store_free(store);
    FAILS_RANGE(gotry_store_open_url(S("redis://localhost"), &store, &err));
    FAILS_RANGE(gotry_store_open_url(S("nope"), &store, &err));
    FAILS_RANGE(gotry_store_open_url(S("sqlite://"), &store, &err));
    FAILS_RANGE(gotry_store_open_url(S("sqlite:/tmp/a\0b.db"), &store, &err));
    FAILS_NULL(gotry_store_open_url(NULL, 0, &store, &err));
    FAILS_NULL(gotry_store_open_url(S("sqlite:x.db"), NULL, &err));

    /* A file that is not SQLite: a storage error with SQLite's own code name. */
    char junk[1024];
    snprintf(junk, sizeof junk, "%s/not-a-database.db", dir);
    FILE *file = fopen(junk, "w");
    CHECK(file != NULL);
    if (file) {
        for (int i = 0; i < 200; i++) fputs("this is not a database, only text. ", file);
        fclose(file);
    }
    FAILS(gotry_store_open(junk, strlen(junk), NULL, &store, &err), GOTRY_STATUS_STORAGE_ERROR, "SQLITE_NOTADB");
    /* A parent "folder" that is a file: the file system's errno name, as Node gives it. */
    char under_file[1100];
    snprintf(under_file, sizeof under_file, "%s/sub/leases.db", junk);
    FAILS(gotry_store_open(under_file, strlen(under_file), NULL, &store, &err), GOTRY_STATUS_STORAGE_ERROR,
          "ENOTDIR");
    /* A path with a NUL, or not UTF-8, is refused before SQLite sees it. */
    FAILS_RANGE(gotry_store_open(S("/tmp/a\0b"), NULL, &store, &err));
    FAILS_RANGE(gotry_store_open(S("/tmp/\xff.db"), NULL, &store, &err));
    gotry_manual_clock_free(clock);
}

static void check_fenced(GotryStatus got, GotryError **err, GotryFenceReason want, const char *want_key,
                         int64_t epoch, int line) {
    GotryFenceReason reason = (GotryFenceReason)0;
    int64_t got_epoch = 0;
    const char *key = NULL;
    size_t key_len = 0;
    check_status_at(got, GOTRY_STATUS_FENCED, NULL, "fenced call", __FILE__, line);
    check_at(*err != NULL && gotry_error_fence_reason(*err, &reason) == GOTRY_STATUS_OK && reason == want,
             "fence reason", __FILE__, line);
    check_at(*err != NULL && gotry_error_epoch(*err, &got_epoch) == GOTRY_STATUS_OK && got_epoch == epoch,
             "fenced epoch", __FILE__, line);
    check_at(*err != NULL && gotry_error_key(*err, &key, &key_len) == GOTRY_STATUS_OK &&
                 lent_equals(key, key_len, want_key, strlen(want_key)),
             "fenced key", __FILE__, line);
    check_failure(GOTRY_STATUS_FENCED, err, GOTRY_STATUS_FENCED, "GOTRY_TENANT_FENCED", "fenced error", line);
}
#define FENCED(call, reason, key, epoch) check_fenced((call), &err, (reason), (key), (epoch), __LINE__)

static GotryLeaseRef lease_ref(const char *key, size_t key_len, int64_t epoch) {
    GotryLeaseRef ref;
    ref.key = key;
    ref.key_len = key_len;
    ref.epoch = epoch;
    return ref;
}

static void test_renew_batch(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryRecord *record = NULL;
    GotryRenewBatch *batch = NULL;
    int64_t ttl = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/batch.db", dir);
    STATUS(gotry_manual_clock_new(10000, &clock), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);
    STATUS(gotry_store_acquire(store, S("expired"), S("me"), 100, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_manual_clock_set(clock, 10100), GOTRY_STATUS_OK);
    STATUS(gotry_store_acquire(store, S("held"), S("me"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("theirs"), S("them"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_manual_clock_set(clock, 10110), GOTRY_STATUS_OK);

    /* Each lease is answered on its own; one bad key does not sink the others. */
    GotryLeaseRef leases[8];
    leases[0] = lease_ref(S("held"), 1);
    leases[1] = lease_ref(S("expired"), 1);
    leases[2] = lease_ref(S("theirs"), 1);
    leases[3] = lease_ref(S("held"), 0);
    leases[4] = lease_ref(S(""), 1);
    leases[5] = lease_ref(S("never"), 1);
    leases[6] = lease_ref(S("held\xff"), 1);
    leases[7] = lease_ref("held", SIZE_MAX, 1);
    static const GotryStatus expected[8] = {
        GOTRY_STATUS_OK,               /* held by me */
        GOTRY_STATUS_LEASE_LOST,       /* mine, expired */
        GOTRY_STATUS_LEASE_LOST,       /* theirs */
        GOTRY_STATUS_INVALID_ARGUMENT, /* epoch 0 */
        GOTRY_STATUS_INVALID_ARGUMENT, /* empty key */
        GOTRY_STATUS_LEASE_LOST,       /* never acquired */
        GOTRY_STATUS_INVALID_ARGUMENT, /* not UTF-8 */
        GOTRY_STATUS_INVALID_ARGUMENT, /* a length no key can have */
    };
    STATUS(gotry_store_renew_batch(store, S("me"), 2000, leases, 8, &batch, &err), GOTRY_STATUS_OK);
    size_t count = 0;
    STATUS(gotry_renew_batch_len(batch, &count), GOTRY_STATUS_OK);
    CHECK(count == 8);
    for (size_t i = 0; i < 8 && i < count; i++) {
        GotryStatus answer = GOTRY_STATUS_INTERNAL_ERROR;
        STATUS(gotry_renew_batch_status(batch, i, &answer), GOTRY_STATUS_OK);
        CHECK(answer == expected[i]);
        GotryRecordView view;
        const GotryError *refusal = NULL;
        if (answer == GOTRY_STATUS_OK) {
            STATUS(gotry_renew_batch_grant(batch, i, &view, &ttl), GOTRY_STATUS_OK);
            CHECK(LENT_IS(view.key, view.key_len, "held") && view.epoch == 1 && view.lease_until_ms == 12110);
            CHECK(ttl == 2000);
            STATUS(gotry_renew_batch_error(batch, i, &refusal), GOTRY_STATUS_NO_VALUE);
        } else {
            STATUS(gotry_renew_batch_grant(batch, i, &view, &ttl), GOTRY_STATUS_NO_VALUE);
            STATUS(gotry_renew_batch_error(batch, i, &refusal), GOTRY_STATUS_OK);
            const char *code = NULL;
            CHECK(gotry_error_status(refusal) == answer);
            STATUS(gotry_error_code(refusal, &code), GOTRY_STATUS_OK);
            CHECK(strcmp(code, answer == GOTRY_STATUS_LEASE_LOST ? "GOTRY_TENANT_LEASE_LOST" : "ERR_OUT_OF_RANGE") ==
                  0);
        }
    }
    GotryStatus answer;
    GotryRecordView view;
    const GotryError *refusal = NULL;
    STATUS(gotry_renew_batch_status(batch, 8, &answer), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_renew_batch_grant(batch, 8, &view, &ttl), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_renew_batch_error(batch, 8, &refusal), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_renew_batch_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_len(batch, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_status(NULL, 0, &answer), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_status(batch, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_grant(batch, 0, NULL, &ttl), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_grant(batch, 0, &view, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_grant(NULL, 0, &view, &ttl), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_error(batch, 1, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_error(NULL, 1, &refusal), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_renew_batch_free(batch);
    gotry_renew_batch_free(NULL);

    /* One durable renewal was granted, so one was logged; the others' rows are untouched. */
    GotryHistory *history = NULL;
    STATUS(gotry_store_history(store, NULL, 0, &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 4);
    GotryHistoryEntry entry;
    STATUS(gotry_history_get(history, 3, &entry), GOTRY_STATUS_OK);
    CHECK(entry.op == GOTRY_LEASE_OP_RENEW && LENT_IS(entry.key, entry.key_len, "held") && entry.at_ms == 10110);
    gotry_history_free(history);
    STATUS(gotry_store_read(store, S("theirs"), &record, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).lease_until_ms == 11100);
    gotry_record_free(record);

    /* An empty batch is an answer with no entries. */
    batch = NULL;
    STATUS(gotry_store_renew_batch(store, S("me"), 1000, leases, 0, &batch, &err), GOTRY_STATUS_OK);
    STATUS(gotry_renew_batch_len(batch, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    gotry_renew_batch_free(batch);

    /* Failures of the whole call leave *out_batch alone. */
    batch = NULL;
    FAILS_RANGE(gotry_store_renew_batch(store, S("me"), 99, leases, 1, &batch, &err));
    FAILS_RANGE(gotry_store_renew_batch(store, S(""), 1000, leases, 1, &batch, &err));
    FAILS_RANGE(gotry_store_renew_batch(store, S("m\xe9"), 1000, leases, 1, &batch, &err));
    FAILS_RANGE(gotry_store_renew_batch(store, S("me"), 1000, leases, SIZE_MAX, &batch, &err));
    FAILS_NULL(gotry_store_renew_batch(NULL, S("me"), 1000, leases, 1, &batch, &err));
    FAILS_NULL(gotry_store_renew_batch(store, NULL, 2, 1000, leases, 1, &batch, &err));
    FAILS_NULL(gotry_store_renew_batch(store, S("me"), 1000, NULL, 0, &batch, &err));
    FAILS_NULL(gotry_store_renew_batch(store, S("me"), 1000, leases, 1, NULL, &err));
    leases[1] = lease_ref(NULL, 4, 1);
    FAILS_NULL(gotry_store_renew_batch(store, S("me"), 1000, leases, 2, &batch, &err));
    CHECK(batch == NULL);
    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    FAILS(gotry_store_renew_batch(store, S("me"), 1000, leases, 1, &batch, &err),
          GOTRY_STATUS_LEASE_STORE_UNAVAILABLE, "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    gotry_store_free(store);
    gotry_manual_clock_free(clock);
}

/* What a keeper told its callback. */
#define MAX_EVENTS 32
typedef struct Recorder {
    int count;
    GotryKeeperEventKind kinds[MAX_EVENTS];
    char keys[MAX_EVENTS][16];
    int64_t epochs[MAX_EVENTS];
    GotryStatus errors[MAX_EVENTS]; /* the lent error's status; OK when there is none */
    size_t leases[MAX_EVENTS];
    GotryKeeper *keeper;     /* set: the callback tries to tick it, which must be refused */
    GotryStatus tick_inside; /* what that try returned */
} Recorder;

static void record_event(void *user_data, const GotryKeeperEvent *event) {
    Recorder *recorder = (Recorder *)user_data;
    if (recorder->count >= MAX_EVENTS) return;
    int i = recorder->count++;
    recorder->kinds[i] = event->kind;
    snprintf(recorder->keys[i], sizeof recorder->keys[i], "%.*s", (int)event->key_len,
             event->key ? event->key : "");
    recorder->epochs[i] = event->epoch;
    recorder->errors[i] = event->error ? gotry_error_status(event->error) : GOTRY_STATUS_OK;
    recorder->leases[i] = event->leases;
    if (recorder->keeper != NULL) {
        GotryTickReport report;
        recorder->tick_inside = gotry_keeper_tick(recorder->keeper, &report, NULL);
        recorder->keeper = NULL;
    }
}

/* How many recorded events, from `from` on, are of `kind` (and about `key`, when given). */
static int events_of(const Recorder *recorder, int from, GotryKeeperEventKind kind, const char *key) {
    int n = 0;
    for (int i = from; i < recorder->count; i++)
        if (recorder->kinds[i] == kind && (key == NULL || strcmp(recorder->keys[i], key) == 0)) n++;
    return n;
}

/* Checks a shutdown report against the keys and outcome expected, in order; frees it. */
static void check_shutdown(GotryShutdownReport *report, const char *const *keys, int count,
                           GotryShutdownOutcome outcome, GotryStatus error, int line) {
    size_t len = 0;
    check_at(gotry_shutdown_report_len(report, &len) == GOTRY_STATUS_OK && len == (size_t)count,
             "shutdown report length", __FILE__, line);
    for (int i = 0; i < count && (size_t)i < len; i++) {
        GotryShutdownEntry entry;
        check_at(gotry_shutdown_report_get(report, (size_t)i, &entry) == GOTRY_STATUS_OK &&
                     lent_equals(entry.key, entry.key_len, keys[i], strlen(keys[i])) && entry.outcome == outcome &&
                     (error == GOTRY_STATUS_OK ? entry.error == NULL
                                               : entry.error != NULL && gotry_error_status(entry.error) == error),
                 "shutdown report entry", __FILE__, line);
    }
    GotryShutdownEntry entry;
    check_at(gotry_shutdown_report_get(report, len, &entry) == GOTRY_STATUS_INVALID_ARGUMENT,
             "shutdown report index past the end", __FILE__, line);
    gotry_shutdown_report_free(report);
}

static void test_keeper(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryKeeper *keeper = NULL;
    GotryLease *a = NULL;
    GotryLease *b = NULL;
    GotryLease *handle = NULL;
    GotryTickReport report;
    Recorder recorder;
    memset(&recorder, 0, sizeof recorder);
    char path[1024];
    snprintf(path, sizeof path, "%s/keeper.db", dir);
    STATUS(gotry_manual_clock_new(0, &clock), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);

    GotryKeeperOptions options;
    STATUS(gotry_keeper_options_default(&options), GOTRY_STATUS_OK);
    CHECK(options.renew_fraction > 0.333 && options.renew_fraction < 0.334 && options.max_batch == 1000 &&
          !options.without_thread);
    STATUS(gotry_keeper_options_default(NULL), GOTRY_STATUS_NULL_ARGUMENT);
    /* Refused settings: renewing after the fence, empty batches, TTL and margin out of range. */
    options.renew_fraction = 0.95;
    FAILS_RANGE(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, record_event, &recorder,
                                   &keeper, &err));
    options.renew_fraction = 1.0 / 3.0;
    options.max_batch = 0;
    FAILS_RANGE(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    options.max_batch = 1000;
    options.without_thread = true;
    FAILS_RANGE(gotry_keeper_start(store, S("replica-k"), 50, 0, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_RANGE(gotry_keeper_start(store, S("replica-k"), 3000, 3000, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_RANGE(gotry_keeper_start(store, S(""), 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_RANGE(gotry_keeper_start(store, S("r\xff"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_NULL(gotry_keeper_start(NULL, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_NULL(gotry_keeper_start(store, NULL, 1, 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_NULL(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, NULL, &err));
    CHECK(keeper == NULL);

    /* ttl 3000, margin 300, a renewal every 1000 ms, rounds only when ticked. */
    STATUS(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, record_event, &recorder, &keeper,
                              &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("ka"), &a, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kb"), &b, &err), GOTRY_STATUS_OK);
    FAILS(gotry_keeper_acquire(keeper, S("ka"), &handle, &err), GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");
    FAILS_RANGE(gotry_keeper_acquire(keeper, S("k\xff"), &handle, &err));
    size_t count = 0;
    STATUS(gotry_keeper_len(keeper, &count), GOTRY_STATUS_OK);
    CHECK(count == 2);
    STATUS(gotry_keeper_get(keeper, S("ka"), &handle, &err), GOTRY_STATUS_OK);
    int64_t epoch = 0;
    CHECK(handle != NULL && gotry_lease_epoch(handle, &epoch) == GOTRY_STATUS_OK && epoch == 1);
    gotry_lease_free(handle); /* a handle's free does not stop the keeping */
    STATUS(gotry_keeper_get(keeper, S("nope"), &handle, &err), GOTRY_STATUS_OK);
    CHECK(handle == NULL);

    /* Nothing due yet. */
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.batches == 0 && report.renewed == 0 && report.has_next_due && report.next_due_ms == 1000.0);
    /* Both due: one batch renews both, and their fences move. */
    STATUS(gotry_manual_clock_set(clock, 1000), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.batches == 1 && report.renewed == 2 && report.lost == 0 && report.failed == 0);
    CHECK(report.has_next_due && report.next_due_ms == 2000.0);
    double remaining = 0;
    STATUS(gotry_lease_remaining_ms(a, &remaining, &err), GOTRY_STATUS_OK);
    CHECK(remaining == 2700.0);
    CHECK(recorder.count == 0);

    /* Past the fences (3700) but before the store's expiry (4000): fenced locally, then the
     * batch resumes both; the callback's own tick is refused. */
    STATUS(gotry_manual_clock_set(clock, 3750), GOTRY_STATUS_OK);
    recorder.keeper = keeper;
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.renewed == 2);
    CHECK(recorder.count == 4 && events_of(&recorder, 0, GOTRY_KEEPER_EVENT_KIND_FENCED_LOCALLY, NULL) == 2 &&
          events_of(&recorder, 0, GOTRY_KEEPER_EVENT_KIND_RESUMED, NULL) == 2);
    CHECK(recorder.kinds[0] == GOTRY_KEEPER_EVENT_KIND_FENCED_LOCALLY &&
          recorder.kinds[3] == GOTRY_KEEPER_EVENT_KIND_RESUMED);
    CHECK(events_of(&recorder, 0, GOTRY_KEEPER_EVENT_KIND_RESUMED, "ka") == 1 && recorder.epochs[3] == 1 &&
          recorder.errors[3] == GOTRY_STATUS_OK && recorder.leases[3] == 0);
    CHECK(recorder.tick_inside == GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_lease_assert_held(a, &err), GOTRY_STATUS_OK);

    /* Both run out in the store (6750); another replica takes kb: both are lost. */
    STATUS(gotry_manual_clock_set(clock, 6800), GOTRY_STATUS_OK);
    GotryRecord *record = NULL;
    int64_t ttl = 0;
    STATUS(gotry_store_acquire(store, S("kb"), S("intruder"), 3000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    int before = recorder.count;
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.lost == 2 && report.renewed == 0);
    CHECK(events_of(&recorder, before, GOTRY_KEEPER_EVENT_KIND_LOST, "ka") == 1 &&
          events_of(&recorder, before, GOTRY_KEEPER_EVENT_KIND_LOST, "kb") == 1);
    for (int i = before; i < recorder.count; i++)
        if (recorder.kinds[i] == GOTRY_KEEPER_EVENT_KIND_LOST)
            CHECK(recorder.errors[i] == GOTRY_STATUS_LEASE_LOST && recorder.epochs[i] == 1);
    STATUS(gotry_keeper_len(keeper, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    FENCED(gotry_lease_assert_held(a, &err), GOTRY_FENCE_REASON_LEASE_LOST, "ka", 1);
    gotry_lease_free(a);
    gotry_lease_free(b);

    /* Removed: released, and no longer kept. */
    STATUS(gotry_keeper_acquire(keeper, S("kc"), &a, &err), GOTRY_STATUS_OK);
    bool removed = false;
    STATUS(gotry_keeper_remove(keeper, S("kc"), &removed, &err), GOTRY_STATUS_OK);
    CHECK(removed);
    STATUS(gotry_keeper_remove(keeper, S("kc"), &removed, &err), GOTRY_STATUS_OK);
    CHECK(!removed);
    FENCED(gotry_lease_assert_held(a, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "kc", 1);
    gotry_lease_free(a);

    /* The store goes away: the round fails as a whole, and says so. */
    STATUS(gotry_keeper_acquire(keeper, S("kd"), &a, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("ke"), &b, &err), GOTRY_STATUS_OK);
    STATUS(gotry_manual_clock_set(clock, 7800), GOTRY_STATUS_OK);
    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    before = recorder.count;
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.batches == 1 && report.failed == 2 && report.renewed == 0);
    CHECK(recorder.count == before + 1 && recorder.kinds[before] == GOTRY_KEEPER_EVENT_KIND_RENEW_FAILED &&
          recorder.leases[before] == 2 && recorder.errors[before] == GOTRY_STATUS_LEASE_STORE_UNAVAILABLE &&
          recorder.keys[before][0] == '\0');
    /* Shutdown cannot tell the store: the gates close and the leases run out. */
    GotryShutdownReport *shutdown = NULL;
    STATUS(gotry_keeper_shutdown(keeper, 1000, &shutdown), GOTRY_STATUS_OK);
    static const char *const failed_keys[2] = {"kd", "ke"};
    check_shutdown(shutdown, failed_keys, 2, GOTRY_SHUTDOWN_OUTCOME_FAILED, GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
                   __LINE__);
    FENCED(gotry_lease_assert_held(a, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "kd", 1);
    /* Shut down: the handle answers, nothing more is kept, the callback is silent. */
    before = recorder.count;
    FAILS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FAILS(gotry_keeper_acquire(keeper, S("kf"), &handle, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    STATUS(gotry_keeper_shutdown(keeper, 1000, &shutdown), GOTRY_STATUS_OK);
    check_shutdown(shutdown, NULL, 0, GOTRY_SHUTDOWN_OUTCOME_RELEASED, GOTRY_STATUS_OK, __LINE__);
    gotry_keeper_free(keeper);
    CHECK(recorder.count == before);
    gotry_lease_free(a);
    gotry_lease_free(b);
    gotry_store_free(store);

    /* A deadline already passed: nothing is released; a deadline ahead: everything is. */
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kf"), &a, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_shutdown(keeper, 0, &shutdown), GOTRY_STATUS_OK);
    static const char *const timed_out_keys[1] = {"kf"};
    check_shutdown(shutdown, timed_out_keys, 1, GOTRY_SHUTDOWN_OUTCOME_TIMED_OUT, GOTRY_STATUS_OK, __LINE__);
    STATUS(gotry_lease_assert_held(a, &err), GOTRY_STATUS_OK); /* not released: runs out */
    gotry_lease_free(a);
    gotry_keeper_free(keeper);
    STATUS(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kh"), &a, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kg"), &b, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_shutdown(keeper, 1000, &shutdown), GOTRY_STATUS_OK);
    static const char *const released_keys[2] = {"kg", "kh"};
    check_shutdown(shutdown, released_keys, 2, GOTRY_SHUTDOWN_OUTCOME_RELEASED, GOTRY_STATUS_OK, __LINE__);
    FENCED(gotry_lease_assert_held(b, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "kg", 1);
    gotry_lease_free(a);
    gotry_lease_free(b);

    /* NULL anywhere a pointer is required. */
    bool flag = false;
    FAILS_NULL(gotry_keeper_acquire(NULL, S("k"), &a, &err));
    FAILS_NULL(gotry_keeper_acquire(keeper, NULL, 1, &a, &err));
    FAILS_NULL(gotry_keeper_acquire(keeper, S("k"), NULL, &err));
    FAILS_NULL(gotry_keeper_get(NULL, S("k"), &a, &err));
    FAILS_NULL(gotry_keeper_get(keeper, S("k"), NULL, &err));
    FAILS_NULL(gotry_keeper_remove(NULL, S("k"), &flag, &err));
    FAILS_NULL(gotry_keeper_remove(keeper, S("k"), NULL, &err));
    FAILS_NULL(gotry_keeper_tick(NULL, &report, &err));
    FAILS_NULL(gotry_keeper_tick(keeper, NULL, &err));
    STATUS(gotry_keeper_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_keeper_len(keeper, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_keeper_shutdown(NULL, 0, &shutdown), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_keeper_shutdown(keeper, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_shutdown_report_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    GotryShutdownEntry entry;
    STATUS(gotry_shutdown_report_get(NULL, 0, &entry), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_keeper_free(keeper);
    gotry_keeper_free(NULL);
    gotry_shutdown_report_free(NULL);
    gotry_store_free(store);

    CHECK(strcmp(gotry_keeper_event_kind_name(GOTRY_KEEPER_EVENT_KIND_LOST), "lost") == 0);
    CHECK(strcmp(gotry_keeper_event_kind_name(GOTRY_KEEPER_EVENT_KIND_FENCED_LOCALLY), "fenced_locally") == 0);
    CHECK(strcmp(gotry_keeper_event_kind_name(GOTRY_KEEPER_EVENT_KIND_RESUMED), "resumed") == 0);
    CHECK(strcmp(gotry_keeper_event_kind_name(GOTRY_KEEPER_EVENT_KIND_RENEW_FAILED), "renew_failed") == 0);
    CHECK(gotry_keeper_event_kind_name(0) == NULL && gotry_keeper_event_kind_name(5) == NULL);
    gotry_manual_clock_free(clock);
}

/* A keeper on its own thread and the system clocks renews without being asked. */
static void test_keeper_thread(const char *dir) {
    GotryStore *store = NULL;
    GotryKeeper *keeper = NULL;
    GotryLease *lease = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/keeper-thread.db", dir);
    STATUS(gotry_store_open(path, strlen(path), NULL, &store, NULL), GOTRY_STATUS_OK);
    /* A renewal every 100 ms; NULL options are the defaults (with a thread). */
    STATUS(gotry_keeper_start(store, S("replica-t"), 300, 50, NULL, NULL, NULL, NULL, &keeper, NULL),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kt"), &lease, NULL), GOTRY_STATUS_OK);
    /* Wait for three renewals in the log; the cap only keeps a broken keeper from hanging
     * the run, it is not what the test measures. */
    size_t renewals = 0;
    for (int waited_ms = 0; renewals < 3 && waited_ms < 60000; waited_ms += 20) {
        struct timespec pause = {0, 20 * 1000000L};
        nanosleep(&pause, NULL);
        GotryHistory *history = NULL;
        size_t len = 0;
        renewals = 0;
        if (gotry_store_history(store, S("kt"), &history, NULL) == GOTRY_STATUS_OK &&
            gotry_history_len(history, &len) == GOTRY_STATUS_OK) {
            for (size_t i = 0; i < len; i++) {
                GotryHistoryEntry entry;
                if (gotry_history_get(history, i, &entry) == GOTRY_STATUS_OK && entry.op == GOTRY_LEASE_OP_RENEW)
                    renewals++;
            }
        }
        gotry_history_free(history);
    }
    CHECK(renewals >= 3);
    GotryShutdownReport *report = NULL;
    STATUS(gotry_keeper_shutdown(keeper, 5000, &report), GOTRY_STATUS_OK);
    static const char *const released[1] = {"kt"};
    check_shutdown(report, released, 1, GOTRY_SHUTDOWN_OUTCOME_RELEASED, GOTRY_STATUS_OK, __LINE__);
    gotry_keeper_free(keeper);
    gotry_lease_free(lease);
    gotry_store_free(store);
}


static void test_lease(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryLease *lease = NULL;
    GotryLease *other = NULL;
    GotryRecord *record = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/tenant-leases.db", dir);
    STATUS(gotry_manual_clock_new(50000, &clock), GOTRY_STATUS_OK);
    /* One manual clock serves as the store's wall clock and the holders' monotonic clock. */
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);

    STATUS(gotry_lease_acquire(store, S("acme/t-1"), S("replica-a"), 1000, 100, clock, &lease, &err),
           GOTRY_STATUS_OK);
    int64_t epoch = 0;
    int64_t floor = -1;
    double remaining = 0;
    bool held = false;
    const char *text = NULL;
    size_t text_len = 0;
    STATUS(gotry_lease_epoch(lease, &epoch), GOTRY_STATUS_OK);
    CHECK(epoch == 1);
    STATUS(gotry_lease_forgotten_at_epoch(lease, &floor), GOTRY_STATUS_OK);
    CHECK(floor == 0);
    STATUS(gotry_lease_key(lease, &text, &text_len), GOTRY_STATUS_OK);
    CHECK(LENT_IS(text, text_len, "acme/t-1"));
    STATUS(gotry_lease_replica_id(lease, &text, &text_len), GOTRY_STATUS_OK);
    CHECK(LENT_IS(text, text_len, "replica-a"));
    STATUS(gotry_lease_remaining_ms(lease, &remaining, &err), GOTRY_STATUS_OK);
    CHECK(remaining == 900.0);
    STATUS(gotry_lease_is_held(lease, &held), GOTRY_STATUS_OK);
    CHECK(held);
    STATUS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_OK);
    CHECK(err == NULL);

    /* A second holder is refused with the first one's record. */
    STATUS(gotry_lease_acquire(store, S("acme/t-1"), S("replica-b"), 1000, 100, clock, &other, &err),
           GOTRY_STATUS_LEASE_HELD);
    GotryRecordView view;
    STATUS(gotry_error_record(err, &view), GOTRY_STATUS_OK);
    CHECK(LENT_IS(view.owner, view.owner_len, "replica-a") && view.epoch == 1 && view.lease_until_ms == 51000);
    ERROR_IS(GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");
    CHECK(other == NULL);
    FAILS_RANGE(gotry_lease_acquire(store, S("acme/t-2"), S("r"), 1000, 1000, clock, &other, &err));
    FAILS_RANGE(gotry_lease_acquire(store, S("acme/t-2"), S("r"), 1000, -1, clock, &other, &err));
    FAILS_RANGE(gotry_lease_acquire(store, S("acme/t-2"), S("r"), 50, 0, clock, &other, &err));
    FAILS_RANGE(gotry_lease_acquire(store, S("acme/t-2"), S("r\xff"), 1000, 0, clock, &other, &err));
    FAILS_RANGE(gotry_lease_acquire(store, S(""), S("r"), 1000, 0, clock, &other, &err));
    FAILS_NULL(gotry_lease_acquire(NULL, S("acme/t-2"), S("r"), 1000, 0, clock, &other, &err));
    FAILS_NULL(gotry_lease_acquire(store, NULL, 8, S("r"), 1000, 0, clock, &other, &err));
    FAILS_NULL(gotry_lease_acquire(store, S("acme/t-2"), NULL, 1, 1000, 0, clock, &other, &err));
    FAILS_NULL(gotry_lease_acquire(store, S("acme/t-2"), S("r"), 1000, 0, clock, NULL, &err));

    /* Renewal moves the fence to (time sent + ttl - margin). */
    STATUS(gotry_manual_clock_advance(clock, 850, NULL, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_manual_clock_set(clock, 50850), GOTRY_STATUS_OK);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, NULL), GOTRY_STATUS_OK);
    CHECK(remaining == 50.0);
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, NULL), GOTRY_STATUS_OK);
    CHECK(remaining == 900.0);

    /* The local fence passes before the store's expiry: the gate closes... */
    STATUS(gotry_manual_clock_set(clock, 51750), GOTRY_STATUS_OK);
    FENCED(gotry_lease_assert_held(lease, &err), GOTRY_FENCE_REASON_LEASE_EXPIRED_LOCALLY, "acme/t-1", 1);
    STATUS(gotry_lease_is_held(lease, &held), GOTRY_STATUS_OK);
    CHECK(!held);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, NULL), GOTRY_STATUS_OK);
    CHECK(remaining == 0.0);
    FENCED(gotry_lease_mark_forgotten(lease, &record, &err), GOTRY_FENCE_REASON_LEASE_EXPIRED_LOCALLY, "acme/t-1", 1);
    /* ...and a renewal the store still grants (same epoch: nobody held it between) resumes it. */
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_mark_forgotten(lease, &record, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).forgotten_at_epoch == 1 && view_of(record).epoch == 1);
    gotry_record_free(record);

    /* Release: the gate closes first, the store lets the next holder in at once. */
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    FENCED(gotry_lease_assert_held(lease, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "acme/t-1", 1);
    FENCED(gotry_lease_renew(lease, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "acme/t-1", 1);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(store, S("acme/t-1"), S("replica-b"), 1000, 100, clock, &other, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_lease_epoch(other, &epoch), GOTRY_STATUS_OK);
    CHECK(epoch == 2);
    STATUS(gotry_lease_forgotten_at_epoch(other, &floor), GOTRY_STATUS_OK);
    CHECK(floor == 1);
    gotry_lease_free(lease);
    lease = other;
    other = NULL;

    /* Lost: the store's lease runs out and someone else takes the tenant. */
    int64_t now = 0;
    STATUS(gotry_manual_clock_advance(clock, 1000, &now, &err), GOTRY_STATUS_OK);
    CHECK(now == 52750);
    STATUS(gotry_lease_acquire(store, S("acme/t-1"), S("replica-c"), 1000, 100, clock, &other, &err),
           GOTRY_STATUS_OK);
    FAILS(gotry_lease_renew(lease, &err), GOTRY_STATUS_LEASE_LOST, "GOTRY_TENANT_LEASE_LOST");
    FENCED(gotry_lease_assert_held(lease, &err), GOTRY_FENCE_REASON_LEASE_LOST, "acme/t-1", 2);
    FENCED(gotry_lease_renew(lease, &err), GOTRY_FENCE_REASON_LEASE_LOST, "acme/t-1", 2);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK); /* after a loss: nothing to do */
    gotry_lease_free(lease);
    lease = other;
    other = NULL;

    /* The lease keeps the connection after the store handle is freed... */
    gotry_store_free(store);
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    /* ...and the tenure ends with the store unreachable: release reports it, the gate is closed. */
    GotryStore *second = NULL;
    STATUS(gotry_store_open(path, strlen(path), clock, &second, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(second, S("acme/t-9"), S("replica-a"), 1000, 0, clock, &other, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_store_close(second, &err), GOTRY_STATUS_OK);
    FAILS(gotry_lease_renew(other, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    STATUS(gotry_lease_assert_held(other, &err), GOTRY_STATUS_OK); /* the fence still stands */
    FAILS(gotry_lease_release(other, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FENCED(gotry_lease_assert_held(other, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "acme/t-9", 1);
    gotry_lease_free(other);
    gotry_store_free(second);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    gotry_lease_free(lease);

    /* System clocks by default (NULL clock for both). */
    GotryStore *system_store = NULL;
    STATUS(gotry_store_open(path, strlen(path), NULL, &system_store, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(system_store, S("acme/t-sys"), S("replica-a"), 60000, 1000, NULL, &lease, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, &err), GOTRY_STATUS_OK);
    CHECK(remaining > 0.0 && remaining <= 59000.0);
    STATUS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    gotry_lease_free(lease);
    gotry_store_free(system_store);

    /* NULL receivers and out-parameters. */
    FAILS_NULL(gotry_lease_assert_held(NULL, &err));
    FAILS_NULL(gotry_lease_renew(NULL, &err));
    FAILS_NULL(gotry_lease_release(NULL, &err));
    FAILS_NULL(gotry_lease_mark_forgotten(NULL, &record, &err));
    FAILS_NULL(gotry_lease_remaining_ms(NULL, &remaining, &err));
    STATUS(gotry_lease_is_held(NULL, &held), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_lease_epoch(NULL, &epoch), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_lease_forgotten_at_epoch(NULL, &floor), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_lease_key(NULL, &text, &text_len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_lease_replica_id(NULL, &text, &text_len), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_lease_free(NULL);
    gotry_manual_clock_free(clock);
}

/* One of several threads sharing a store and a lease, as the header says they may. */
typedef struct Worker {
    GotryStore *store;
    GotryLease *lease;
    int index;
    int failures; /* counted here: the global counters are not shared between threads */
} Worker;

#define WORKERS 4
#define ROUNDS 10

static void *work(void *arg) {
    Worker *worker = (Worker *)arg;
    char key[32];
    snprintf(key, sizeof key, "thread-%d", worker->index);
    for (int round = 1; round <= ROUNDS; round++) {
        GotryRecord *record = NULL;
        GotryRecordView view;
        int64_t ttl = 0;
        worker->failures += gotry_lease_assert_held(worker->lease, NULL) != GOTRY_STATUS_OK;
        worker->failures += gotry_lease_renew(worker->lease, NULL) != GOTRY_STATUS_OK;
        worker->failures += gotry_store_acquire(worker->store, key, strlen(key), S("worker"), 60000, &record, &ttl,
                                                NULL) != GOTRY_STATUS_OK;
        worker->failures += gotry_record_view(record, &view) != GOTRY_STATUS_OK || view.epoch != round;
        gotry_record_free(record);
        record = NULL;
        worker->failures += gotry_store_release(worker->store, key, strlen(key), S("worker"), round, &record,
                                                NULL) != GOTRY_STATUS_OK;
        gotry_record_free(record);
    }
    return NULL;
}

static void test_threads(const char *dir) {
    GotryStore *store = NULL;
    GotryLease *lease = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/threads.db", dir);
    STATUS(gotry_store_open(path, strlen(path), NULL, &store, NULL), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(store, S("acme/t-shared"), S("replica-a"), 60000, 1000, NULL, &lease, NULL),
           GOTRY_STATUS_OK);
    Worker workers[WORKERS];
    pthread_t threads[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        workers[i].store = store;
        workers[i].lease = lease;
        workers[i].index = i;
        workers[i].failures = 0;
        CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK(workers[i].failures == 0);
    }
    /* Every grant of every thread is in the log: one acquire and the renewals of the lease,
     * an acquire and a release per round per thread. */
    GotryHistory *history = NULL;
    size_t count = 0;
    STATUS(gotry_store_history(store, NULL, 0, &history, NULL), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 1 + WORKERS * ROUNDS + WORKERS * ROUNDS * 2);
    gotry_history_free(history);
    STATUS(gotry_lease_release(lease, NULL), GOTRY_STATUS_OK);
    gotry_lease_free(lease);
    gotry_store_free(store);
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

#ifdef __cplusplus
/* What a C++ host writes: every handle owned by a unique_ptr whose deleter is its _free. */
struct ErrorFree {
    void operator()(GotryError *e) const { gotry_error_free(e); }
};
struct StoreFree {
    void operator()(GotryStore *s) const { gotry_store_free(s); }
};
struct LeaseFree {
    void operator()(GotryLease *l) const { gotry_lease_free(l); }
};
struct RecordFree {
    void operator()(GotryRecord *r) const { gotry_record_free(r); }
};

static void test_cpp_ownership(const char *dir) {
    std::string path = std::string(dir) + "/raii.db";
    GotryStore *raw_store = nullptr;
    GotryError *raw_error = nullptr;
    STATUS(gotry_store_open(path.data(), path.size(), nullptr, &raw_store, &raw_error), GOTRY_STATUS_OK);
    std::unique_ptr<GotryStore, StoreFree> store(raw_store);
    GotryLease *raw_lease = nullptr;
    STATUS(gotry_lease_acquire(store.get(), S("acme/t-raii"), S("cpp"), 5000, 0, nullptr, &raw_lease, nullptr),
           GOTRY_STATUS_OK);
    std::unique_ptr<GotryLease, LeaseFree> lease(raw_lease);
    GotryStatus refused =
        gotry_lease_acquire(store.get(), S("acme/t-raii"), S("other"), 5000, 0, nullptr, &raw_lease, &raw_error);
    std::unique_ptr<GotryError, ErrorFree> error(raw_error);
    CHECK(refused == GOTRY_STATUS_LEASE_HELD && error != nullptr && raw_lease == lease.get());
    GotryRecord *raw_record = nullptr;
    STATUS(gotry_lease_mark_forgotten(lease.get(), &raw_record, nullptr), GOTRY_STATUS_OK);
    std::unique_ptr<GotryRecord, RecordFree> record(raw_record);
    CHECK(view_of(record.get()).forgotten_at_epoch == 1);
    STATUS(gotry_lease_release(lease.get(), nullptr), GOTRY_STATUS_OK);
}
#endif

/* The same store calls on a MySQL/MariaDB server, reached by URL. */
static void test_mysql(const char *url) {
    GotryError *err = NULL;
    GotryStore *store = NULL;
    GotryRecord *record = NULL;
    int64_t ttl = 0;
    STATUS(gotry_store_open_url(url, strlen(url), &store, &err), GOTRY_STATUS_OK);
    if (store == NULL) {
        gotry_error_free(err);
        return;
    }
    STATUS(gotry_store_acquire(store, S("k"), S("a"), 10000, &record, &ttl, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).epoch == 1 && ttl == 10000);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("k"), S("b"), 10000, &record, &ttl, &err), GOTRY_STATUS_LEASE_HELD);
    GotryRecordView view;
    STATUS(gotry_error_record(err, &view), GOTRY_STATUS_OK);
    CHECK(LENT_IS(view.owner, view.owner_len, "a") && view.epoch == 1);
    ERROR_IS(GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");
    STATUS(gotry_store_renew(store, S("k"), S("a"), 1, 10000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    GotryLeaseRef leases[2];
    leases[0] = lease_ref(S("k"), 1);
    leases[1] = lease_ref(S("never"), 1);
    GotryRenewBatch *batch = NULL;
    GotryStatus answers[2] = {GOTRY_STATUS_INTERNAL_ERROR, GOTRY_STATUS_INTERNAL_ERROR};
    STATUS(gotry_store_renew_batch(store, S("a"), 10000, leases, 2, &batch, &err), GOTRY_STATUS_OK);
    STATUS(gotry_renew_batch_status(batch, 0, &answers[0]), GOTRY_STATUS_OK);
    STATUS(gotry_renew_batch_status(batch, 1, &answers[1]), GOTRY_STATUS_OK);
    CHECK(answers[0] == GOTRY_STATUS_OK && answers[1] == GOTRY_STATUS_LEASE_LOST);
    gotry_renew_batch_free(batch);
    STATUS(gotry_store_mark_forgotten(store, S("k"), S("a"), 1, &record, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).forgotten_at_epoch == 1);
    gotry_record_free(record);
    STATUS(gotry_store_release(store, S("k"), S("a"), 1, &record, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("k"), S("b"), 10000, &record, &ttl, &err), GOTRY_STATUS_OK);
    CHECK(view_of(record).epoch == 2 && view_of(record).forgotten_at_epoch == 1);
    gotry_record_free(record);
    GotryHistory *history = NULL;
    size_t count = 0;
    STATUS(gotry_store_history(store, S("k"), &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    static const GotryLeaseOp ops[6] = {GOTRY_LEASE_OP_ACQUIRE, GOTRY_LEASE_OP_RENEW,   GOTRY_LEASE_OP_RENEW,
                                        GOTRY_LEASE_OP_FORGET,  GOTRY_LEASE_OP_RELEASE, GOTRY_LEASE_OP_ACQUIRE};
    CHECK(count == 6);
    for (size_t i = 0; i < 6 && i < count; i++) {
        GotryHistoryEntry entry;
        CHECK(gotry_history_get(history, i, &entry) == GOTRY_STATUS_OK && entry.op == ops[i]);
    }
    gotry_history_free(history);
    GotryRecordList *list = NULL;
    STATUS(gotry_store_list(store, S(""), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_record_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 1);
    gotry_record_list_free(list);

    /* A holder and a keeper on the server's clock. */
    GotryLease *lease = NULL;
    STATUS(gotry_lease_acquire(store, S("t"), S("r"), 10000, 1000, NULL, &lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    FENCED(gotry_lease_assert_held(lease, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "t", 1);
    gotry_lease_free(lease);
    GotryKeeperOptions options;
    STATUS(gotry_keeper_options_default(&options), GOTRY_STATUS_OK);
    options.without_thread = true;
    GotryKeeper *keeper = NULL;
    STATUS(gotry_keeper_start(store, S("r"), 10000, 1000, &options, NULL, NULL, NULL, &keeper, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kk"), &lease, &err), GOTRY_STATUS_OK);
    GotryShutdownReport *shutdown = NULL;
    STATUS(gotry_keeper_shutdown(keeper, 5000, &shutdown), GOTRY_STATUS_OK);
    static const char *const released[1] = {"kk"};
    check_shutdown(shutdown, released, 1, GOTRY_SHUTDOWN_OUTCOME_RELEASED, GOTRY_STATUS_OK, __LINE__);
    gotry_keeper_free(keeper);
    gotry_lease_free(lease);

    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    FAILS(gotry_store_read(store, S("k"), &record, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    gotry_store_free(store);
    store = NULL;
    FAILS_RANGE(gotry_store_open_url(S("mysql://root@127.0.0.1:3306/test?bogus=1"), &store, &err));
    FAILS(gotry_store_open_url(S("mysql://root@127.0.0.1:1/test?timeout_ms=200"), &store, &err),
          GOTRY_STATUS_LEASE_STORE_UNAVAILABLE, "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    CHECK(store == NULL);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s SCRATCH_DIR [MYSQL_URL]\n", argv[0]);
        return 2;
    }
    if (argc == 3) {
        test_mysql(argv[2]);
        printf("api_test (%s, MySQL): %d checks, %d failed\n", LANGUAGE, checks, failures);
        return failures == 0 ? 0 : 1;
    }
    test_status_table();
    test_version();
    test_derivation();
    test_validators();
    test_paths();
    test_manual_clock();
    test_store(argv[1]);
    test_renew_batch(argv[1]);
    test_keeper(argv[1]);
    test_keeper_thread(argv[1]);
    test_lease(argv[1]);
    test_threads(argv[1]);
    test_error_accessors();
#ifdef __cplusplus
    test_cpp_ownership(argv[1]);
#endif
    printf("api_test (%s): %d checks, %d failed\n", LANGUAGE, checks, failures);
    return failures == 0 ? 0 : 1;
}
