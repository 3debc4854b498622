/* test_pg_crash.c - crash recovery on a real PostgreSQL server: three
 * crash_worker processes share a fresh schema and 300 orchestrations, and
 * the one running the Hold activity is SIGKILLed in the middle of it and
 * started again. The scenario and its checks (every instance completed as
 * it would have, exactly-once history, every scheduled activity ran, the
 * Hold activity re-delivered to another process after its lock expired)
 * are test_crash's, in crash_util.c. The schema is dropped at exit unless
 * DURO_TEST_KEEP is set. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crash_util.h"
#include "pg_util.h"

static char schema[64]; /* created by this run; empty before */

TEST(three_processes_one_killed_mid_activity)
{
    const char *base = pg_test_url(); /* exits 77 without a server */
    /* The workers open the fresh schema at once; the migration's advisory
     * lock makes that safe. */
    snprintf(schema, sizeof(schema), "pgcrash_%ld", (long)getpid());
    char url[4200], log[512], errlog[512];
    snprintf(url, sizeof(url), "%s%cschema=%s", base,
             strchr(base, '?') ? '&' : '?', schema);
    snprintf(log, sizeof(log), "%s", test_path("many.log"));
    snprintf(errlog, sizeof(errlog), "%s", test_path("many.stderr"));
    crash_three_processes_one_killed(url, log, errlog);
}

/* After the tests, failed or not (a failed check leaves the test early):
 * no worker is left running then. Not pg_test_connect, whose failure would
 * end a test that is no longer running. */
static void drop_schema(void)
{
    if (schema[0] == '\0' || getenv("DURO_TEST_KEEP") != NULL)
        return;
    PGconn *c = PQconnectdb(pg_test_url());
    char sql[128];
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    if (PQstatus(c) == CONNECTION_OK) /* not a NOTICE per dropped table */
        PQclear(PQexec(c, "SET client_min_messages TO warning"));
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fprintf(stderr, "  cannot drop schema %s: %s", schema,
                PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

int main(int argc, char **argv)
{
    static const test_case tests[] = {
        T(three_processes_one_killed_mid_activity)};
    int rc = test_run(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
    drop_schema();
    return rc;
}
