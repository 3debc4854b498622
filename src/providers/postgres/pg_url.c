/* pg_url.c - parses a postgres:// or postgresql:// URL into the provider's
 * configuration: duro's own parameters (schema, pool, max_history,
 * max_payload, create, and the session timeouts lock_timeout,
 * statement_timeout, idle_in_transaction_session_timeout) are taken out,
 * the rest is handed to libpq as is. Also masks the secrets of a URL for
 * every message that names it, and scrubs them from libpq's messages.
 * Connects to nothing; any thread. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_provider.h"
#include "providers/providers.h"

#define DEFAULT_POOL 5
/* libpq parameters duro sets unless the URL does:
 * - fallback_application_name names duro's sessions in pg_stat_activity
 *   and the server's log, unless application_name= or PGAPPNAME does;
 * - TCP keepalives after 30 s of silence, every 10 s, 3 unanswered ending
 *   the connection: a server that vanished (a partition, a machine lost)
 *   is noticed in about a minute, by a call waiting for its answer or by
 *   the idle listener, instead of after the kernel's 2 hours. (Ignored on
 *   unix sockets.)
 * - connect_timeout 10 s (per host of the URL): without one libpq waits
 *   for ever for a server that accepted the connection but never answers
 *   (stopped, hung, a proxy queueing its clients), and a pool thread
 *   reconnecting to it would hold up the runtime's shutdown. Not added when
 *   PGCONNECT_TIMEOUT or a service (service=, PGSERVICE) may say it. */
static const char *const url_defaults[][2] = {
    {"fallback_application_name", "duro"},
    {"keepalives_idle", "30"},
    {"keepalives_interval", "10"},
    {"keepalives_count", "3"},
    {"connect_timeout", "10"},
};
#define URL_DEFAULTS (sizeof(url_defaults) / sizeof(url_defaults[0]))
#define URL_DEFAULTS_MAX 128 /* bytes all of them take, '&'s included */
#define DEFAULT_MAX_HISTORY 100000
#define DEFAULT_MAX_PAYLOAD (1024 * 1024)

/* Server settings duro SETs on every session it opens, unless the URL
 * says otherwise (a duro parameter of the same name, in ms; or the name in
 * libpq's options= or PGOPTIONS, which then decide). A host stopped or cut
 * off in the middle of a transaction (SIGSTOP, a partition: its kernel or
 * nobody answers, so no keepalive ends it) holds its row locks for as long
 * as its session lasts, and every other runtime's statement that needs one
 * of those rows waited behind it: one frozen runtime stopped a second one's
 * activity acks for 20 s. So duro's sessions may not sit idle in a
 * transaction for long (the server ends such a session, rolling it back),
 * and its statements do not queue behind a lock for long (they fail
 * DURO_BUSY, retryable, and the caller retries, or acks apart: pg_combine.c).
 * statement_timeout stays the server's unless the URL sets it: duro's own
 * long statements (a purge, a prune, counts over a large store) are
 * legitimate, and a statement that waits for a lock is bounded by
 * lock_timeout already. */
const char *const duro__pg_timeout_names[DURO__PG_TIMEOUTS] = {
    "lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout"};
static const int64_t timeout_defaults[DURO__PG_TIMEOUTS] = {5000, -1, 10000};
#define TIMEOUT_MAX 2147483647 /* the server's int, in ms */

size_t duro__pg_mask_url(const char *url, char *out, size_t size)
{
    return duro__mask_url(url, out, size);
}

size_t duro__pg_scrub(const char *url, const char *text, char *out, size_t size)
{
    return duro__url_scrub(url, text, out, size);
}

void duro__pg_config_free(duro__pg_config *cfg)
{
    duro__free(cfg->conninfo);
    duro__free(cfg->display);
    cfg->conninfo = NULL;
    cfg->display = NULL;
}

/* A libpq port list: comma-separated numbers 1 .. 65535, each may be
 * empty (that host's default port). */
static int valid_ports(const char *v)
{
    while (1) {
        size_t n = strcspn(v, ",");
        uint64_t x;
        if (n > 0 && duro__parse_decimal(v, n, 1, 65535, &x) != 0)
            return 0;
        if (v[n] == '\0')
            return 1;
        v += n + 1;
    }
}

/* A schema name: a plain SQL identifier, so it needs no quoting rules of
 * its own (letters, digits, '_', not starting with a digit, at most 63
 * bytes). It is always used quoted, so case matters and keywords are
 * allowed. */
static int valid_identifier(const char *v, size_t n)
{
    if (n == 0 || n > DURO__PG_SCHEMA_MAX)
        return 0;
    if (!(isalpha((unsigned char)v[0]) || v[0] == '_'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)v[i]) || v[i] == '_'))
            return 0;
    return 1;
}

/* The system's schemas: names beginning with pg_ are reserved by the
 * server (CREATE SCHEMA fails 42939) and information_schema is the SQL
 * standard's catalogue views, where duro's tables have no place. Refused in
 * any case, so that schema=PG_Catalog is not a schema of its own either. */
static int reserved_schema(const char *v, size_t n)
{
    static const char info[] = "information_schema";
    if (n >= 3 && strncasecmp(v, "pg_", 3) == 0)
        return 1;
    return n == sizeof(info) - 1 && strncasecmp(v, info, n) == 0;
}

/* The session timeout named key[0 .. n), or -1. */
static int timeout_key(const char *key, size_t n)
{
    for (int i = 0; i < DURO__PG_TIMEOUTS; i++)
        if (strlen(duro__pg_timeout_names[i]) == n &&
            strncmp(key, duro__pg_timeout_names[i], n) == 0)
            return i;
    return -1;
}

/* Marks in named[] the session timeouts that libpq options v[0 .. n)
 * set ("-c lock_timeout=5000", "--lock_timeout=5000", percent-encoded or
 * not): a whole name, followed by '=' (or %3D, or a space). */
static void names_timeouts(const char *v, size_t n, int *named)
{
    for (int i = 0; i < DURO__PG_TIMEOUTS; i++) {
        const char *name = duro__pg_timeout_names[i];
        size_t len = strlen(name);
        for (size_t at = 0; at + len < n; at++) {
            if (strncmp(v + at, name, len) != 0)
                continue;
            const char *after = v + at + len;
            size_t left = n - at - len;
            int starts = at == 0 || v[at - 1] == '=' || v[at - 1] == ' ' ||
                         v[at - 1] == '+' || v[at - 1] == '-' ||
                         (at >= 3 && strncasecmp(v + at - 3, "%20", 3) == 0);
            int assigns = after[0] == '=' || after[0] == ' ' ||
                          (left >= 3 && strncasecmp(after, "%3D", 3) == 0);
            if (starts && assigns)
                named[i] = 1;
        }
    }
}

int duro__pg_parse_url(const char *url, duro__pg_config *cfg, duro_error *err)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->schema, sizeof(cfg->schema), "duro");
    cfg->pool = DEFAULT_POOL;
    cfg->max_history = DEFAULT_MAX_HISTORY;
    cfg->max_payload = DEFAULT_MAX_PAYLOAD;
    cfg->create = 1;
    for (int i = 0; i < DURO__PG_TIMEOUTS; i++)
        cfg->session_timeouts[i] = timeout_defaults[i];
    if (url == NULL)
        return duro_error_set(err, DURO_BAD_URL, 0, "database URL is NULL");
    size_t url_len = strlen(url);
    cfg->display = duro__malloc(url_len + 8);
    cfg->conninfo = duro__malloc(url_len + URL_DEFAULTS_MAX + 1);
    if (cfg->display == NULL || cfg->conninfo == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    duro__pg_mask_url(url, cfg->display, url_len + 8);
    if (strncmp(url, "postgres://", 11) != 0 &&
        strncmp(url, "postgresql://", 13) != 0)
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "'%s' is not a postgres:// or postgresql:// URL",
                              cfg->display);

    if (duro__url_userinfo_ambiguous(url))
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "'%s': its user name or password holds an "
                              "unescaped '@', '/' or '?'; percent-encode "
                              "them (%%40, %%2F, %%3F)",
                              cfg->display);
    const char *query = strchr(url, '?');
    size_t base_len = query != NULL ? (size_t)(query - url) : url_len;
    memcpy(cfg->conninfo, url, base_len);
    size_t len = base_len;
    cfg->conninfo[len] = '\0';
    int seen_schema = 0, seen_pool = 0, seen_history = 0, seen_payload = 0;
    int seen_create = 0, seen_service = 0, seen_options = 0;
    int seen_timeout[DURO__PG_TIMEOUTS] = {0};
    int in_options[DURO__PG_TIMEOUTS] = {0}; /* named in options= */
    int kept = 0, named[URL_DEFAULTS] = {0};
    const char *s = query;
    while (s != NULL) {
        const char *p = s + 1;
        const char *next = strchr(p, '&');
        size_t n = next != NULL ? (size_t)(next - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (n == 0 || eq == NULL || eq == p)
            return duro_error_set(err, DURO_BAD_URL, 0,
                                  "'%s': every parameter is name=value (an "
                                  "empty or bare parameter is not allowed)",
                                  cfg->display);
        size_t key_len = (size_t)(eq - p);
        const char *v = eq + 1;
        size_t v_len = n - key_len - 1;
        uint64_t x;
#define KEY(k) (key_len == sizeof(k) - 1 && strncmp(p, k, key_len) == 0)
        if (KEY("schema")) {
            if (seen_schema++ || !valid_identifier(v, v_len))
                return duro_error_set(
                    err, DURO_BAD_URL, 0,
                    "'%s': schema must be given once, as an identifier "
                    "(letters, digits and _, not starting with a digit, at "
                    "most %d bytes)",
                    cfg->display, DURO__PG_SCHEMA_MAX);
            if (reserved_schema(v, v_len))
                return duro_error_set(err, DURO_BAD_URL, 0,
                                      "'%s': schema %.*s is a system schema "
                                      "(pg_* or information_schema); choose "
                                      "another name",
                                      cfg->display, (int)v_len, v);
            memcpy(cfg->schema, v, v_len);
            cfg->schema[v_len] = '\0';
        } else if (KEY("pool")) {
            if (seen_pool++ ||
                duro__parse_decimal(v, v_len, 1, DURO__PG_POOL_MAX, &x))
                return duro_error_set(err, DURO_BAD_URL, 0,
                                      "'%s': pool must be given once, 1 .. %d",
                                      cfg->display, DURO__PG_POOL_MAX);
            cfg->pool = (int)x;
            cfg->pool_given = 1;
        } else if (KEY("max_history")) {
            if (seen_history++ ||
                duro__parse_decimal(v, v_len, 1, UINT64_MAX / 2, &x))
                return duro_error_set(err, DURO_BAD_URL, 0,
                                      "'%s': max_history must be given once, "
                                      ">= 1",
                                      cfg->display);
            cfg->max_history = x;
        } else if (KEY("max_payload")) {
            if (seen_payload++ ||
                duro__parse_decimal(v, v_len, 1, 1000000000, &x))
                return duro_error_set(err, DURO_BAD_URL, 0,
                                      "'%s': max_payload must be given once, "
                                      "1 .. 1000000000",
                                      cfg->display);
            cfg->max_payload = (size_t)x;
        } else if (KEY("create")) {
            if (seen_create++ || duro__parse_decimal(v, v_len, 0, 1, &x))
                return duro_error_set(err, DURO_BAD_URL, 0,
                                      "'%s': create must be given once, 0 or "
                                      "1",
                                      cfg->display);
            cfg->create = (int)x;
        } else if (timeout_key(p, key_len) >= 0) {
            int t = timeout_key(p, key_len);
            if (seen_timeout[t]++ ||
                duro__parse_decimal(v, v_len, 0, TIMEOUT_MAX, &x))
                return duro_error_set(err, DURO_BAD_URL, 0,
                                      "'%s': %s must be given once, in "
                                      "milliseconds, 0 .. %d (0: none)",
                                      cfg->display, duro__pg_timeout_names[t],
                                      TIMEOUT_MAX);
            cfg->session_timeouts[t] = (int64_t)x;
        } else {
            /* libpq's own (host, port, user, sslmode, ...) */
            seen_service |= KEY("service");
            if (KEY("options")) {
                seen_options = 1;
                names_timeouts(v, v_len, in_options);
            }
            for (size_t i = 0; i < URL_DEFAULTS; i++)
                named[i] |= key_len == strlen(url_defaults[i][0]) &&
                            strncmp(p, url_defaults[i][0], key_len) == 0;
            cfg->conninfo[len++] = kept++ ? '&' : '?';
            memcpy(cfg->conninfo + len, p, n);
            len += n;
            cfg->conninfo[len] = '\0';
        }
#undef KEY
        s = next;
    }
    /* A timeout libpq's options name (the URL's, or PGOPTIONS when the URL
     * has none) is the options' to set, unless duro's parameter says. */
    const char *env_options = getenv("PGOPTIONS");
    if (env_options != NULL && !seen_options)
        names_timeouts(env_options, strlen(env_options), in_options);
    for (int i = 0; i < DURO__PG_TIMEOUTS; i++)
        if (in_options[i] && !seen_timeout[i])
            cfg->session_timeouts[i] = -1;
    const char *env_timeout = getenv("PGCONNECT_TIMEOUT");
    const char *env_service = getenv("PGSERVICE");
    if ((env_timeout != NULL && *env_timeout != '\0') ||
        (env_service != NULL && *env_service != '\0') || seen_service)
        for (size_t i = 0; i < URL_DEFAULTS; i++)
            named[i] |= strcmp(url_defaults[i][0], "connect_timeout") == 0;
    for (size_t i = 0; i < URL_DEFAULTS; i++)
        if (!named[i])
            len += (size_t)snprintf(cfg->conninfo + len,
                                    url_len + URL_DEFAULTS_MAX + 1 - len,
                                    "%c%s=%s", kept++ ? '&' : '?',
                                    url_defaults[i][0], url_defaults[i][1]);
    /* libpq checks the rest now, so a bad URL fails before any
     * connection is tried. Its message may quote the URL: it is replaced
     * by ours, which names the masked URL. */
    char *why = NULL;
    PQconninfoOption *opts = PQconninfoParse(cfg->conninfo, &why);
    if (opts == NULL) {
        if (why == NULL)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        /* libpq's reason may quote the URI, a decoded parameter name or
         * a value that does not decode: scrubbed of every secret. */
        size_t n = strlen(why);
        while (n > 0 && (why[n - 1] == '\n' || why[n - 1] == ' '))
            why[--n] = '\0';
        char reason[DURO_ERROR_MESSAGE_MAX];
        duro__pg_scrub(cfg->conninfo, why, reason, sizeof(reason));
        PQfreemem(why);
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "'%s' is not a valid libpq connection URI: %s",
                              cfg->display, reason);
    }
    /* libpq reads the port only when it connects, and a bad one then
     * fails like a server that is down (retryably). */
    const char *bad_port = NULL;
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
        if (strcmp(o->keyword, "port") == 0 && o->val != NULL &&
            !valid_ports(o->val))
            bad_port = o->val;
    if (bad_port != NULL) {
        duro_error_set(err, DURO_BAD_URL, 0,
                       "'%s': port '%.40s' is not a port number (1 .. 65535; "
                       "one per host, separated by commas)",
                       cfg->display, bad_port);
        PQconninfoFree(opts);
        return DURO_BAD_URL;
    }
    PQconninfoFree(opts);
    return DURO_OK;
}
