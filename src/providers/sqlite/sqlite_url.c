/* sqlite_url.c - parses the part of a "sqlite:" database URL after the scheme
 * (path or ":memory:", then "?key=value&...") into the provider's
 * configuration. Pure: touches nothing on disk. Any thread. */
#include <limits.h>
#include <string.h>
#include <strings.h>

#include "providers/sqlite/sqlite_internal.h"

#define DEFAULT_BUSY_TIMEOUT_MS 5000
#define DEFAULT_MAX_HISTORY 100000
#define DEFAULT_MAX_PAYLOAD (1024 * 1024)
#define DEFAULT_POOL 4
/* ~8 MB of WAL frames with 2 KiB pages, so the WAL file stays under ~17 MB
 * (twice the interval; see duro__sqlite_checkpoint). 1000 (SQLite's own
 * wal_autocheckpoint) cost a quarter of chain's throughput; 4000 nothing
 * measurable at 1,000 chains, a few percent over longer runs
 * (bench/RESULTS.md, issue 21). */
#define DEFAULT_CHECKPOINT_PAGES 4000
#define MAX_CHECKPOINT_PAGES 1000000
#define MAX_PAYLOAD_LIMIT 1000000000u /* SQLite's default SQLITE_MAX_LENGTH */

static int parse_synchronous(const char *value, size_t len)
{
    static const char *const levels[] = {"off", "normal", "full", "extra"};
    for (size_t i = 0; i < DURO__ARRAY_LEN(levels); i++)
        if (strlen(levels[i]) == len && strncasecmp(value, levels[i], len) == 0)
            return (int)i;
    return -1;
}

enum {
    PARAM_SYNCHRONOUS,
    PARAM_BUSY,
    PARAM_HISTORY,
    PARAM_PAYLOAD,
    PARAM_POOL,
    PARAM_CREATE,
    PARAM_MODE,
    PARAM_CHECKPOINT
};

static const char *const param_names[] = {
    "synchronous", "busy_timeout_ms", "max_history", "max_payload",
    "pool",        "create",          "mode",        "checkpoint_pages"};

/* Applies one "key=value" of length len. */
static int parse_param(const char *param, size_t len, unsigned *seen,
                       duro__sqlite_config *cfg, duro_error *err)
{
    const char *eq = memchr(param, '=', len);
    if (len == 0)
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "empty parameter in sqlite URL (stray '&' or "
                              "'?')");
    if (eq == NULL)
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "sqlite URL parameter '%.*s' has no value "
                              "(expected key=value)",
                              (int)len, param);
    size_t key_len = (size_t)(eq - param);
    const char *value = eq + 1;
    size_t value_len = len - key_len - 1;
    int which = -1;
    for (size_t i = 0; i < DURO__ARRAY_LEN(param_names); i++)
        if (strlen(param_names[i]) == key_len &&
            memcmp(param, param_names[i], key_len) == 0)
            which = (int)i;
    if (which < 0)
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "unknown sqlite URL parameter '%.*s' (known: "
                              "synchronous, busy_timeout_ms, max_history, "
                              "max_payload, pool, create, mode, "
                              "checkpoint_pages)",
                              (int)key_len, param);
    if (*seen & (1u << which))
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "sqlite URL parameter '%s' given twice",
                              param_names[which]);
    *seen |= 1u << which;

    uint64_t n = 0;
    switch (which) {
    case PARAM_SYNCHRONOUS:
        cfg->synchronous = parse_synchronous(value, value_len);
        if (cfg->synchronous >= 0)
            return DURO_OK;
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "bad value '%.*s' for sqlite URL parameter "
                              "synchronous (expected off, normal, full or "
                              "extra)",
                              (int)value_len, value);
    case PARAM_BUSY:
        if (duro__parse_decimal(value, value_len, 0, INT_MAX, &n) == 0) {
            cfg->busy_timeout_ms = (int)n;
            return DURO_OK;
        }
        break;
    case PARAM_HISTORY:
        if (duro__parse_decimal(value, value_len, 1, INT64_MAX, &n) == 0) {
            cfg->max_history = n;
            return DURO_OK;
        }
        break;
    case PARAM_PAYLOAD:
        if (duro__parse_decimal(value, value_len, 1, MAX_PAYLOAD_LIMIT, &n) ==
            0) {
            cfg->max_payload = (size_t)n;
            return DURO_OK;
        }
        break;
    case PARAM_POOL:
        if (duro__parse_decimal(value, value_len, 0, DURO__SQLITE_POOL_MAX,
                                &n) == 0) {
            cfg->pool = (int)n;
            return DURO_OK;
        }
        break;
    case PARAM_CREATE:
        if (duro__parse_decimal(value, value_len, 0, 1, &n) == 0) {
            cfg->create = (int)n;
            return DURO_OK;
        }
        break;
    case PARAM_MODE:
        if (value_len == 2 &&
            (memcmp(value, "ro", 2) == 0 || memcmp(value, "rw", 2) == 0)) {
            cfg->read_only = value[1] == 'o';
            return DURO_OK;
        }
        break;
    case PARAM_CHECKPOINT:
        if (duro__parse_decimal(value, value_len, 1, MAX_CHECKPOINT_PAGES,
                                &n) == 0) {
            cfg->checkpoint_pages = (int)n;
            return DURO_OK;
        }
        break;
    }
    static const char *const ranges[] = {
        "",
        "a number of milliseconds, 0 to 2147483647",
        "a whole number of events, at least 1",
        "a number of bytes, 1 to 1000000000",
        "a number of connections, 0 to 64",
        "0 or 1",
        "ro or rw",
        "a number of WAL pages, 1 to 1000000"};
    return duro_error_set(err, DURO_BAD_URL, 0,
                          "bad value '%.*s' for sqlite URL parameter %s "
                          "(expected %s)",
                          (int)value_len, value, param_names[which],
                          ranges[which]);
}

/* The known parameter that follows a '&' in path[0..len) as "&key=", or
 * NULL: "sqlite:x.db&pool=1" means "?pool=1", not a file of that name. */
static const char *param_in_path(const char *path, size_t len)
{
    for (const char *amp = memchr(path, '&', len); amp != NULL;
         amp = memchr(amp + 1, '&', len - (size_t)(amp + 1 - path))) {
        size_t rest = len - (size_t)(amp + 1 - path);
        for (size_t i = 0; i < DURO__ARRAY_LEN(param_names); i++) {
            size_t n = strlen(param_names[i]);
            if (rest > n && memcmp(amp + 1, param_names[i], n) == 0 &&
                amp[1 + n] == '=')
                return param_names[i];
        }
    }
    return NULL;
}

int duro__sqlite_parse_url(const char *spec, duro__sqlite_config *cfg,
                           duro_error *err)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->synchronous = 1;
    cfg->busy_timeout_ms = DEFAULT_BUSY_TIMEOUT_MS;
    cfg->max_history = DEFAULT_MAX_HISTORY;
    cfg->max_payload = DEFAULT_MAX_PAYLOAD;
    cfg->pool = DEFAULT_POOL;
    cfg->create = 1;
    cfg->checkpoint_pages = DEFAULT_CHECKPOINT_PAGES;
    if (spec == NULL)
        return duro_error_set(err, DURO_BAD_URL, 0, "sqlite URL is NULL");

    /* "sqlite:///abs/path": the authority part is empty, drop the "//".
     * A file has no host: "sqlite://host/x.db" would otherwise open the
     * relative path "host/x.db", which is never what was meant. */
    if (strncmp(spec, "//", 2) == 0) {
        spec += 2;
        size_t authority = strcspn(spec, "/?");
        if (authority > 0)
            return duro_error_set(
                err, DURO_BAD_URL, 0,
                "sqlite URL names a host '%.*s': a SQLite file has none "
                "(expected sqlite:PATH, sqlite:///abs/path or "
                "sqlite::memory:)",
                (int)DURO__MIN(authority, (size_t)200), spec);
    }
    const char *query = strchr(spec, '?');
    size_t path_len = query != NULL ? (size_t)(query - spec) : strlen(spec);
    if (path_len == 0)
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "sqlite URL has an empty path (expected "
                              "sqlite:PATH, sqlite:///abs/path or "
                              "sqlite::memory:)");
    const char *misplaced = param_in_path(spec, path_len);
    if (misplaced != NULL)
        return duro_error_set(err, DURO_BAD_URL, 0,
                              "sqlite URL path '%.*s' holds parameter '%s' "
                              "after a '&': parameters start with '?' "
                              "(sqlite:PATH?%s=...)",
                              (int)DURO__MIN(path_len, (size_t)200), spec,
                              misplaced, misplaced);

    unsigned seen = 0;
    if (query != NULL) {
        const char *param = query + 1;
        for (;;) {
            const char *amp = strchr(param, '&');
            size_t len = amp != NULL ? (size_t)(amp - param) : strlen(param);
            int rc = parse_param(param, len, &seen, cfg, err);
            if (rc != DURO_OK)
                return rc;
            if (amp == NULL)
                break;
            param = amp + 1;
        }
    }

    cfg->memory = path_len == 8 && memcmp(spec, ":memory:", 8) == 0;
    if (cfg->read_only) {
        /* mode=ro creates nothing: create=1 asks for the opposite, and a
         * private in-memory database that cannot be written is empty. */
        if (cfg->create && (seen & (1u << PARAM_CREATE)))
            return duro_error_set(err, DURO_BAD_URL, 0,
                                  "sqlite URL parameters mode=ro and "
                                  "create=1 contradict each other (mode=ro "
                                  "never creates a file)");
        if (cfg->memory)
            return duro_error_set(err, DURO_BAD_URL, 0,
                                  "sqlite URL parameter mode=ro has no "
                                  "meaning for :memory: (a private database "
                                  "that cannot be written is empty)");
        cfg->create = 0;
    }
    if (cfg->memory) {
        cfg->pool = 0; /* another connection would see another database */
        cfg->path = duro__strdup(":memory:");
    } else if (path_len >= 5 && memcmp(spec, "file:", 5) == 0) {
        /* SQLite may be built to read "file:" names as URIs; keep the
         * path literal. */
        cfg->path = duro__sprintf("./%.*s", (int)path_len, spec);
    } else {
        cfg->path = duro__strndup(spec, path_len);
    }
    if (cfg->path == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    return DURO_OK;
}

void duro__sqlite_config_free(duro__sqlite_config *cfg)
{
    duro__free(cfg->path);
    cfg->path = NULL;
}
