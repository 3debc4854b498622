/* sqlite_provider.c - placeholder until the SQLite provider lands. */
#include "base/base.h"
#include "providers/providers.h"

int duro__sqlite_open(const char *spec, duro_provider **out, duro_error *err)
{
    (void)spec;
    *out = NULL;
    return duro_error_set(err, DURO_UNSUPPORTED, 0, "not implemented yet");
}
