/* version.c - the version of the library itself, as opposed to the version
 * of the header a program was compiled against (duro.h). No state. */
#include "duro.h"

const char *duro_version(void)
{
    return DURO_VERSION_STRING;
}

int duro_version_number(void)
{
    return DURO_VERSION_NUMBER;
}
