/* pg_own_cluster.h - a PostgreSQL cluster of the test's own, for tests that
 * stop, restart or crash the server (the fixture's serves the other
 * PostgreSQL tests meanwhile): .ci/pg-cluster in a directory of the test's
 * temporary directory, on port $DURO_PG_PORT (default 5544) plus an offset
 * of the test's. Main test thread only. */
#ifndef DURO_PG_OWN_CLUSTER_H
#define DURO_PG_OWN_CLUSTER_H

#include <stddef.h>

/* Starts the cluster in test_path(name) on port $DURO_PG_PORT + port_offset
 * and copies its URL (postgresql:///postgres?host=...&port=...&user=...)
 * to url. Exits 77 (skipped) without PostgreSQL's server binaries; fails
 * the test when the cluster does not start. The cluster is stopped and
 * removed at exit (unless DURO_TEST_KEEP is set), failed or not: call it
 * before starting anything that must be gone by then (children are
 * killed by the test itself). */
void pg_own_cluster_start(const char *name, int port_offset, char *url,
                          size_t size);

/* Runs `pg-cluster VERB DIR [MODE]` on the started cluster (MODE NULL:
 * none): crash, restart fast|immediate, down [fast|immediate], up. Returns
 * its exit status (0: done; -1: it did not run). */
int pg_own_cluster(const char *verb, const char *mode);

#endif
