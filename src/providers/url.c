/* url.c - what both stores' URL parsers need: the secrets of a database
 * URL (masked for messages, scrubbed from text that may quote them, as
 * libpq's does) and the parameters' decimal numbers. Below the providers
 * (they and open.c call it); calls nothing above. Any thread. */
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

/* The query parameters whose values messages show: duro's own (both
 * providers') and libpq's that hold no secret, matched as libpq matches
 * a name (after percent-decoding, case-sensitive). Any other value is
 * masked: a password however it is spelled (pass%77ord, PASSWORD,
 * password%3D...), libpq's other secrets (sslpassword, oauth_client_secret,
 * scram_client_key, scram_server_key), a name of a later libpq's, a typo.
 * A parameter duro adds to its URLs must be added here, or messages show
 * its value masked. */
static const char *const shown_params[] = {
    /* duro's: PostgreSQL, then SQLite's others */
    "schema", "pool", "max_history", "max_payload", "create", "synchronous",
    "busy_timeout_ms", "mode", "checkpoint_pages", "lock_timeout",
    "statement_timeout", "idle_in_transaction_session_timeout",
    /* libpq's (up to PostgreSQL 18), secrets left out */
    "host", "hostaddr", "port", "dbname", "user", "passfile", "channel_binding",
    "connect_timeout", "client_encoding", "options", "application_name",
    "fallback_application_name", "keepalives", "keepalives_idle",
    "keepalives_interval", "keepalives_count", "tcp_user_timeout",
    "replication", "gssencmode", "sslmode", "sslnegotiation", "sslcompression",
    "sslcert", "sslkey", "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir",
    "sslsni", "sslkeylogfile", "requirepeer", "require_auth",
    "ssl_min_protocol_version", "ssl_max_protocol_version",
    "min_protocol_version", "max_protocol_version", "krbsrvname", "gsslib",
    "gssdelegation", "service", "target_session_attrs", "load_balance_hosts",
    "oauth_issuer", "oauth_client_id", "oauth_scope", "ssl"};

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into out[size] as libpq does ('+' is a '+').
 * Returns the decoded length, or (size_t)-1 when an escape is malformed,
 * decodes to NUL (libpq refuses both), or the result does not fit. */
static size_t decode(const char *s, size_t n, char *out, size_t size)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            int hi = n - i >= 3 ? hex_value(s[i + 1]) : -1;
            int lo = n - i >= 3 ? hex_value(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return (size_t)-1;
            c = hi << 4 | lo;
            i += 2;
        }
        if (len + 1 >= size)
            return (size_t)-1;
        out[len++] = (char)c;
    }
    out[len] = '\0';
    return len;
}

enum {
    SPAN_SHOWN,  /* copied as it is */
    SPAN_SECRET, /* a value (or the userinfo's password): "***" */
    SPAN_PARAM   /* a whole parameter that may hold one anywhere: "***" */
};

typedef void (*span_fn)(void *user, const char *s, size_t n, int kind);

/* Where a query parameter's secret is: SPAN_SHOWN (none: a parameter
 * shown_params names), SPAN_SECRET (its value: a name that is a plain
 * word, [A-Za-z0-9_.-], once decoded) or SPAN_PARAM (anywhere: not
 * name=value, an empty name, a name that does not decode or is no plain
 * word - "password%3Dx" is one - so that what libpq would make of it is
 * unknown). */
static int param_kind(const char *p, size_t n)
{
    const char *eq = memchr(p, '=', n);
    char name[64];
    size_t len;
    if (eq == NULL || eq == p ||
        (len = decode(p, (size_t)(eq - p), name, sizeof(name))) == (size_t)-1)
        return SPAN_PARAM;
    if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_.-") != len)
        return SPAN_PARAM;
    for (size_t i = 0; i < sizeof(shown_params) / sizeof(shown_params[0]); i++)
        if (strcmp(name, shown_params[i]) == 0)
            return SPAN_SHOWN;
    return SPAN_SECRET;
}

/* Calls fn for each part of url in order, saying which is a secret: the
 * userinfo's password (everything between the first ':' and the '@' that
 * ends the userinfo, see userinfo_end) and, of each query parameter
 * (after the first '?' past the userinfo, split at '&'), what
 * param_kind() says. */
static void walk_url(const char *url, span_fn fn, void *user)
{
    const char *start = strstr(url, "://");
    const char *colon = NULL, *at = NULL;
    if (start != NULL) {
        start += 3;
        at = userinfo_end(start);
        if (at != NULL)
            colon = memchr(start, ':', (size_t)(at - start));
    }
    const char *s = url;
    if (colon != NULL) {
        fn(user, url, (size_t)(colon + 1 - url), SPAN_SHOWN);
        fn(user, colon + 1, (size_t)(at - colon - 1), SPAN_SECRET);
        s = at;
    }
    const char *query = strchr(at != NULL      ? at
                               : start != NULL ? start
                                               : url,
                               '?');
    if (query == NULL) {
        fn(user, s, strlen(s), SPAN_SHOWN);
        return;
    }
    fn(user, s, (size_t)(query + 1 - s), SPAN_SHOWN);
    for (const char *p = query + 1;;) {
        size_t n = strcspn(p, "&");
        if (n > 0) {
            int kind = param_kind(p, n);
            if (kind == SPAN_SECRET) {
                const char *eq = memchr(p, '=', n);
                fn(user, p, (size_t)(eq + 1 - p), SPAN_SHOWN);
                fn(user, eq + 1, n - (size_t)(eq + 1 - p), SPAN_SECRET);
            } else {
                fn(user, p, n, kind);
            }
        }
        if (p[n] == '\0')
            return;
        fn(user, p + n, 1, SPAN_SHOWN);
        p += n + 1;
    }
}

typedef struct masked {
    char *out;
    size_t size, len;
} masked;

static void mask_span(void *user, const char *s, size_t n, int kind)
{
    masked *m = user;
    if (kind == SPAN_SHOWN)
        put(m->out, m->size, &m->len, s, n);
    else
        put(m->out, m->size, &m->len, "***", 3);
}

size_t duro__mask_url(const char *url, char *out, size_t size)
{
    if (size > 0)
        out[0] = '\0';
    if (url == NULL)
        return 0;
    masked m = {out, size, 0};
    walk_url(url, mask_span, &m);
    return m.len;
}

/* The secrets of a URL as text may quote them: each as written and
 * percent-decoded, and of a whole parameter (SPAN_PARAM) also its name
 * and its value, each both ways (libpq quotes a name decoded, a value
 * that does not decode as written). */
typedef struct secrets {
    char **s;
    size_t count, cap;
    int oom;
} secrets;

static void add_secret(secrets *x, const char *s, size_t n, int decoded)
{
    if (n == 0)
        return;
    char *copy = duro__malloc(n + 1);
    char **slot = copy != NULL ? duro__vec_push((void **)&x->s, &x->count,
                                                &x->cap, sizeof(char *))
                               : NULL;
    if (slot == NULL) {
        duro__free(copy);
        x->oom = 1;
        return;
    }
    if (decoded) {
        size_t len = decode(s, n, copy, n + 1);
        if (len == (size_t)-1 || len == n) {
            /* nothing decodes, or as written: not another form */
            duro__free(copy);
            x->count--;
            return;
        }
    } else {
        memcpy(copy, s, n);
        copy[n] = '\0';
    }
    *slot = copy;
}

static void add_both(secrets *x, const char *s, size_t n)
{
    add_secret(x, s, n, 0);
    add_secret(x, s, n, 1);
}

static void collect_span(void *user, const char *s, size_t n, int kind)
{
    secrets *x = user;
    if (kind == SPAN_SHOWN)
        return;
    add_both(x, s, n);
    const char *eq = kind == SPAN_PARAM ? memchr(s, '=', n) : NULL;
    if (eq != NULL) {
        add_both(x, s, (size_t)(eq - s));
        add_both(x, eq + 1, n - (size_t)(eq + 1 - s));
    }
}

size_t duro__url_scrub(const char *url, const char *text, char *out,
                       size_t size)
{
    size_t len = 0;
    if (size > 0)
        out[0] = '\0';
    if (text == NULL)
        return 0;
    secrets x = {0};
    if (url != NULL)
        walk_url(url, collect_span, &x);
    if (x.oom) {
        /* a secret could not be held: none of the text is shown */
        put(out, size, &len, "(not shown: it may quote a password)", 36);
    } else {
        for (const char *t = text; *t != '\0';) {
            size_t best = 0;
            for (size_t i = 0; i < x.count; i++) {
                size_t n = strlen(x.s[i]);
                if (n > best && strncmp(t, x.s[i], n) == 0)
                    best = n;
            }
            if (best > 0) {
                put(out, size, &len, "***", 3);
                t += best;
            } else {
                put(out, size, &len, t, 1);
                t++;
            }
        }
    }
    for (size_t i = 0; i < x.count; i++)
        duro__free(x.s[i]);
    duro__free(x.s);
    return len;
}

size_t duro_url_mask(const char *url, char *out, size_t size)
{
    return out != NULL ? duro__mask_url(url, out, size) : 0;
}

int duro__parse_decimal(const char *value, size_t len, uint64_t min,
                        uint64_t max, uint64_t *out)
{
    if (len == 0 || len > 20)
        return -1;
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (value[i] < '0' || value[i] > '9')
            return -1;
        uint64_t digit = (uint64_t)(value[i] - '0');
        if (n > (UINT64_MAX - digit) / 10)
            return -1;
        n = n * 10 + digit;
    }
    if (n < min || n > max)
        return -1;
    *out = n;
    return 0;
}
