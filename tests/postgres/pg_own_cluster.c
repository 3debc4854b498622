/* pg_own_cluster.c - a cluster of the test's own (pg_own_cluster.h): runs
 * .ci/pg-cluster (DURO_PG_CLUSTER) through the shell, on the port chosen at
 * start; removes the cluster at exit. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "pg_own_cluster.h"
#include "test.h"

#ifndef DURO_PG_CLUSTER
#error "DURO_PG_CLUSTER (the path of .ci/pg-cluster) must be defined"
#endif

static char cluster_dir[512]; /* set once the cluster was started */
static char port_env[64];

/* Runs `pg-cluster ARGS` on this test's port, ARGS formatted from fmt;
 * returns its exit status (-1 when it did not run or did not exit). The
 * command is as long as it needs: the paths in it are as long as the
 * checkout's. */
static int pg_cluster(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int pg_cluster(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *args = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (args == NULL)
        return -1;
    va_start(ap, fmt);
    vsnprintf(args, (size_t)n + 1, fmt, ap);
    va_end(ap);
#define PG_CLUSTER_CMD "%s sh '%s' %s"
    n = snprintf(NULL, 0, PG_CLUSTER_CMD, port_env, DURO_PG_CLUSTER, args);
    char *cmd = n >= 0 ? malloc((size_t)n + 1) : NULL;
    int st = -1;
    if (cmd != NULL) {
        snprintf(cmd, (size_t)n + 1, PG_CLUSTER_CMD, port_env, DURO_PG_CLUSTER,
                 args);
        st = system(cmd);
    }
    free(cmd);
    free(args);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* At exit, failed or not. */
static void remove_cluster(void)
{
    if (cluster_dir[0] == '\0' || getenv("DURO_TEST_KEEP") != NULL)
        return;
    if (pg_cluster("stop '%s'", cluster_dir) != 0)
        fprintf(stderr, "  cannot stop the cluster in %s\n", cluster_dir);
}

void pg_own_cluster_start(const char *name, int port_offset, char *url,
                          size_t size)
{
    const char *base = getenv("DURO_PG_PORT");
    snprintf(port_env, sizeof(port_env), "DURO_PG_PORT=%d",
             (base != NULL ? atoi(base) : 5544) + port_offset);
    char dir[512], url_file[600];
    snprintf(dir, sizeof(dir), "%s", test_path(name));
    snprintf(url_file, sizeof(url_file), "%s.url", dir);
    int rc = pg_cluster("start '%s' '%s' >/dev/null", dir, url_file);
    if (rc == 77) {
        fprintf(stderr, "  no PostgreSQL server binaries: skipped\n");
        exit(77);
    }
    if (cluster_dir[0] == '\0')
        atexit(remove_cluster); /* after test_tmpdir's: it runs first */
    snprintf(cluster_dir, sizeof(cluster_dir), "%s", dir);
    CHECK_MSG(rc == 0, "pg-cluster start failed (%d)", rc);
    FILE *f = fopen(url_file, "r");
    CHECK_MSG(f != NULL, "no URL file %s", url_file);
    url[0] = '\0';
    if (fgets(url, (int)size, f) == NULL)
        url[0] = '\0';
    fclose(f);
    url[strcspn(url, "\n")] = '\0';
    CHECK_MSG(url[0] != '\0', "empty URL file %s", url_file);
}

int pg_own_cluster(const char *verb, const char *mode)
{
    if (cluster_dir[0] == '\0')
        return -1;
    return pg_cluster("%s '%s' %s", verb, cluster_dir, mode ? mode : "");
}
