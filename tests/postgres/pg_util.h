/* pg_util.h - what every PostgreSQL test needs: the server's URL (from
 * DURO_TEST_PG_URL, or the file the CTest fixture wrote), connections that
 * fail the test with libpq's own message, and checked statements. Used from
 * any thread; each connection belongs to one thread at a time. */
#ifndef DURO_PG_UTIL_H
#define DURO_PG_UTIL_H

#include <libpq-fe.h>

/* The URL of the server the tests use: DURO_TEST_PG_URL when set, else the
 * first line of the file DURO_TEST_PG_URL_FILE names (written by the
 * pg_cluster_start fixture). Without either, the process prints why and
 * exits 77, which CTest reports as skipped; a named file that cannot be
 * read is a failure (exit 1). The string is static. */
const char *pg_test_url(void);

/* Connects to pg_test_url(), with client_min_messages = warning; fails the
 * test (test_fail) with libpq's message when it cannot, returning NULL.
 * Close with PQfinish. */
PGconn *pg_test_connect(void);

/* Runs `sql` (no parameters) and fails the test unless the result status is
 * `expected` (PGRES_COMMAND_OK, PGRES_TUPLES_OK). Returns the result (free
 * with PQclear), or NULL after a failure. */
PGresult *pg_test_exec(PGconn *conn, const char *sql, ExecStatusType expected,
                       const char *file, int line);
#define PG_EXEC(conn, sql, expected)                                           \
    pg_test_exec((conn), (sql), (expected), __FILE__, __LINE__)

/* PG_EXEC for statements whose result is not needed (it is cleared);
 * returns 1 when the statement succeeded. */
int pg_test_command(PGconn *conn, const char *sql, const char *file, int line);
#define PG_COMMAND(conn, sql) pg_test_command((conn), (sql), __FILE__, __LINE__)

/* Drops schema `name` and everything in it (DROP SCHEMA ... CASCADE);
 * fails the test when it cannot. */
void pg_test_drop_schema(const char *name);

#endif
