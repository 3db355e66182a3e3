/*
 * What snapshot_test.c and router_test.c share: the checks, tenant names, and a host that
 * keeps its tenants' ledgers open through its own SQLite (the system's libsqlite3, linked with
 * -lsqlite3; this library's bundled SQLite is not exported by the .so), with the snapshot
 * function that reads those ledgers for the library's copies. Compiles as C11 and C++17.
 * Every function is static inline, so a program that uses part of it does not warn.
 */
#ifndef GOTRY_TESTS_HOST_SQLITE_H
#define GOTRY_TESTS_HOST_SQLITE_H

#include "gotry_tenant_state.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
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
/* The call must return exactly this status (an error it left in `err` is kept for the caller). */
#define STATUS(call, want) check_status_at((call), (want), &err, #call, __FILE__, __LINE__)

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
#define ERROR_IS(want, code) check_error_at(&err, (want), (code), __FILE__, __LINE__)
#define FAILS(call, want, code)                                                                                \
    do {                                                                                                       \
        STATUS(call, want);                                                                                    \
        ERROR_IS(want, code);                                                                                  \
    } while (0)
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

static const uint8_t *const ORG_KEY = (const uint8_t *)"0123456789abcdef0123456789abcdef";
static const char ORG[] = "acme";

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

/* ---- the host's ledgers, through the system's SQLite ---- */

/* One ledger the host holds open for a tenant's whole tenure, as a host that keeps a
 * connection per served tenant does. */
typedef struct {
    char path[2300];
    sqlite3 *db;
} HostLedger;

static inline int host_exec(sqlite3 *db, const char *sql) {
    char *message = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &message);
    if (rc != SQLITE_OK) fprintf(stderr, "host SQLite: %s: %s\n", sql, message ? message : sqlite3_errstr(rc));
    sqlite3_free(message);
    return rc;
}

/* Opens (creating it) <root>/gotry-state/gotry-state.db in WAL mode with automatic
 * checkpoints off, so what the host writes from now on stays in the -wal file. */
static inline int host_open(HostLedger *ledger, const char *root) {
    char dir[2200];
    memset(ledger, 0, sizeof *ledger);
    if (strlen(root) > 2100) return -1;
    snprintf(dir, sizeof dir, "%s/gotry-state", root);
    snprintf(ledger->path, sizeof ledger->path, "%s/gotry-state.db", dir);
    if (make_dirs(dir) != 0) return -1;
    if (sqlite3_open_v2(ledger->path, &ledger->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
        return -1;
    sqlite3_busy_timeout(ledger->db, 5000);
    return host_exec(ledger->db, "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; "
                                 "CREATE TABLE IF NOT EXISTS entries (text TEXT NOT NULL)") == SQLITE_OK
               ? 0
               : -1;
}

static inline int host_insert(sqlite3 *db, const char *text) {
    sqlite3_stmt *insert = NULL;
    int rc = sqlite3_prepare_v2(db, "INSERT INTO entries (text) VALUES (?1)", -1, &insert, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(insert, 1, text, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_step(insert) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    sqlite3_finalize(insert);
    return rc == SQLITE_OK ? 0 : -1;
}

/* The entries as "a,b,c" in insertion order, or "(unreadable)". */
static inline void host_rows(sqlite3 *db, char *out, size_t capacity) {
    sqlite3_stmt *query = NULL;
    snprintf(out, capacity, "(unreadable)");
    if (sqlite3_prepare_v2(db, "SELECT coalesce(group_concat(text, ','), '') FROM (SELECT text FROM entries "
                               "ORDER BY rowid)",
                           -1, &query, NULL) == SQLITE_OK &&
        sqlite3_step(query) == SQLITE_ROW)
        snprintf(out, capacity, "%s", (const char *)sqlite3_column_text(query, 0));
    sqlite3_finalize(query);
}

/* The entries of the ledger at `path`, read-only through a connection of its own. */
static inline void ledger_rows(const char *path, char *out, size_t capacity) {
    sqlite3 *db = NULL;
    snprintf(out, capacity, "(unreadable)");
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) host_rows(db, out, capacity);
    sqlite3_close(db);
}

static inline void host_close(HostLedger *ledger) {
    if (ledger->db != NULL) CHECK(sqlite3_close(ledger->db) == SQLITE_OK);
    ledger->db = NULL;
}

/* ---- the host's snapshot function ---- */

enum { HOST_MAX_LEDGERS = 8 };

typedef enum { SNAPSHOT_BACKUP_API = 0, SNAPSHOT_VACUUM_INTO = 1 } SnapshotMethod;

/* What the snapshot function reads from (the host's open ledgers) and what it saw. Shared
 * by every thread that takes a copy, so it has a lock. */
typedef struct {
    pthread_mutex_t lock;
    HostLedger *ledgers[HOST_MAX_LEDGERS];
    SnapshotMethod method;
    int fail_with;    /* non-zero: refuse every snapshot with this value and a message */
    int fill_message; /* when refusing: fill the whole message buffer, no NUL */
    int calls;
    int bad_args;
    int on_main_thread;
    pthread_t main_thread;
} HostSnapshots;

static inline void snapshots_init(HostSnapshots *host) {
    memset(host, 0, sizeof *host);
    pthread_mutex_init(&host->lock, NULL);
    host->main_thread = pthread_self();
}

static inline void snapshots_destroy(HostSnapshots *host) { pthread_mutex_destroy(&host->lock); }

static inline void snapshots_hold(HostSnapshots *host, HostLedger *ledger) {
    pthread_mutex_lock(&host->lock);
    for (int i = 0; i < HOST_MAX_LEDGERS; i++) {
        if (host->ledgers[i] == NULL) {
            host->ledgers[i] = ledger;
            break;
        }
    }
    pthread_mutex_unlock(&host->lock);
}

static inline void snapshots_release(HostSnapshots *host, HostLedger *ledger) {
    pthread_mutex_lock(&host->lock);
    for (int i = 0; i < HOST_MAX_LEDGERS; i++)
        if (host->ledgers[i] == ledger) host->ledgers[i] = NULL;
    pthread_mutex_unlock(&host->lock);
}

static inline int snapshots_calls(HostSnapshots *host) {
    pthread_mutex_lock(&host->lock);
    int calls = host->calls;
    pthread_mutex_unlock(&host->lock);
    return calls;
}

static inline void snapshots_fail(HostSnapshots *host, int fail_with) {
    pthread_mutex_lock(&host->lock);
    host->fail_with = fail_with;
    pthread_mutex_unlock(&host->lock);
}

/* Writes an image of `db` to `image` through the host's own SQLite. */
static inline int snapshot_into(sqlite3 *db, const char *image, SnapshotMethod method, char *message,
                                size_t capacity) {
    int rc;
    if (method == SNAPSHOT_VACUUM_INTO) {
        char *sql = sqlite3_mprintf("VACUUM INTO %Q", image);
        rc = sql ? sqlite3_exec(db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
        if (rc != SQLITE_OK) snprintf(message, capacity, "VACUUM INTO: %s", sqlite3_errmsg(db));
        sqlite3_free(sql);
        return rc;
    }
    sqlite3 *to = NULL;
    rc = sqlite3_open_v2(image, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_backup *backup = sqlite3_backup_init(to, "main", db, "main");
        if (backup == NULL) {
            rc = sqlite3_errcode(to);
        } else {
            /* One step of every page: one read transaction, so a consistent image. */
            rc = sqlite3_backup_step(backup, -1);
            int finished = sqlite3_backup_finish(backup);
            rc = rc == SQLITE_DONE ? finished : rc;
        }
        if (rc != SQLITE_OK) snprintf(message, capacity, "backup: %s", sqlite3_errmsg(to));
    }
    sqlite3_close(to);
    return rc;
}

/* GotrySnapshotFn: finds the host's connection on `source` and writes its image. */
static inline int32_t host_snapshot(void *user_data, const char *source, size_t source_len, const char *image,
                             size_t image_len, char *message, size_t message_capacity) {
    HostSnapshots *host = (HostSnapshots *)user_data;
    pthread_mutex_lock(&host->lock);
    host->calls++;
    if (pthread_equal(pthread_self(), host->main_thread)) host->on_main_thread++;
    int args_ok = source != NULL && image != NULL && source[source_len] == '\0' && strlen(source) == source_len &&
                  image[image_len] == '\0' && strlen(image) == image_len && !exists(image) && message != NULL &&
                  message_capacity == GOTRY_HOST_MESSAGE_BUFFER_LEN && message[0] == '\0';
    if (!args_ok) host->bad_args++;
    int fail_with = host->fail_with;
    int fill = host->fill_message;
    sqlite3 *db = NULL;
    for (int i = 0; i < HOST_MAX_LEDGERS; i++)
        if (host->ledgers[i] != NULL && strcmp(host->ledgers[i]->path, source) == 0) db = host->ledgers[i]->db;
    SnapshotMethod method = host->method;
    pthread_mutex_unlock(&host->lock);
    if (fail_with != 0) {
        if (fill)
            memset(message, 'x', message_capacity);
        else
            snprintf(message, message_capacity, "the host refuses to snapshot %s", source);
        return fail_with;
    }
    if (db == NULL) {
        snprintf(message, message_capacity, "%s is not a ledger this host has open", source);
        return -1;
    }
    return snapshot_into(db, image, method, message, message_capacity);
}

#endif
