/* statements.c - the names of the ids of statements.h, and a dialect's
 * statements listed in that order (for EXPLAIN checks in the tests). Any
 * thread: constant tables only. */
#include "providers/sql/sql.h"

static const char *const names[DURO__SQL_COUNT] = {
#define DURO__X(id) #id,
    DURO__SQL_IDS(DURO__X)
#undef DURO__X
};

const char *duro__sql_statement_id_name(duro__sql_stmt_id id)
{
    return (size_t)id < DURO__SQL_COUNT ? names[id] : "?";
}

/* The id of the i-th statement d has a text for; DURO__SQL_COUNT past the
 * last. */
static size_t nth(const duro__sql_dialect *d, size_t i)
{
    for (size_t id = 0; id < DURO__SQL_COUNT; id++)
        if (d->texts[id] != NULL && i-- == 0)
            return id;
    return DURO__SQL_COUNT;
}

size_t duro__sql_statement_count(const duro__sql_dialect *d)
{
    size_t n = 0;
    for (size_t id = 0; id < DURO__SQL_COUNT; id++)
        n += d->texts[id] != NULL;
    return n;
}

const char *duro__sql_statement_name(const duro__sql_dialect *d, size_t i)
{
    size_t id = nth(d, i);
    return id < DURO__SQL_COUNT ? names[id] : NULL;
}

const char *duro__sql_statement_sql(const duro__sql_dialect *d, size_t i)
{
    size_t id = nth(d, i);
    return id < DURO__SQL_COUNT ? d->texts[id] : NULL;
}
