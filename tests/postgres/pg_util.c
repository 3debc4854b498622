/* pg_util.c - the PostgreSQL tests' URL, connections and checked
 * statements (pg_util.h). The URL is read once, under a once-flag. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pg_util.h"
#include "test.h"

static char url[4096];
static pthread_once_t url_once = PTHREAD_ONCE_INIT;

static void read_url(void)
{
    const char *env = getenv("DURO_TEST_PG_URL");
    if (env != NULL && env[0] != '\0') {
        if (strlen(env) >= sizeof(url)) {
            fprintf(stderr, "DURO_TEST_PG_URL is longer than %zu bytes\n",
                    sizeof(url) - 1);
            exit(1);
        }
        strcpy(url, env);
        return;
    }
    const char *path = getenv("DURO_TEST_PG_URL_FILE");
    if (path == NULL || path[0] == '\0') {
        fprintf(stderr,
                "no PostgreSQL server to test against: PostgreSQL's server "
                "binaries were not found when this build was configured and "
                "DURO_TEST_PG_URL is not set; skipped\n");
        exit(77);
    }
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(url, sizeof(url), f) == NULL) {
        fprintf(stderr,
                "cannot read the PostgreSQL URL from %s (written by the "
                "pg_cluster_start test: run the tests with ctest, or set "
                "DURO_TEST_PG_URL)\n",
                path);
        exit(1);
    }
    fclose(f);
    url[strcspn(url, "\r\n")] = '\0';
}

const char *pg_test_url(void)
{
    pthread_once(&url_once, read_url);
    return url;
}

PGconn *pg_test_connect(void)
{
    PGconn *conn = PQconnectdb(pg_test_url());
    if (conn == NULL) {
        test_fail(__FILE__, __LINE__, "PQconnectdb(%s): out of memory",
                  pg_test_url());
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        test_fail(__FILE__, __LINE__, "cannot connect to %s: %s", pg_test_url(),
                  PQerrorMessage(conn));
        PQfinish(conn);
        return NULL;
    }
    /* Keep NOTICEs ("schema ... does not exist, skipping") out of the log. */
    if (!pg_test_command(conn, "SET client_min_messages = warning", __FILE__,
                         __LINE__)) {
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

PGresult *pg_test_exec(PGconn *conn, const char *sql, ExecStatusType expected,
                       const char *file, int line)
{
    PGresult *res = PQexec(conn, sql);
    if (PQresultStatus(res) != expected) {
        /* Copy the message: test_fail may not return. */
        char message[1024];
        snprintf(message, sizeof(message), "%s", PQerrorMessage(conn));
        ExecStatusType got = PQresultStatus(res);
        PQclear(res);
        test_fail(file, line, "%s: %s, expected %s: %s", sql, PQresStatus(got),
                  PQresStatus(expected), message);
        return NULL;
    }
    return res;
}

int pg_test_command(PGconn *conn, const char *sql, const char *file, int line)
{
    PGresult *res = pg_test_exec(conn, sql, PGRES_COMMAND_OK, file, line);
    PQclear(res);
    return res != NULL;
}

void pg_test_drop_schema(const char *name)
{
    PGconn *conn = pg_test_connect();
    if (conn == NULL)
        return;
    char sql[256];
    snprintf(sql, sizeof(sql), "DROP SCHEMA \"%s\" CASCADE", name);
    PG_COMMAND(conn, sql);
    PQfinish(conn);
}
