/*
 * What snapshot_test.c and router_test.c share beyond test_common.h: a host that keeps its
 * tenants' ledgers open through its own SQLite (the system's libsqlite3, linked with -lsqlite3;
 * this library's bundled SQLite is not exported by the .so), with the snapshot function that
 * reads those ledgers for the library's copies. Compiles as C11 and C++17. Every function is
 * static inline, so a program that uses part of it does not warn.
 */
#ifndef GOTRY_TESTS_HOST_SQLITE_H
#define GOTRY_TESTS_HOST_SQLITE_H

#include "test_common.h"

#include <pthread.h>
#include <sqlite3.h>

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

/* How the host journals its ledger. In WAL mode (automatic checkpoints off, so what the host
 * writes stays in the -wal file) a copy reads the ledger from its file and frames, and asks the
 * host's snapshot function only when the WAL tells nothing; in rollback journal mode it always
 * asks the host. */
typedef enum { HOST_WAL, HOST_ROLLBACK } HostJournal;

/* Opens (creating it) <root>/gotry-state/gotry-state.db, journaled as `journal` says. */
static inline int host_open(HostLedger *ledger, const char *root, HostJournal journal) {
    char dir[2200];
    memset(ledger, 0, sizeof *ledger);
    if (strlen(root) > 2100) return -1;
    snprintf(dir, sizeof dir, "%s/gotry-state", root);
    snprintf(ledger->path, sizeof ledger->path, "%s/gotry-state.db", dir);
    if (make_dirs(dir) != 0) return -1;
    if (sqlite3_open_v2(ledger->path, &ledger->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
        return -1;
    sqlite3_busy_timeout(ledger->db, 5000);
    const char *setup = journal == HOST_WAL ? "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; "
                                              "CREATE TABLE IF NOT EXISTS entries (text TEXT NOT NULL)"
                                            : "PRAGMA journal_mode = DELETE; "
                                              "CREATE TABLE IF NOT EXISTS entries (text TEXT NOT NULL)";
    return host_exec(ledger->db, setup) == SQLITE_OK ? 0 : -1;
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
