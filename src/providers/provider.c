/* provider.c - opens a provider from a database URL by its scheme, and
 * masks the password of a URL for messages. Any thread. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "providers/providers.h"

/* Appends n bytes of s to out[size] at *len, truncating (always
 * terminated). */
static void put(char *out, size_t size, size_t *len, const char *s, size_t n)
{
    if (size == 0)
        return;
    for (size_t i = 0; i < n && *len + 1 < size; i++)
        out[(*len)++] = s[i];
    out[*len] = '\0';
}

/* The '@' that ends the userinfo of url (start: just after "://"), or
 * NULL. A password may hold unescaped '@', '/' and '?' (a typo, which the
 * parser then refuses, naming the URL): the query is taken to start at
 * the first '?' after the first '/', and the userinfo to end at the last
 * '@' before it. When there is none but an '@' follows with no '=' between
 * (a password holding '/' then '?'), that '@' ends it: in doubt, a few
 * characters too many are masked. */
static const char *userinfo_end(const char *start)
{
    const char *slash = strchr(start, '/');
    const char *query = strchr(slash != NULL ? slash : start, '?');
    const char *end = query != NULL ? query : start + strlen(start);
    const char *at = NULL;
    for (const char *s = start; s < end; s++)
        if (*s == '@')
            at = s;
    if (at == NULL && query != NULL) {
        const char *later = strchr(query, '@');
        if (later != NULL &&
            memchr(query, '=', (size_t)(later - query)) == NULL)
            at = later;
    }
    return at;
}

int duro__url_userinfo_ambiguous(const char *url)
{
    const char *start = url != NULL ? strstr(url, "://") : NULL;
    if (start == NULL)
        return 0;
    start += 3;
    const char *at = userinfo_end(start);
    return at != NULL && strpbrk(start, "@/?") < at;
}

size_t duro__mask_url(const char *url, char *out, size_t size)
{
    size_t len = 0;
    if (size > 0)
        out[0] = '\0';
    if (url == NULL)
        return 0;
    const char *start = strstr(url, "://");
    const char *colon = NULL, *at = NULL;
    if (start != NULL) {
        start += 3;
        at = userinfo_end(start);
        if (at != NULL)
            colon = memchr(start, ':', (size_t)(at - start));
    }
    /* Copies url with the userinfo's password and the value of every
     * password= parameter (after a '?' or '&' past the userinfo) replaced. */
    const char *s = url;
    const char *past = colon != NULL ? at : url;
    while (*s != '\0') {
        if (colon != NULL && s == colon + 1) {
            put(out, size, &len, "***", 3);
            put(out, size, &len, at, 1);
            s = at + 1;
            continue;
        }
        if (s >= past && (*s == '?' || *s == '&') &&
            strncmp(s + 1, "password=", 9) == 0) {
            put(out, size, &len, s, 10);
            put(out, size, &len, "***", 3);
            s += 10;
            s += strcspn(s, "&");
            continue;
        }
        put(out, size, &len, s, 1);
        s++;
    }
    return len;
}

size_t duro_url_mask(const char *url, char *out, size_t size)
{
    return out != NULL ? duro__mask_url(url, out, size) : 0;
}

uint64_t duro__history_offset(const duro_history_cache *cache,
                              const char *instance_id, uint64_t execution_id,
                              uint64_t total)
{
    uint64_t cached = 0;
    if (cache != NULL && cache->cached_events != NULL)
        cached = cache->cached_events(cache->user, instance_id, execution_id);
    return cached <= total ? cached : 0;
}

int duro__check_batch_args(size_t n, const char *const *lock_tokens,
                           const duro_orch_ack *acks, size_t max_next,
                           duro_orch_item **next, size_t *next_count,
                           duro_error *err)
{
    if (next_count == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next_count is NULL");
    *next_count = 0;
    if (n > DURO__BATCH_MAX || max_next > DURO__BATCH_MAX)
        return duro_error_set(err, DURO_INVALID, 0,
                              "at most %d acks and %d fetches in one call",
                              DURO__BATCH_MAX, DURO__BATCH_MAX);
    if ((n > 0 && (lock_tokens == NULL || acks == NULL)) ||
        (max_next > 0 && next == NULL))
        return duro_error_set(err, DURO_INVALID, 0,
                              "lock_tokens, acks or next is NULL");
    return DURO_OK;
}

int duro_provider_open(const char *url, duro_provider **out, duro_error *err)
{
    /* A public call: the reason goes to duro_errmsg() too, so a caller
     * that passed err NULL still gets it. */
    duro_error local;
    if (err == NULL)
        err = &local;
    int rc = duro__provider_open_for(url, 0, out, err);
    if (rc != DURO_OK)
        duro__fail_from(err);
    return rc;
}

int duro__provider_open_for(const char *url, int concurrency,
                            duro_provider **out, duro_error *err)
{
    duro_error_clear(err);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    if (url == NULL || url[0] == '\0')
        return duro_error_set(err, DURO_BAD_URL, 0, "database URL is empty");
    if (strncmp(url, "sqlite:", 7) == 0)
        return duro__sqlite_open(url + 7, out, err);
    if (strncmp(url, "postgres://", 11) == 0 ||
        strncmp(url, "postgresql://", 13) == 0) {
#ifdef DURO_HAVE_POSTGRES
        return duro__pg_open(url, concurrency, out, err);
#else
        (void)concurrency;
        /* Not even the scheme's rest is echoed: it may hold a password. */
        return duro_error_set(err, DURO_UNSUPPORTED, 0,
                              "this libduro was built without the PostgreSQL "
                              "provider (DURO_POSTGRES=OFF or libpq not "
                              "found)");
#endif
    }
    /* A mistyped scheme may still carry a password: a URL (with "://") is
     * shown masked; of anything else, only what comes before its first
     * ':', '=' or space, since where a password sits in it is unknown
     * (libpq's "host=h password=pw", "postgres:u:pw@h/db"). */
    static const char expected[] = "expected sqlite:path, sqlite::memory:, "
                                   "postgres://... or postgresql://...";
    char shown[512];
    size_t scheme = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                "QRSTUVWXYZ0123456789+.-");
    if (scheme > 0 && strncmp(url + scheme, "://", 3) == 0) {
        duro__mask_url(url, shown, sizeof(shown));
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "unknown database URL scheme in '%s' (%s)", shown,
                              expected);
    }
    size_t n = strcspn(url, ":= \t");
    if (url[n] == '\0')
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "the database URL has no scheme (not shown: "
                              "it may hold a password); a SQLite file is "
                              "sqlite:PATH, e.g. sqlite:orders.db (%s)",
                              expected);
    if (url[n] == '=' || url[n] == ' ' || url[n] == '\t')
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "the database URL looks like a libpq "
                              "key=value string, which is not accepted "
                              "(not shown: it may hold a password); write "
                              "postgresql://[user@]host[:port]/dbname[?key="
                              "value&...] (%s)",
                              expected);
    return duro_error_set(err, DURO_BAD_URL, 0,
                          "unknown database URL scheme '%.*s:' (the rest is "
                          "not shown: it may hold a password; %s)",
                          (int)(n < 32 ? n : 32), url, expected);
}

int duro__provider_check_writable(duro_provider *p, duro_error *err)
{
    duro_error_clear(err);
    int rc = duro__sqlite_check_writable(p, err);
#ifdef DURO_HAVE_POSTGRES
    if (rc == DURO_OK)
        rc = duro__pg_check_writable(p, err);
#endif
    return rc;
}

void duro_provider_close(duro_provider *p)
{
    if (p != NULL && p->close != NULL)
        p->close(p);
}
