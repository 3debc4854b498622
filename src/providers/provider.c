/* provider.c - opens a provider from a database URL by its scheme. */
#include <string.h>

#include "base/base.h"
#include "providers/providers.h"

int duro_provider_open(const char *url, duro_provider **out, duro_error *err)
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
        return duro__pg_open(url, out, err);
#else
        /* Not even the scheme's rest is echoed: it may hold a password. */
        return duro_error_set(err, DURO_UNSUPPORTED, 0,
                              "this libduro was built without the PostgreSQL "
                              "provider (DURO_POSTGRES=OFF or libpq not "
                              "found)");
#endif
    }
    return duro_error_set(err, DURO_BAD_URL, 0,
                          "unknown database URL scheme in '%s' (expected "
                          "sqlite:path, sqlite::memory:, postgres://... or "
                          "postgresql://...)",
                          url);
}

void duro_provider_close(duro_provider *p)
{
    if (p != NULL && p->close != NULL)
        p->close(p);
}
