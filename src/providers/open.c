/* open.c - opens a provider from a database URL by its scheme: the one
 * file above the providers (it calls into sqlite/ and postgres/; nothing
 * below calls back). Any thread. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "providers/providers.h"

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
