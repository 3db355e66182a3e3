/*
 * A seeded property run over the id entry points with arbitrary bytes and lengths.
 *
 * Every call is checked against an oracle written here from the rules (not from the
 * library): the exact status a call must return, given NULL pointers, lengths no object can
 * have, buffer sizes and content; that nothing is written on failure and nothing past the
 * capacity on success; that an error object exists exactly when the call failed and repeats
 * its status; and that every derived id is well-formed, stable and accepted by the
 * validators. A crash, a hang or one mismatch fails the run.
 *
 * Usage: fuzz_ids SEED SECONDS    (run.sh: 15 s; a longer run: fuzz_ids $RANDOM 600)
 */
#define _POSIX_C_SOURCE 200809L

#include "gotry_tenant_state.h"
#include "splitmix.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t calls;
static uint64_t mismatches;
/* Counted by value: statuses are 0, the registry block 1..99 and the block 100..199. */
#define STATUS_VALUES 200
static uint64_t by_status[STATUS_VALUES];

static void mismatch(const char *entry, const char *what, int got, int want) {
    mismatches++;
    if (mismatches <= 20) {
        const char *got_name = gotry_status_name(got);
        const char *want_name = gotry_status_name(want);
        fprintf(stderr, "fuzz_ids: %s: %s (got %s, expected %s)\n", entry, what, got_name ? got_name : "?",
                want_name ? want_name : "?");
    }
}

/* ---- the oracle: the rules, restated in C ---- */

/* Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF. */
static int is_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t extra;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            extra = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            extra = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            extra = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i <= extra) return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000)) return 0;
        if (cp >= 0xd800 && cp <= 0xdfff) return 0;
        if (cp > 0x10ffff) return 0;
        i += extra + 1;
    }
    return 1;
}

static int claim_ok(const unsigned char *s, size_t n) {
    return n > 0 && n <= GOTRY_MAX_CLAIM_BYTES && memchr(s, 0, n) == NULL && is_utf8(s, n);
}

static int is_lower_alnum(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
static int is_lower_hex(unsigned char c) { return (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9'); }

static int org_ok(const unsigned char *s, size_t n) {
    if (n < 1 || n > 63 || !is_lower_alnum(s[0])) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-') return 0;
    return 1;
}

static int hex_label_ok(const unsigned char *s, size_t n, const char *prefix) {
    size_t p = strlen(prefix);
    if (n != p + 32 || memcmp(s, prefix, p) != 0) return 0;
    for (size_t i = p; i < n; i++)
        if (!is_lower_hex(s[i])) return 0;
    return 1;
}

/* ---- inputs ---- */

typedef struct Input {
    unsigned char bytes[700];
    const char *ptr; /* NULL, or bytes */
    size_t len;      /* may exceed the buffer only when huge (never read, by contract) */
    int huge;        /* a length no object can have */
} Input;

static void fill_hex_label(Input *in, const char *prefix) {
    size_t p = strlen(prefix);
    memcpy(in->bytes, prefix, p);
    for (size_t i = 0; i < 32; i++) in->bytes[p + i] = (unsigned char)"0123456789abcdef"[below(16)];
    in->len = p + 32;
}

/* Random UTF-8: mostly valid characters of every width, sometimes a broken sequence. */
static void fill_utf8(Input *in, size_t max) {
    size_t n = 0;
    size_t target = below(max + 1);
    while (n + 4 <= target) {
        switch (below(8)) {
        case 0: in->bytes[n++] = (unsigned char)(0x20 + below(0x5f)); break;
        case 1: in->bytes[n++] = (unsigned char)below(0x80); break; /* may be NUL or control */
        case 2: {
            uint32_t cp = 0x80 + (uint32_t)below(0x800 - 0x80);
            in->bytes[n++] = (unsigned char)(0xc0 | (cp >> 6));
            in->bytes[n++] = (unsigned char)(0x80 | (cp & 0x3f));
            break;
        }
        case 3: {
            uint32_t cp = 0x800 + (uint32_t)below(0x10000 - 0x800); /* includes surrogates */
            in->bytes[n++] = (unsigned char)(0xe0 | (cp >> 12));
            in->bytes[n++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            in->bytes[n++] = (unsigned char)(0x80 | (cp & 0x3f));
            break;
        }
        case 4: {
            uint32_t cp = 0x10000 + (uint32_t)below(0x110000 - 0x10000 + 0x100); /* a few above the max */
            in->bytes[n++] = (unsigned char)(0xf0 | (cp >> 18));
            in->bytes[n++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
            in->bytes[n++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            in->bytes[n++] = (unsigned char)(0x80 | (cp & 0x3f));
            break;
        }
        case 5: in->bytes[n++] = (unsigned char)(0x80 + below(0x80)); break; /* stray byte */
        case 6: /* overlong encodings */
            in->bytes[n++] = 0xc0 + (unsigned char)below(2);
            in->bytes[n++] = (unsigned char)(0x80 + below(0x40));
            break;
        default: in->bytes[n++] = (unsigned char)('a' + below(26)); break;
        }
    }
    in->len = n;
}

static void mutate(Input *in) {
    if (in->len == 0 || !chance(40)) return;
    switch (below(6)) {
    case 0: in->bytes[below(in->len)] = (unsigned char)next_u64(); break;
    case 1: in->bytes[in->len++] = '\n'; break;
    case 2: in->len = below(in->len); break;
    case 3: in->bytes[below(in->len)] = 0; break;
    case 4: in->bytes[below(in->len)] = (unsigned char)('A' + below(26)); break;
    default: in->bytes[in->len++] = (unsigned char)"0123456789abcdef-"[below(17)]; break;
    }
}

typedef enum Shape { ANY, ORG, TENANT, PARTITION, CLAIM, KEY, ROOT } Shape;

static void make_input(Input *in, Shape shape) {
    in->huge = 0;
    in->ptr = (const char *)in->bytes;
    switch (shape == ANY ? below(3) : 3) {
    case 0: /* raw bytes */
        in->len = below(80);
        for (size_t i = 0; i < in->len; i++) in->bytes[i] = (unsigned char)next_u64();
        break;
    case 1: fill_utf8(in, 80); break;
    case 2: fill_hex_label(in, chance(50) ? "t-" : "pc-"); break;
    default:
        switch (shape) {
        case ORG: {
            in->len = 1 + below(chance(90) ? 63 : 70);
            for (size_t i = 0; i < in->len; i++) in->bytes[i] = (unsigned char)"abcdefghijklmnopqrstuvwxyz0123456789-"[below(37)];
            break;
        }
        case TENANT: fill_hex_label(in, "t-"); break;
        case PARTITION: fill_hex_label(in, "pc-"); break;
        case KEY:
            in->len = chance(80) ? 32 + below(40) : below(32);
            for (size_t i = 0; i < in->len; i++) in->bytes[i] = (unsigned char)next_u64();
            break;
        case ROOT: {
            static const char *const parts[] = {"/", "srv", "..", ".", "//", "state", "a", "x y", "\xc3\xa9", ""};
            in->len = 0;
            for (size_t k = 0, n = below(8); k < n; k++) {
                const char *part = parts[below(sizeof parts / sizeof parts[0])];
                memcpy(in->bytes + in->len, part, strlen(part));
                in->len += strlen(part);
                if (chance(70)) in->bytes[in->len++] = '/';
            }
            break;
        }
        default: /* CLAIM */
            if (chance(10)) {
                in->len = 500 + below(30); /* around the 512-byte limit */
                memset(in->bytes, chance(50) ? 'a' : 'b', in->len);
            } else {
                fill_utf8(in, 120);
            }
            break;
        }
        mutate(in);
    }
    if (chance(3)) {
        in->ptr = NULL;
        in->len = chance(50) ? 0 : in->len;
    } else if (chance(2)) {
        in->huge = 1;
        in->len = chance(50) ? SIZE_MAX : (size_t)PTRDIFF_MAX + 1 + below(1000);
    }
}

/* The status of the argument checks that run, in parameter order, before any content. */
static int pointer_status(const Input *in) {
    if (in->ptr == NULL) return GOTRY_STATUS_NULL_ARGUMENT;
    if (in->huge) return GOTRY_STATUS_INVALID_ARGUMENT;
    return GOTRY_STATUS_OK;
}

static const unsigned char *data(const Input *in) { return in->bytes; }

/* ---- output buffers with canaries ---- */

#define CANARY 0xa5
typedef struct OutBuf {
    char bytes[4096 + 64];
    size_t capacity;
    int null;
} OutBuf;

static void make_out(OutBuf *out, size_t typical) {
    out->null = chance(3);
    out->capacity = chance(80) ? typical + below(8) : below(typical + 1);
    if (chance(1)) out->capacity = 0;
    memset(out->bytes, CANARY, sizeof out->bytes);
}

static int untouched(const OutBuf *out, size_t from) {
    for (size_t i = from; i < sizeof out->bytes; i++)
        if ((unsigned char)out->bytes[i] != CANARY) return 0;
    return 1;
}

/* A call's status and error agree, and a failure wrote nothing into the buffer. */
static void check_outcome(const char *entry, GotryStatus got, int want, GotryError *err, int asked,
                          const OutBuf *out) {
    calls++;
    if ((int)got >= 0 && (int)got < STATUS_VALUES) by_status[(int)got]++;
    if ((int)got != want) mismatch(entry, "status", got, want);
    if (asked && got != GOTRY_STATUS_OK && (err == NULL || gotry_error_status(err) != got))
        mismatch(entry, "error object missing or disagreeing", got, want);
    if (got == GOTRY_STATUS_OK && err != NULL) mismatch(entry, "error object on success", got, want);
    if (out != NULL && got != GOTRY_STATUS_OK && !untouched(out, 0))
        mismatch(entry, "buffer written on failure", got, want);
    gotry_error_free(err);
}

static char *out_ptr(OutBuf *out) { return out->null ? NULL : out->bytes; }

/* ---- one call of each entry point ---- */

static void fuzz_derive_tenant(void) {
    Input key, issuer, subject;
    OutBuf out;
    make_input(&key, KEY);
    make_input(&issuer, chance(70) ? CLAIM : ANY);
    make_input(&subject, chance(70) ? CLAIM : ANY);
    make_out(&out, GOTRY_LEDGER_TENANT_ID_BUFFER_LEN);
    int want = pointer_status(&key);
    if (want == GOTRY_STATUS_OK) want = pointer_status(&issuer);
    if (want == GOTRY_STATUS_OK) want = pointer_status(&subject);
    if (want == GOTRY_STATUS_OK && out.null) want = GOTRY_STATUS_NULL_ARGUMENT;
    if (want == GOTRY_STATUS_OK && out.capacity < GOTRY_LEDGER_TENANT_ID_BUFFER_LEN)
        want = GOTRY_STATUS_BUFFER_TOO_SMALL;
    if (want == GOTRY_STATUS_OK && (key.len < GOTRY_MIN_ORGANIZATION_KEY_BYTES ||
                                    !claim_ok(data(&issuer), issuer.len) || !claim_ok(data(&subject), subject.len)))
        want = GOTRY_STATUS_ID_INVALID;
    GotryError *err = NULL;
    int asked = chance(50);
    GotryStatus got = gotry_derive_ledger_tenant_id((const uint8_t *)key.ptr, key.len, issuer.ptr, issuer.len,
                                                    subject.ptr, subject.len, out_ptr(&out), out.capacity,
                                                    asked ? &err : NULL);
    check_outcome("derive_ledger_tenant_id", got, want, err, asked, &out);
    if (got != GOTRY_STATUS_OK) return;
    if (!hex_label_ok((const unsigned char *)out.bytes, strlen(out.bytes), "t-") || !untouched(&out, 35))
        mismatch("derive_ledger_tenant_id", "malformed id or write past it", got, want);
    if (gotry_assert_ledger_tenant_id(out.bytes, 34, NULL) != GOTRY_STATUS_OK)
        mismatch("derive_ledger_tenant_id", "its id fails the validator", got, want);
    char again[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    if (gotry_derive_ledger_tenant_id((const uint8_t *)key.ptr, key.len, issuer.ptr, issuer.len, subject.ptr,
                                      subject.len, again, sizeof again, NULL) != GOTRY_STATUS_OK ||
        strcmp(again, out.bytes) != 0)
        mismatch("derive_ledger_tenant_id", "not stable", got, want);
    char partition[GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN];
    if (gotry_derive_prompt_cache_partition((const uint8_t *)key.ptr, key.len, out.bytes, 34, partition,
                                            sizeof partition, NULL) != GOTRY_STATUS_OK ||
        gotry_assert_prompt_cache_partition(partition, strlen(partition), NULL) != GOTRY_STATUS_OK)
        mismatch("derive_prompt_cache_partition", "of a derived id", got, want);
}

static void fuzz_derive_partition(void) {
    Input key, tenant;
    OutBuf out;
    make_input(&key, KEY);
    make_input(&tenant, chance(70) ? TENANT : ANY);
    make_out(&out, GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN);
    int want = pointer_status(&key);
    if (want == GOTRY_STATUS_OK) want = pointer_status(&tenant);
    if (want == GOTRY_STATUS_OK && out.null) want = GOTRY_STATUS_NULL_ARGUMENT;
    if (want == GOTRY_STATUS_OK && out.capacity < GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN)
        want = GOTRY_STATUS_BUFFER_TOO_SMALL;
    if (want == GOTRY_STATUS_OK &&
        (key.len < GOTRY_MIN_ORGANIZATION_KEY_BYTES || !hex_label_ok(data(&tenant), tenant.len, "t-")))
        want = GOTRY_STATUS_ID_INVALID;
    GotryError *err = NULL;
    int asked = chance(50);
    GotryStatus got = gotry_derive_prompt_cache_partition((const uint8_t *)key.ptr, key.len, tenant.ptr, tenant.len,
                                                          out_ptr(&out), out.capacity, asked ? &err : NULL);
    check_outcome("derive_prompt_cache_partition", got, want, err, asked, &out);
    if (got == GOTRY_STATUS_OK &&
        (!hex_label_ok((const unsigned char *)out.bytes, strlen(out.bytes), "pc-") || !untouched(&out, 36)))
        mismatch("derive_prompt_cache_partition", "malformed partition or write past it", got, want);
}

static void fuzz_validators(void) {
    Input value;
    int which = (int)below(3);
    make_input(&value, chance(60) ? (which == 0 ? ORG : which == 1 ? TENANT : PARTITION) : ANY);
    int want = pointer_status(&value);
    if (want == GOTRY_STATUS_OK) {
        int ok = which == 0   ? org_ok(data(&value), value.len)
                 : which == 1 ? hex_label_ok(data(&value), value.len, "t-")
                              : hex_label_ok(data(&value), value.len, "pc-");
        want = ok ? GOTRY_STATUS_OK : GOTRY_STATUS_ID_INVALID;
    }
    GotryError *err = NULL;
    int asked = chance(50);
    GotryStatus got = which == 0   ? gotry_assert_organization_id(value.ptr, value.len, asked ? &err : NULL)
                      : which == 1 ? gotry_assert_ledger_tenant_id(value.ptr, value.len, asked ? &err : NULL)
                                   : gotry_assert_prompt_cache_partition(value.ptr, value.len, asked ? &err : NULL);
    check_outcome(which == 0 ? "assert_organization_id" : which == 1 ? "assert_ledger_tenant_id"
                                                                     : "assert_prompt_cache_partition",
                  got, want, err, asked, NULL);
}

static void fuzz_lease_key(void) {
    Input org, tenant;
    OutBuf out;
    make_input(&org, chance(70) ? ORG : ANY);
    make_input(&tenant, chance(70) ? TENANT : ANY);
    make_out(&out, GOTRY_LEASE_KEY_BUFFER_LEN);
    int want = pointer_status(&org);
    if (want == GOTRY_STATUS_OK) want = pointer_status(&tenant);
    if (want == GOTRY_STATUS_OK && out.null) want = GOTRY_STATUS_NULL_ARGUMENT;
    if (want == GOTRY_STATUS_OK && out.capacity < GOTRY_LEASE_KEY_BUFFER_LEN) want = GOTRY_STATUS_BUFFER_TOO_SMALL;
    if (want == GOTRY_STATUS_OK && (!org_ok(data(&org), org.len) || !hex_label_ok(data(&tenant), tenant.len, "t-")))
        want = GOTRY_STATUS_ID_INVALID;
    GotryError *err = NULL;
    int asked = chance(50);
    GotryStatus got = gotry_lease_key_for(org.ptr, org.len, tenant.ptr, tenant.len, out_ptr(&out), out.capacity,
                                          asked ? &err : NULL);
    check_outcome("lease_key_for", got, want, err, asked, &out);
    if (got == GOTRY_STATUS_OK) {
        size_t n = org.len + 1 + tenant.len;
        if (strlen(out.bytes) != n || memcmp(out.bytes, org.bytes, org.len) != 0 || out.bytes[org.len] != '/' ||
            memcmp(out.bytes + org.len + 1, tenant.bytes, tenant.len) != 0 || !untouched(&out, n + 1))
            mismatch("lease_key_for", "wrong key or write past it", got, want);
    }
}

static void fuzz_tenant_root(void) {
    Input root, org, tenant;
    OutBuf out;
    make_input(&root, chance(70) ? ROOT : ANY);
    make_input(&org, chance(80) ? ORG : ANY);
    make_input(&tenant, chance(80) ? TENANT : ANY);
    make_out(&out, chance(50) ? 4096 : 120);
    if (out.capacity > 4096) out.capacity = 4096;
    int len_null = chance(3);
    int want = pointer_status(&root);
    if (want == GOTRY_STATUS_OK && (!is_utf8(data(&root), root.len) || memchr(root.bytes, 0, root.len) != NULL))
        want = GOTRY_STATUS_INVALID_ARGUMENT;
    if (want == GOTRY_STATUS_OK) want = pointer_status(&org);
    if (want == GOTRY_STATUS_OK) want = pointer_status(&tenant);
    if (want == GOTRY_STATUS_OK && (out.null || len_null)) want = GOTRY_STATUS_NULL_ARGUMENT;
    if (want == GOTRY_STATUS_OK && (!org_ok(data(&org), org.len) || !hex_label_ok(data(&tenant), tenant.len, "t-")))
        want = GOTRY_STATUS_ID_INVALID;
    GotryError *err = NULL;
    size_t path_len = 777777;
    GotryStatus got = gotry_tenant_root_for(root.ptr, root.len, org.ptr, org.len, tenant.ptr, tenant.len,
                                            out_ptr(&out), out.capacity, len_null ? NULL : &path_len, &err);
    /* Whether the resolved path fits is the one thing the oracle does not compute: ask. */
    if (want == GOTRY_STATUS_OK && got == GOTRY_STATUS_BUFFER_TOO_SMALL) {
        size_t needed = 0;
        if (gotry_error_buffer_len(err, &needed) != GOTRY_STATUS_OK || needed <= out.capacity)
            mismatch("tenant_root_for", "BUFFER_TOO_SMALL with a size that fits", got, want);
        if (path_len != 777777) mismatch("tenant_root_for", "length written on failure", got, want);
        want = GOTRY_STATUS_BUFFER_TOO_SMALL;
    }
    check_outcome("tenant_root_for", got, want, err, 1, &out);
    if (got != GOTRY_STATUS_OK) return;
    char suffix[200];
    int suffix_len = snprintf(suffix, sizeof suffix, "/orgs/%.*s/tenants/%.*s", (int)org.len, (const char *)org.bytes,
                              (int)tenant.len, (const char *)tenant.bytes);
    if (path_len >= out.capacity || strlen(out.bytes) != path_len || out.bytes[0] != '/' ||
        path_len < (size_t)suffix_len || strcmp(out.bytes + path_len - suffix_len, suffix) != 0 ||
        strstr(out.bytes, "/../") != NULL || strstr(out.bytes, "/./") != NULL || strstr(out.bytes, "//") != NULL ||
        !untouched(&out, path_len + 1))
        mismatch("tenant_root_for", "path not resolved or written past its end", got, GOTRY_STATUS_OK);
}

static void fuzz_names(void) {
    /* Across both blocks, their reserved numbers and past them. */
    int value = (int)(next_u64() % 256) - 16;
    int coded = value >= GOTRY_STATUS_LEASE_HELD && value <= GOTRY_STATUS_CALL_IN_DOUBT;
    int known = value == GOTRY_STATUS_OK || coded ||
                (value >= GOTRY_STATUS_INVALID_ARGUMENT && value <= GOTRY_STATUS_HOST_CALLBACK_FAILED);
    calls++;
    if ((gotry_status_name(value) != NULL) != known || (gotry_status_code(value) != NULL) != coded ||
        (gotry_fence_reason_name(value) != NULL) != (value >= 1 && value <= 3) ||
        (gotry_lease_op_name(value) != NULL) != (value >= 1 && value <= 4))
        mismatch("names", "a name for an unknown value, or none for a known one", value, value);
}

static double seconds_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SEED SECONDS\n", argv[0]);
        return 2;
    }
    uint64_t seed = strtoull(argv[1], NULL, 10);
    double budget = strtod(argv[2], NULL);
    rng_state = seed;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* The clock is read every 256 calls; the run is bounded by time, the result is not. */
    do {
        for (int i = 0; i < 256; i++) {
            switch (below(6)) {
            case 0: fuzz_derive_tenant(); break;
            case 1: fuzz_derive_partition(); break;
            case 2: fuzz_validators(); break;
            case 3: fuzz_lease_key(); break;
            case 4: fuzz_tenant_root(); break;
            default: fuzz_names(); break;
            }
        }
    } while (seconds_since(&start) < budget);
    printf("fuzz_ids: seed %" PRIu64 ", %" PRIu64 " calls in %.1f s; ok %" PRIu64 ", id_invalid %" PRIu64
           ", invalid_argument %" PRIu64 ", null_argument %" PRIu64 ", buffer_too_small %" PRIu64
           ", internal_error %" PRIu64 "; %" PRIu64 " mismatches\n",
           seed, calls, seconds_since(&start), by_status[GOTRY_STATUS_OK], by_status[GOTRY_STATUS_ID_INVALID],
           by_status[GOTRY_STATUS_INVALID_ARGUMENT], by_status[GOTRY_STATUS_NULL_ARGUMENT],
           by_status[GOTRY_STATUS_BUFFER_TOO_SMALL], by_status[GOTRY_STATUS_INTERNAL_ERROR], mismatches);
    return mismatches == 0 ? 0 : 1;
}
