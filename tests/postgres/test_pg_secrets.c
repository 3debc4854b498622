/* test_pg_secrets.c - a password in a URL, however it is spelled, is in no
 * message of a real server's refusals: a wrong password (the server checks
 * it: password authentication failed), a schema that does not exist
 * (create=0, the right password), a server that is not there (connection
 * refused). Each spelling is first shown to be one libpq reads as the
 * password (the right one opens the store), so the test hides what libpq
 * really sends. On a cluster of this test's own (the fixture's trusts
 * every local connection, so no password is ever checked there), whose
 * pg_hba.conf asks one role for its password (scram-sha-256).
 *
 * Needs the server binaries (exits 77, skipped, without them). The
 * cluster's port is $DURO_PG_PORT (default 5544) plus 5; it is removed at
 * exit unless DURO_TEST_KEEP is set. */
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#ifndef DURO_PG_CLUSTER
#error "DURO_PG_CLUSTER (the path of .ci/pg-cluster) must be defined"
#endif

static char cluster_dir[512]; /* set once the cluster was started */
static char port_env[64];
static int port;

/* Runs `pg-cluster ARGS` on this test's port, ARGS formatted from fmt;
 * returns its exit status (-1 when it did not run or did not exit). */
static int pg_cluster(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int pg_cluster(const char *fmt, ...)
{
    char args[1200], cmd[1800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "%s sh '%s' %s", port_env, DURO_PG_CLUSTER,
             args);
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs sql as the superuser on conn; fails the test unless it succeeds. */
static void exec_ok(PGconn *conn, const char *sql)
{
    PGresult *r = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(r);
    CHECK_MSG(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
              PQerrorMessage(conn));
    PQclear(r);
}

#define ROLE "duro_pw"
#define RIGHT "S3cret-right"
#define WRONG "S3cret-wrong"

/* The ways a URL gives libpq its password: in the userinfo, or as a
 * parameter named `param` (percent-encoded or not), its '-'
 * percent-encoded or not. */
static const struct {
    const char *what;
    const char *param; /* NULL: the userinfo */
    int encode;        /* the password's '-' as %2D */
} spellings[] = {
    {"userinfo", NULL, 0},
    {"userinfo, percent-encoded", NULL, 1},
    {"password=", "password", 0},
    {"password=, value percent-encoded", "password", 1},
    {"pass%77ord=", "pass%77ord", 0},
    {"%70%61%73%73%77%6F%72%64=", "%70%61%73%73%77%6F%72%64", 1},
};
#define SPELLINGS (sizeof(spellings) / sizeof(spellings[0]))

/* The URL of spelling i with password `pw`, on port `on`, then `tail`. */
static void url_of(size_t i, const char *pw, int on, const char *hostdir,
                   const char *tail, char *out, size_t size)
{
    char value[64];
    size_t dash = strcspn(pw, "-");
    if (spellings[i].encode && pw[dash] == '-')
        snprintf(value, sizeof(value), "%.*s%%2D%s", (int)dash, pw,
                 pw + dash + 1);
    else
        snprintf(value, sizeof(value), "%s", pw);
    const char *param = spellings[i].param;
    snprintf(out, size, "postgresql://%s%s%s@/postgres?host=%s&port=%d%s%s%s%s",
             ROLE, param == NULL ? ":" : "", param == NULL ? value : "",
             hostdir, on, param != NULL ? "&" : "", param != NULL ? param : "",
             param != NULL ? "=" : "", param != NULL ? value : "");
    size_t n = strlen(out);
    snprintf(out + n, size - n, "%s", tail);
}

/* Opens url, expecting `expected`; fails the test when the message holds
 * the password in any form, or lacks `needle`. */
static void open_fails(const char *what, const char *url, int expected,
                       const char *needle)
{
    duro_provider *p = NULL;
    duro_error e;
    duro_error_clear(&e);
    int rc = duro_provider_open(url, &p, &e);
    if (rc == DURO_OK)
        duro_provider_close(p);
    CHECK_MSG(rc == expected, "%s: %s, expected %s (%s)", what,
              duro_errname(rc), duro_errname(expected), e.message);
    CHECK_MSG(strstr(e.message, "S3cret") == NULL &&
                  strstr(e.message, "%2D") == NULL &&
                  strstr(duro_errmsg(), "S3cret") == NULL,
              "%s: the password is in '%s'", what, e.message);
    CHECK_MSG(strstr(e.message, needle) != NULL, "%s: '%s' does not say '%s'",
              what, e.message, needle);
}

TEST(no_refusal_of_a_real_server_names_the_password)
{
    const char *base = getenv("DURO_PG_PORT");
    port = (base != NULL ? atoi(base) : 5544) + 5;
    snprintf(port_env, sizeof(port_env), "DURO_PG_PORT=%d", port);
    char dir[512], url_file[600];
    snprintf(dir, sizeof(dir), "%s", test_path("pgsecrets"));
    snprintf(url_file, sizeof(url_file), "%s.url", dir);
    int rc = pg_cluster("start '%s' '%s' >/dev/null", dir, url_file);
    if (rc == 77) {
        fprintf(stderr, "  no PostgreSQL server binaries: skipped\n");
        exit(77);
    }
    CHECK_MSG(rc == 0, "pg-cluster start failed (%d)", rc);
    snprintf(cluster_dir, sizeof(cluster_dir), "%s", dir);
    char superuser_url[700] = "", hostdir[600] = "";
    FILE *f = fopen(url_file, "r");
    CHECK_MSG(f != NULL, "no URL file %s", url_file);
    if (fgets(superuser_url, sizeof(superuser_url), f) == NULL)
        superuser_url[0] = '\0';
    fclose(f);
    superuser_url[strcspn(superuser_url, "\n")] = '\0';
    /* postgresql:///postgres?host=ROOT&port=P&user=postgres */
    const char *h = strstr(superuser_url, "?host=");
    CHECK_MSG(h != NULL, "no host in %s", superuser_url);
    snprintf(hostdir, sizeof(hostdir), "%.*s", (int)strcspn(h + 6, "&"), h + 6);

    /* A role whose password the server checks; every other local
     * connection stays trusted. */
    PGconn *su = PQconnectdb(superuser_url);
    CHECK_MSG(PQstatus(su) == CONNECTION_OK, "%s", PQerrorMessage(su));
    exec_ok(su, "CREATE ROLE " ROLE " LOGIN PASSWORD '" RIGHT "'");
    exec_ok(su, "GRANT CREATE ON DATABASE postgres TO " ROLE);
    PGresult *r = PQexec(su, "SELECT current_setting('hba_file')");
    CHECK_MSG(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(su));
    char copy[1024];
    snprintf(copy, sizeof(copy),
             "COPY (VALUES ('local all " ROLE " scram-sha-256'), "
             "('local all all trust')) TO '%s'",
             PQgetvalue(r, 0, 0));
    PQclear(r);
    exec_ok(su, copy);
    exec_ok(su, "SELECT pg_reload_conf()");
    PQfinish(su);

    /* The reload is taken by the next connections, soon: wait until a
     * wrong password is refused. */
    char check[900];
    snprintf(check, sizeof(check),
             "postgresql://" ROLE ":" WRONG "@/postgres?host=%s&port=%d",
             hostdir, port);
    int64_t deadline = test_now_ms() + 20000;
    int checked = 0;
    while (!checked && test_now_ms() < deadline) {
        PGconn *c = PQconnectdb(check);
        checked = PQstatus(c) != CONNECTION_OK &&
                  strstr(PQerrorMessage(c), "password authentication") != NULL;
        PQfinish(c);
        if (!checked)
            test_sleep_ms(20);
    }
    CHECK_MSG(checked, "the server does not check " ROLE "'s password");

    for (size_t i = 0; i < SPELLINGS; i++) {
        char url[1200], what[160];
        /* libpq reads it as the password: the right one opens a store */
        url_of(i, RIGHT, port, hostdir, "&schema=secrets", url, sizeof(url));
        duro_provider *p = NULL;
        duro_error e;
        rc = duro_provider_open(url, &p, &e);
        CHECK_MSG(rc == DURO_OK, "%s, right password: %s (%s)",
                  spellings[i].what, duro_errname(rc), e.message);
        duro_provider_close(p);

        snprintf(what, sizeof(what), "%s, wrong password", spellings[i].what);
        url_of(i, WRONG, port, hostdir, "&schema=secrets", url, sizeof(url));
        open_fails(what, url, DURO_STORAGE, "password authentication failed");

        snprintf(what, sizeof(what), "%s, no such schema", spellings[i].what);
        url_of(i, RIGHT, port, hostdir, "&schema=nosuch&create=0", url,
               sizeof(url));
        open_fails(what, url, DURO_NOT_FOUND, "does not exist");

        snprintf(what, sizeof(what), "%s, nothing listening",
                 spellings[i].what);
        url_of(i, RIGHT, port + 1, hostdir, "&schema=secrets", url,
               sizeof(url));
        open_fails(what, url, DURO_STORAGE, "cannot connect");
    }
}

/* After the test, failed or not. */
static void remove_cluster(void)
{
    if (cluster_dir[0] == '\0' || getenv("DURO_TEST_KEEP") != NULL)
        return;
    if (pg_cluster("stop '%s'", cluster_dir) != 0)
        fprintf(stderr, "  cannot stop the cluster in %s\n", cluster_dir);
}

int main(int argc, char **argv)
{
    static const test_case tests[] = {
        T(no_refusal_of_a_real_server_names_the_password)};
    int rc = test_run(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
    remove_cluster();
    return rc;
}
