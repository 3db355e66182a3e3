/*
 * What the C tests share: the checks and their counters, and the files, clocks and tenant
 * names their scenarios are built from. Compiles as C11 and C++17. Every function is static
 * inline, so a program that uses part of it does not warn.
 *
 * STATUS, ERROR_IS and FAILS serve a test whose calls leave their error in a local `err`;
 * api_test.c, which also proves that every error carries a message, defines its own first.
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
#ifndef STATUS
/* The call must return exactly this status (an error it left in `err` is kept for the caller). */
#define STATUS(call, want) check_status_at((call), (want), &err, #call, __FILE__, __LINE__)
#endif

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
#ifndef ERROR_IS
#define ERROR_IS(want, code) check_error_at(&err, (want), (code), __FILE__, __LINE__)
#endif
#ifndef FAILS
#define FAILS(call, want, code)                                                                                \
    do {                                                                                                       \
        STATUS(call, want);                                                                                    \
        ERROR_IS(want, code);                                                                                  \
    } while (0)
#endif
#define FAILS_NULL(call) FAILS(call, GOTRY_STATUS_NULL_ARGUMENT, "GOTRY_STATUS_NULL_ARGUMENT")
#define FAILS_RANGE(call) FAILS(call, GOTRY_STATUS_INVALID_ARGUMENT, "ERR_OUT_OF_RANGE")

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
