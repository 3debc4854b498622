/* rt_store.h - the store of each test of a runtime test program built once
 * per store: rt_init's SQLite file, or - with RT_STORE_PG defined before
 * this is included - a schema of its own on the PostgreSQL test server
 * ("<prefix>_<pid>_<test name>"), dropped by rt_store_done. Header-only,
 * as the choice is the including program's. */
#ifndef DURO_TEST_RT_STORE_H
#define DURO_TEST_RT_STORE_H

#include "rt_util.h"

#ifdef RT_STORE_PG
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pg_util.h"

#define RT_STORE_MAX 32 /* fixtures alive at once */

static struct {
    const rt_fixture *f; /* NULL: free */
    char schema[64];
    char url[4300];
} rt_stores[RT_STORE_MAX];

static inline void rt_store_init(rt_fixture *f, const char *prefix,
                                 const char *name)
{
    rt_init(f, name);
    int i = 0;
    while (i < RT_STORE_MAX && rt_stores[i].f != NULL)
        i++;
    CHECK(i < RT_STORE_MAX);
    if (i == RT_STORE_MAX)
        return;
    rt_stores[i].f = f;
    char schema[sizeof(rt_stores[i].schema)];
    snprintf(schema, sizeof(schema), "%s_%ld_%s", prefix, (long)getpid(), name);
    for (char *p = schema; *p; p++)
        if (*p == '.' || *p == '-')
            *p = '_';
    memcpy(rt_stores[i].schema, schema, sizeof(schema));
    snprintf(rt_stores[i].url, sizeof(rt_stores[i].url), "%s%cschema=%s",
             pg_test_url(), strchr(pg_test_url(), '?') ? '&' : '?', schema);
    f->url = rt_stores[i].url;
}

static inline void rt_store_done(rt_fixture *f)
{
    rt_done(f);
    for (int i = 0; i < RT_STORE_MAX; i++)
        if (rt_stores[i].f == f) {
            pg_test_drop_schema(rt_stores[i].schema);
            rt_stores[i].f = NULL;
        }
}
#else
static inline void rt_store_init(rt_fixture *f, const char *prefix,
                                 const char *name)
{
    (void)prefix;
    rt_init(f, name);
}

static inline void rt_store_done(rt_fixture *f)
{
    rt_done(f);
}
#endif

#endif
