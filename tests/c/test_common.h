/*
 * What the C tests share: the checks and their counters, and the files, clocks and tenant
 * names their scenarios are built from. Compiles as C11 and C++17. Every function is static
 * inline, so a program that uses part of it does not warn.
 *
 * STATUS, ERROR_IS and FAILS serve a test whose calls leave their error in a local `err`.
 * The suites of the C API by area (ids_test.c, store_test.c, lease_test.c) also prove every
 * error whole, its code and a message too: they define CHECK_WHOLE_ERRORS before including
 * this file, which makes FAILS and ERROR_IS check that, and STATUS check the status alone.
 */
#ifndef GOTRY_TESTS_TEST_COMMON_H
#define GOTRY_TESTS_TEST_COMMON_H

#include "gotry_tenant_state.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What a suite that compiles both as C11 and as C++17 was built as, for its summary line. */
#ifdef __cplusplus
#define LANGUAGE "C++"
#else
#define LANGUAGE "C"
#endif

/* ---- checks ---- */

static int checks;
static int failures;

static inline void check_at(int ok, const char *what, const char *file, int line) {
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
    }
}
#define CHECK(cond) check_at((cond) ? 1 : 0, #cond, __FILE__, __LINE__)

static inline const char *status_name(int status) {
    const char *name = gotry_status_name(status);
    return name ? name : "(not a status)";
}

/* Prints the error's message too: the first thing wanted when a call fails. */
static inline void check_status_at(GotryStatus got, GotryStatus want, GotryError **err, const char *call,
                                   const char *file, int line) {
    checks++;
    if (got != want) {
        failures++;
        fprintf(stderr, "%s:%d: %s\n    returned %s, expected %s\n", file, line, call, status_name(got),
                status_name(want));
        const char *message = NULL;
        size_t len = 0;
        if (err != NULL && *err != NULL && gotry_error_message(*err, &message, &len) == GOTRY_STATUS_OK)
            fprintf(stderr, "    message: %.*s\n", (int)len, message);
    }
}
#define S(literal) (literal), (sizeof(literal) - 1)

/* The error held in `err` has status `want` and code `code`; frees it and clears `err`. */
static inline void check_error_at(GotryError **err, GotryStatus want, const char *code, const char *file, int line) {
    checks++;
    const char *got_code = NULL;
    if (*err == NULL || gotry_error_status(*err) != want || gotry_error_code(*err, &got_code) != GOTRY_STATUS_OK ||
        strcmp(got_code, code) != 0) {
        failures++;
        fprintf(stderr, "%s:%d: the error is %s with code %s, expected %s\n", file, line,
                *err ? status_name(gotry_error_status(*err)) : "(none)", got_code ? got_code : "(none)", code);
    }
    gotry_error_free(*err);
    *err = NULL;
}

/*
 * A failed call, its error whole: the status is `want`, the error object was created with the
 * same status, the code string is `code` and the message is not empty. Frees the error and
 * clears *err.
 */
static inline void check_failure(GotryStatus got, GotryError **err, GotryStatus want, const char *code,
                                 const char *call, const char *file, int line) {
    check_status_at(got, want, NULL, call, file, line);
    checks++;
    if (*err == NULL) {
        failures++;
        fprintf(stderr, "%s:%d: %s\n    left no error object\n", file, line, call);
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
        fprintf(stderr, "%s:%d: %s\n    error has status %s, code %s, expected %s\n", file, line, call,
                status_name(gotry_error_status(*err)), got_code ? got_code : "(none)", code);
    }
    gotry_error_free(*err);
    *err = NULL;
}

#ifdef CHECK_WHOLE_ERRORS
/* The call must return exactly this status. */
#define STATUS(call, want) check_status_at((call), (want), NULL, #call, __FILE__, __LINE__)
#define ERROR_IS(want, code) check_failure((want), &err, (want), (code), "the error held", __FILE__, __LINE__)
#define FAILS(call, want, code) check_failure((call), &err, (want), (code), #call, __FILE__, __LINE__)
#else
/* The call must return exactly this status (an error it left in `err` is kept for the caller). */
#define STATUS(call, want) check_status_at((call), (want), &err, #call, __FILE__, __LINE__)
#define ERROR_IS(want, code) check_error_at(&err, (want), (code), __FILE__, __LINE__)
#define FAILS(call, want, code)                                                                                \
    do {                                                                                                       \
        STATUS(call, want);                                                                                    \
        ERROR_IS(want, code);                                                                                  \
    } while (0)
#endif
#define FAILS_NULL(call) FAILS(call, GOTRY_STATUS_NULL_ARGUMENT, "GOTRY_STATUS_NULL_ARGUMENT")
#define FAILS_RANGE(call) FAILS(call, GOTRY_STATUS_INVALID_ARGUMENT, "ERR_OUT_OF_RANGE")

/* True when a lent string is exactly `want`, NUL-terminated just after its length. */
static inline int lent_equals(const char *text, size_t len, const char *want, size_t want_len) {
    return text != NULL && len == want_len && memcmp(text, want, len) == 0 && text[len] == '\0';
}
#define LENT_IS(text, len, literal) lent_equals((text), (len), S(literal))

/* The message of the error in `err` contains `part`. */
static inline int message_has(const GotryError *err, const char *part) {
    const char *message = NULL;
    size_t len = 0;
    if (err == NULL || gotry_error_message(err, &message, &len) != GOTRY_STATUS_OK) return 0;
    char copy[4096];
    size_t n = len < sizeof copy - 1 ? len : sizeof copy - 1;
    memcpy(copy, message, n);
    copy[n] = '\0';
    return strstr(copy, part) != NULL;
}

static inline int64_t now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static inline void sleep_ms(long ms) {
    struct timespec pause;
    pause.tv_sec = ms / 1000;
    pause.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&pause, NULL);
}

/* ---- records, fences and shutdowns ---- */

/* Reads a record handle into a view, checking the call. */
static inline GotryRecordView record_view_of(const GotryRecord *record) {
    GotryRecordView view;
    memset(&view, 0, sizeof view);
    check_status_at(gotry_record_view(record, &view), GOTRY_STATUS_OK, NULL, "gotry_record_view(record, &view)",
                    __FILE__, __LINE__);
    return view;
}

/* The call was refused with FENCED, for `want` about `want_key` at `epoch`, its error whole. */
static inline void check_fenced(GotryStatus got, GotryError **err, GotryFenceReason want, const char *want_key,
                                int64_t epoch, const char *file, int line) {
    GotryFenceReason reason = (GotryFenceReason)0;
    int64_t got_epoch = 0;
    const char *key = NULL;
    size_t key_len = 0;
    check_status_at(got, GOTRY_STATUS_FENCED, NULL, "fenced call", file, line);
    check_at(*err != NULL && gotry_error_fence_reason(*err, &reason) == GOTRY_STATUS_OK && reason == want,
             "fence reason", file, line);
    check_at(*err != NULL && gotry_error_epoch(*err, &got_epoch) == GOTRY_STATUS_OK && got_epoch == epoch,
             "fenced epoch", file, line);
    check_at(*err != NULL && gotry_error_key(*err, &key, &key_len) == GOTRY_STATUS_OK &&
                 lent_equals(key, key_len, want_key, strlen(want_key)),
             "fenced key", file, line);
    check_failure(GOTRY_STATUS_FENCED, err, GOTRY_STATUS_FENCED, "GOTRY_TENANT_FENCED", "fenced error", file, line);
}
#define FENCED(call, reason, key, epoch) check_fenced((call), &err, (reason), (key), (epoch), __FILE__, __LINE__)

/* Checks a shutdown report against the keys and outcome expected, in order; frees it. */
static inline void check_shutdown_at(GotryShutdownReport *report, const char *const *keys, int count,
                                     GotryShutdownOutcome outcome, GotryStatus error, const char *file, int line) {
    size_t len = 0;
    check_at(gotry_shutdown_report_len(report, &len) == GOTRY_STATUS_OK && len == (size_t)count,
             "shutdown report length", file, line);
    for (int i = 0; i < count && (size_t)i < len; i++) {
        GotryShutdownEntry entry;
        check_at(gotry_shutdown_report_get(report, (size_t)i, &entry) == GOTRY_STATUS_OK &&
                     lent_equals(entry.key, entry.key_len, keys[i], strlen(keys[i])) && entry.outcome == outcome &&
                     (error == GOTRY_STATUS_OK ? entry.error == NULL
                                               : entry.error != NULL && gotry_error_status(entry.error) == error),
                 "shutdown report entry", file, line);
    }
    GotryShutdownEntry entry;
    check_at(gotry_shutdown_report_get(report, len, &entry) == GOTRY_STATUS_INVALID_ARGUMENT,
             "shutdown report index past the end", file, line);
    gotry_shutdown_report_free(report);
}
#define CHECK_SHUTDOWN(report, keys, count, outcome, error)                                                    \
    check_shutdown_at((report), (keys), (count), (outcome), (error), __FILE__, __LINE__)

/* ---- files and names ---- */

static inline int make_dirs(const char *path) {
    char partial[4096];
    size_t len = strlen(path);
    if (len >= sizeof partial) return -1;
    memcpy(partial, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (partial[i] == '/' || partial[i] == '\0') {
            char saved = partial[i];
            partial[i] = '\0';
            if (mkdir(partial, 0755) != 0 && errno != EEXIST) return -1;
            partial[i] = saved;
        }
    }
    return 0;
}

static inline int exists(const char *path) {
    struct stat info;
    return stat(path, &info) == 0;
}

static inline long long file_size(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 ? (long long)info.st_size : -1;
}

/* Macros rather than constants, so that a test that names its tenants otherwise does not warn. */
#define ORG_KEY ((const uint8_t *)"0123456789abcdef0123456789abcdef")
#define ORG "acme"

typedef struct {
    char tenant[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    char key[GOTRY_LEASE_KEY_BUFFER_LEN];
} Tenant;

static inline Tenant tenant_named(const char *subject) {
    Tenant tenant;
    memset(&tenant, 0, sizeof tenant);
    CHECK(gotry_derive_ledger_tenant_id(ORG_KEY, 32, S("https://idp.example"), subject, strlen(subject),
                                        tenant.tenant, sizeof tenant.tenant, NULL) == GOTRY_STATUS_OK);
    CHECK(gotry_lease_key_for(S(ORG), tenant.tenant, strlen(tenant.tenant), tenant.key, sizeof tenant.key, NULL) ==
          GOTRY_STATUS_OK);
    return tenant;
}

static inline void tenant_root(const char *state_root, const Tenant *tenant, char *out, size_t capacity) {
    size_t len = 0;
    out[0] = '\0';
    CHECK(gotry_tenant_root_for(state_root, strlen(state_root), S(ORG), tenant->tenant, strlen(tenant->tenant), out,
                                capacity, &len, NULL) == GOTRY_STATUS_OK);
}

#endif
