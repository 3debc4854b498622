/* test_postgres_url.c - the PostgreSQL provider's URL handling without a
 * server: duro's parameters taken out of the libpq URI, defaults, malformed
 * URLs, and the password - in every spelling libpq reads, and anything
 * that may be one - masked in the display form and scrubbed from every
 * error message (bad URL, libpq's reasons, nothing listening). Main
 * thread. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_provider.h"
#include "providers/providers.h"
#include "test.h"

static void check_mask(const char *url, const char *expected)
{
    char out[512];
    size_t n = duro__pg_mask_url(url, out, sizeof(out));
    CHECK_STR(out, expected);
    CHECK_EQ(n, strlen(expected));
    /* the public form (duro/provider.h) is the same */
    char pub[512];
    CHECK_EQ(duro_url_mask(url, pub, sizeof(pub)), n);
    CHECK_STR(pub, expected);
}

/* url fails to parse with DURO_BAD_URL, not retryable, and `secret` is
 * not in its message (copied to message[DURO_ERROR_MESSAGE_MAX] when not
 * NULL). */
static void check_refused(const char *url, const char *secret, char *message)
{
    duro__pg_config cfg;
    duro_error e;
    duro_error_clear(&e);
    int rc = duro__pg_parse_url(url, &cfg, &e);
    CHECK_MSG(rc == DURO_BAD_URL, "'%s' parsed with %s (%s)", url,
              duro_errname(rc), e.message);
    CHECK_EQ(e.retryable, 0);
    CHECK_MSG(strstr(e.message, secret) == NULL, "the password is in '%s'",
              e.message);
    if (message != NULL)
        snprintf(message, DURO_ERROR_MESSAGE_MAX, "%s", e.message);
    duro__pg_config_free(&cfg);
}

TEST(mask_hides_the_password)
{
    check_mask("postgres://user:secret@host/db", "postgres://user:***@host/db");
    check_mask("postgresql://user:secret@host:5432/db?sslmode=require",
               "postgresql://user:***@host:5432/db?sslmode=require");
    /* a password with unescaped '@', ':' and '/' is masked whole */
    check_mask("postgres://user:p@ss:w/rd@host/db",
               "postgres://user:***@host/db");
    check_mask("postgres://user:@host/db", "postgres://user:***@host/db");
    /* nothing to hide */
    check_mask("postgres://user@host/db", "postgres://user@host/db");
    check_mask("postgresql:///duro?host=/tmp/pgsock&port=5544",
               "postgresql:///duro?host=/tmp/pgsock&port=5544");
    /* password= among the parameters, first, middle and last */
    check_mask("postgres://h/db?password=secret",
               "postgres://h/db?password=***");
    check_mask("postgres://h/db?user=u&password=secret&port=1",
               "postgres://h/db?user=u&password=***&port=1");
    check_mask("postgres://a:b@h/db?password=c&schema=x",
               "postgres://a:***@h/db?password=***&schema=x");
    /* ... also '?', and '/' then '?' */
    check_mask("postgres://u:sec?ret@127.0.0.1:1/db",
               "postgres://u:***@127.0.0.1:1/db");
    check_mask("postgres://u:sec/ret@h:1/db?sslmode=require",
               "postgres://u:***@h:1/db?sslmode=require");
    check_mask("postgres://u:se/c?ret@h/db", "postgres://u:***@h/db");
    /* '@' in the query is not userinfo, after a port too; a password=
     * after it is still masked */
    check_mask("postgres://h/db?application_name=a@b",
               "postgres://h/db?application_name=a@b");
    check_mask("postgres://h:5432/db?application_name=a@b",
               "postgres://h:5432/db?application_name=a@b");
    check_mask("postgres://u:p@h/db?application_name=a@b&password=z",
               "postgres://u:***@h/db?application_name=a@b&password=***");
    check_mask("", "");
    char out[512];
    CHECK_EQ(duro__pg_mask_url(NULL, out, sizeof(out)), 0);
    CHECK_STR(out, "");
}

TEST(mask_cuts_to_the_buffer)
{
    char out[16];
    memset(out, 'x', sizeof(out));
    size_t n =
        duro__pg_mask_url("postgres://user:secret@host/db", out, sizeof(out));
    CHECK_EQ(n, sizeof(out) - 1);
    CHECK_EQ(out[sizeof(out) - 1], '\0');
    CHECK(strstr(out, "secret") == NULL);
    CHECK_STR(out, "postgres://user");
    /* size 0 writes nothing */
    CHECK_EQ(duro__pg_mask_url("postgres://u:p@h/d", out, 0), 0);
}

/* What duro adds to every URL that does not say otherwise, after its
 * fallback_application_name. */
#define KEEPALIVES                                                             \
    "&keepalives_idle=30&keepalives_interval=10&keepalives_count=3"            \
    "&connect_timeout=10"

TEST(duro_parameters_are_taken_out)
{
    duro__pg_config cfg;
    duro_error e;
    CHECK_PRC(duro__pg_parse_url("postgresql:///duro?host=/tmp/pgsock&"
                                 "schema=orders_1&port=5544&pool=3&"
                                 "max_history=10&max_payload=2048",
                                 &cfg, &e),
              DURO_OK, &e);
    CHECK_STR(cfg.conninfo, "postgresql:///duro?host=/tmp/"
                            "pgsock&port=5544&fallback_application_name=duro"
                            "" KEEPALIVES);
    CHECK_STR(cfg.schema, "orders_1");
    CHECK_EQ(cfg.pool, 3);
    CHECK_EQ(cfg.max_history, 10);
    CHECK_EQ(cfg.max_payload, 2048);
    CHECK_EQ(cfg.create, 1);
    duro__pg_config_free(&cfg);

    CHECK_PRC(duro__pg_parse_url("postgres://u:pw@db.example/app", &cfg, &e),
              DURO_OK, &e);
    CHECK_STR(cfg.conninfo, "postgres://u:pw@db.example/"
                            "app?fallback_application_name=duro" KEEPALIVES);
    CHECK_STR(cfg.display, "postgres://u:***@db.example/app");
    CHECK_STR(cfg.schema, "duro");
    CHECK_EQ(cfg.pool, 5);
    CHECK_EQ(cfg.max_history, 100000);
    CHECK_EQ(cfg.max_payload, 1024 * 1024);
    duro__pg_config_free(&cfg);

    /* only duro's parameters: libpq gets duro's fallback application name
     * (pg_stat_activity shows "duro" unless application_name= or
     * PGAPPNAME says otherwise) and TCP keepalives (a vanished server is
     * noticed in about a minute) */
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?schema=s", &cfg, &e), DURO_OK,
              &e);
    CHECK_STR(cfg.conninfo,
              "postgres://h/db?fallback_application_name=duro" KEEPALIVES);
    duro__pg_config_free(&cfg);

    /* create=0 and create=1 are duro's, not libpq's */
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?create=0&sslmode=disable",
                                 &cfg, &e),
              DURO_OK, &e);
    CHECK_STR(cfg.conninfo, "postgres://h/"
                            "db?sslmode=disable&fallback_application_name=duro"
                            "" KEEPALIVES);
    CHECK_EQ(cfg.create, 0);
    duro__pg_config_free(&cfg);
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?create=1", &cfg, &e), DURO_OK,
              &e);
    CHECK_STR(cfg.conninfo,
              "postgres://h/db?fallback_application_name=duro" KEEPALIVES);
    CHECK_EQ(cfg.create, 1);
    duro__pg_config_free(&cfg);
    /* a fallback or keepalive of the URL's own is kept, and not doubled */
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?fallback_application_name=a",
                                 &cfg, &e),
              DURO_OK, &e);
    CHECK_STR(cfg.conninfo,
              "postgres://h/db?fallback_application_name=a" KEEPALIVES);
    duro__pg_config_free(&cfg);
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?keepalives_idle=5&"
                                 "keepalives=0",
                                 &cfg, &e),
              DURO_OK, &e);
    CHECK_STR(cfg.conninfo, "postgres://h/db?keepalives_idle=5&keepalives=0&"
                            "fallback_application_name=duro&keepalives_"
                            "interval=10&keepalives_count=3&connect_"
                            "timeout=10");
    duro__pg_config_free(&cfg);
}

/* The schema name is used quoted: its case is kept and keywords are
 * names like any other; the system's schemas are refused. */
TEST(schema_names_keep_their_case_and_system_schemas_are_refused)
{
    const char *kept[] = {"Upper", "upper",       "select",
                          "user",  "public",      "_pg_x",
                          "pgx",   "my_pg_store", "information_schema2"};
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
        char url[128];
        snprintf(url, sizeof(url), "postgres://h/db?schema=%s", kept[i]);
        duro__pg_config cfg;
        duro_error e;
        CHECK_PRC(duro__pg_parse_url(url, &cfg, &e), DURO_OK, &e);
        CHECK_STR(cfg.schema, kept[i]);
        duro__pg_config_free(&cfg);
    }
    const char *refused[] = {"pg_catalog",
                             "pg_toast",
                             "pg_temp",
                             "pg_",
                             "pg_mystore",
                             "PG_Catalog",
                             "information_schema",
                             "INFORMATION_SCHEMA"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char url[128];
        snprintf(url, sizeof(url), "postgres://u:hunter2@h/db?schema=%s",
                 refused[i]);
        char message[DURO_ERROR_MESSAGE_MAX];
        check_refused(url, "hunter2", message);
        CHECK_MSG(strstr(message, "system schema") != NULL, "'%s'", message);
    }
}

TEST(malformed_urls_fail_bad_url_without_the_password)
{
    const char *bad[] = {
        "postgres://u:hunter2@h/db?schema=",
        "postgres://u:hunter2@h/db?schema=9lives",
        "postgres://u:hunter2@h/db?schema=a.b",
        "postgres://u:hunter2@h/db?schema=a;drop",
        "postgres://u:hunter2@h/db?schema="
        "a234567890123456789012345678901234567890123456789012345678901234",
        "postgres://u:hunter2@h/db?schema=a&schema=a",
        "postgres://u:hunter2@h/db?pool=0",
        "postgres://u:hunter2@h/db?pool=65",
        "postgres://u:hunter2@h/db?max_history=-1",
        "postgres://u:hunter2@h/db?max_payload=1000000001",
        "postgres://u:hunter2@h/db?pool",
        "postgres://u:hunter2@h/db?&pool=1",
        "postgres://u:hunter2@h/db?no_such_option=1",
        "postgres://u:hunter2@h/db?create=2",
        "postgres://u:hunter2@h/db?create=",
        "postgres://u:hunter2@h/db?create=yes",
        "postgres://u:hunter2@h/db?create=0&create=0",
        "mysql://u:hunter2@h/db",
        /* ports libpq would only refuse when connecting, retryably */
        "postgres://u:hunter2@h:99999/db",
        "postgres://u:hunter2@h:0/db",
        "postgres://u:hunter2@h/db?port=abc",
        "postgres://u:hunter2@h1,h2/db?port=5432,65536",
        "postgres://u:hunter2@h/db?port=-1",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        check_refused(bad[i], "hunter2", NULL);
    char message[DURO_ERROR_MESSAGE_MAX];
    check_refused("postgres://u:hunter2@h:99999/db", "hunter2", message);
    CHECK_MSG(strstr(message, "port '99999' is not a port number") != NULL,
              "'%s'", message);
    /* good port lists */
    const char *good[] = {"postgres://h:5432/db", "postgres://h1:1,h2:65535/db",
                          "postgres://h1,h2/db?port=5432,",
                          "postgres:///db?host=/tmp&port=5544"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        duro__pg_config cfg;
        duro_error e;
        CHECK_PRC(duro__pg_parse_url(good[i], &cfg, &e), DURO_OK, &e);
        duro__pg_config_free(&cfg);
    }
}

/* A password holding an unescaped '@', '/' or '?' would be split by
 * libpq into a host, port or database name that its errors quote: refused
 * before libpq sees it, and no part of it is in the message. */
TEST(unescaped_delimiters_in_a_password_are_refused)
{
    const char *bad[] = {
        "postgres://u:hun?ter2@127.0.0.1:1/db",
        "postgres://u:hun/ter2@127.0.0.1:1/db",
        "postgres://u:hun@ter2@127.0.0.1:1/db",
        "postgres://u:hun/t?er2@127.0.0.1/db?sslmode=disable",
        "postgresql://u:hun@ter2@/db?host=/tmp",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char message[DURO_ERROR_MESSAGE_MAX];
        check_refused(bad[i], "hun", message);
        CHECK_MSG(strstr(message, "er2") == NULL,
                  "part of the password is in '%s'", message);
        CHECK_MSG(strstr(message, "percent-encode") != NULL,
                  "'%s' does not say what to do", message);
    }
    /* escaped, the same passwords are fine */
    duro__pg_config cfg;
    duro_error e;
    CHECK_PRC(
        duro__pg_parse_url("postgres://u:hun%3Fter%2F2%40@h:1/db", &cfg, &e),
        DURO_OK, &e);
    CHECK_STR(cfg.display, "postgres://u:***@h:1/db");
    duro__pg_config_free(&cfg);
}

/* Opens url, which must fail retryably (DURO_STORAGE: no server there, or
 * one that never answers) without the password "hunter2" in the message,
 * left in *e. */
static void open_fails_retryably(const char *url, duro_error *e)
{
    duro_provider *p = NULL;
    int rc = duro_provider_open(url, &p, e);
    CHECK_EQ(rc, DURO_STORAGE);
    CHECK_EQ(e->retryable, 1);
    CHECK(p == NULL);
    CHECK_MSG(strstr(e->message, "hunter2") == NULL, "the password is in '%s'",
              e->message);
}

/* Opening through duro_provider_open: a bad URL never connects, and a
 * server that is not there fails retryably, naming the masked URL. */
TEST(open_failures_name_the_masked_url)
{
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open("postgres://u:hunter2@h/db?schema=-", &p, &e),
              DURO_BAD_URL, &e);
    CHECK(p == NULL);
    CHECK(strstr(e.message, "hunter2") == NULL);
    CHECK(strstr(e.message, "postgres://u:***@h/db") != NULL);

    /* a mistyped scheme is not ours, but its password stays hidden */
    CHECK_PRC(duro_provider_open("postgress://u:hunter2@h/db", &p, &e),
              DURO_BAD_URL, &e);
    CHECK(strstr(e.message, "hunter2") == NULL);
    CHECK(strstr(e.message, "postgress://u:***@h/db") != NULL);

    /* a socket directory with no server in it: fails at once */
    char url[1024];
    snprintf(url, sizeof(url),
             "postgresql://u:hunter2@/db?host=%s&port=1&password=hunter2",
             test_tmpdir());
    open_fails_retryably(url, &e);
    CHECK_MSG(strstr(e.message, "u:***@") != NULL &&
                  strstr(e.message, "password=***") != NULL,
              "the masked URL is not in '%s'", e.message);
}

/* libpq's reason for refusing a URI is passed on, scrubbed of the URL's
 * secrets (it may quote the URI). */
TEST(libpq_reasons_are_passed_on_scrubbed)
{
    duro__pg_config cfg;
    duro_error e;
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?no_such_option=1", &cfg, &e),
              DURO_BAD_URL, &e);
    CHECK_MSG(strstr(e.message, "no_such_option") != NULL,
              "libpq's reason is missing from '%s'", e.message);
    duro__pg_config_free(&cfg);
    CHECK_PRC(duro__pg_parse_url("postgres://u:hunter2@h/db?no_such_option=1",
                                 &cfg, &e),
              DURO_BAD_URL, &e);
    CHECK(strstr(e.message, "hunter2") == NULL);
    CHECK(strstr(e.message, "postgres://u:***@h/db") != NULL);
    CHECK_MSG(strstr(e.message, "invalid URI query parameter: "
                                "\"no_such_option\"") != NULL,
              "libpq's reason is missing from '%s'", e.message);
    duro__pg_config_free(&cfg);
}

/* connect_timeout: the URL's own is kept; none is added when the
 * environment (PGCONNECT_TIMEOUT) or a service (service=, PGSERVICE) may
 * set it. */
TEST(the_connect_timeout_default_yields_to_the_url_environment_and_services)
{
    duro__pg_config cfg;
    duro_error e;
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?connect_timeout=3", &cfg, &e),
              DURO_OK, &e);
    CHECK_STR(cfg.conninfo,
              "postgres://h/db?connect_timeout=3&fallback_application_name="
              "duro&keepalives_idle=30&keepalives_interval=10&keepalives_"
              "count=3");
    duro__pg_config_free(&cfg);
    const char *without =
        "postgres://h/db?fallback_application_name=duro&keepalives_idle=30&"
        "keepalives_interval=10&keepalives_count=3";
    CHECK_EQ(setenv("PGCONNECT_TIMEOUT", "7", 1), 0);
    CHECK_PRC(duro__pg_parse_url("postgres://h/db", &cfg, &e), DURO_OK, &e);
    CHECK_STR(cfg.conninfo, without);
    duro__pg_config_free(&cfg);
    CHECK_EQ(unsetenv("PGCONNECT_TIMEOUT"), 0);
    CHECK_EQ(setenv("PGSERVICE", "orders", 1), 0);
    CHECK_PRC(duro__pg_parse_url("postgres://h/db", &cfg, &e), DURO_OK, &e);
    CHECK_STR(cfg.conninfo, without);
    duro__pg_config_free(&cfg);
    CHECK_EQ(unsetenv("PGSERVICE"), 0);
    CHECK_PRC(duro__pg_parse_url("postgres:///db?service=orders", &cfg, &e),
              DURO_OK, &e);
    CHECK(strstr(cfg.conninfo, "connect_timeout") == NULL);
    duro__pg_config_free(&cfg);
    /* and back: the default again */
    CHECK_PRC(duro__pg_parse_url("postgres://h/db", &cfg, &e), DURO_OK, &e);
    CHECK(strstr(cfg.conninfo, "&connect_timeout=10") != NULL);
    duro__pg_config_free(&cfg);
}

/* The session timeouts duro SETs on every session (lock_timeout 5 s,
 * idle_in_transaction_session_timeout 10 s; statement_timeout none): its
 * parameters of the same names (ms, 0 turns one off) change them and are
 * not handed to libpq; one the URL's libpq options (or PGOPTIONS) name is
 * left to those (-1: duro SETs nothing); a duro parameter still wins. Bad
 * values are refused. */
TEST(session_timeouts_default_and_yield_to_the_url)
{
    enum { LOCK, STATEMENT, IDLE };
    duro__pg_config cfg;
    duro_error e;
    CHECK_PRC(duro__pg_parse_url("postgres://h/db", &cfg, &e), DURO_OK, &e);
    CHECK_EQ(cfg.session_timeouts[LOCK], 5000);
    CHECK_EQ(cfg.session_timeouts[STATEMENT], -1);
    CHECK_EQ(cfg.session_timeouts[IDLE], 10000);
    duro__pg_config_free(&cfg);

    CHECK_PRC(duro__pg_parse_url("postgres://h/db?lock_timeout=250&"
                                 "statement_timeout=60000&sslmode=disable&"
                                 "idle_in_transaction_session_timeout=0",
                                 &cfg, &e),
              DURO_OK, &e);
    CHECK_EQ(cfg.session_timeouts[LOCK], 250);
    CHECK_EQ(cfg.session_timeouts[STATEMENT], 60000);
    CHECK_EQ(cfg.session_timeouts[IDLE], 0);
    CHECK_STR(cfg.conninfo, "postgres://h/"
                            "db?sslmode=disable&fallback_application_name=duro"
                            "" KEEPALIVES);
    duro__pg_config_free(&cfg);

    /* libpq's options name them: theirs (encoded or not, -c or --) */
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?options=-c%20lock_timeout%"
                                 "3D100%20--idle_in_transaction_session_"
                                 "timeout%3D0",
                                 &cfg, &e),
              DURO_OK, &e);
    CHECK_EQ(cfg.session_timeouts[LOCK], -1);
    CHECK_EQ(cfg.session_timeouts[STATEMENT], -1);
    CHECK_EQ(cfg.session_timeouts[IDLE], -1);
    CHECK(strstr(cfg.conninfo, "options=-c%20lock_timeout%3D100") != NULL);
    duro__pg_config_free(&cfg);
    /* a name that only contains one is not it */
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?options=-c%20"
                                 "xlock_timeout%3D1",
                                 &cfg, &e),
              DURO_OK, &e);
    CHECK_EQ(cfg.session_timeouts[LOCK], 5000);
    duro__pg_config_free(&cfg);
    /* duro's parameter wins over the options */
    CHECK_PRC(duro__pg_parse_url("postgres://h/db?options=-c%20lock_timeout%"
                                 "3D100&lock_timeout=300",
                                 &cfg, &e),
              DURO_OK, &e);
    CHECK_EQ(cfg.session_timeouts[LOCK], 300);
    duro__pg_config_free(&cfg);
    CHECK_EQ(setenv("PGOPTIONS", "-c idle_in_transaction_session_timeout=5", 1),
             0);
    CHECK_PRC(duro__pg_parse_url("postgres://h/db", &cfg, &e), DURO_OK, &e);
    CHECK_EQ(cfg.session_timeouts[LOCK], 5000);
    CHECK_EQ(cfg.session_timeouts[IDLE], -1);
    duro__pg_config_free(&cfg);
    CHECK_EQ(unsetenv("PGOPTIONS"), 0);

    static const char *const bad[] = {
        "postgres://h/db?lock_timeout=-1",
        "postgres://h/db?lock_timeout=5s",
        "postgres://h/db?lock_timeout=",
        "postgres://h/db?statement_timeout=2147483648",
        "postgres://h/db?idle_in_transaction_session_timeout=1&"
        "idle_in_transaction_session_timeout=2",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char message[DURO_ERROR_MESSAGE_MAX];
        check_refused(bad[i], "no secret here", message);
        CHECK_MSG(strstr(message, "_timeout must be given once, in "
                                  "milliseconds") != NULL ||
                      strstr(message, "every parameter is name=value") != NULL,
                  "%s: %s", bad[i], message);
    }
}

/* A server that accepts the connection and never answers (a stopped
 * postmaster, a proxy queueing its clients): the open fails retryably once
 * connect_timeout passes, naming the masked URL, instead of waiting for
 * ever. (The URL sets 2 s, libpq's least, so the test is quick; the
 * default's 10 s is in every other URL, above.) */
TEST(a_server_that_never_answers_fails_the_open_after_connect_timeout)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    CHECK_EQ(listen(fd, 8), 0); /* the kernel completes the handshake;
                                   nobody accepts or answers */
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    char url[256];
    snprintf(url, sizeof(url),
             "postgres://u:hunter2@127.0.0.1:%d/db?connect_timeout=2",
             ntohs(a.sin_port));
    duro_error e;
    open_fails_retryably(url, &e);
    CHECK_MSG(strstr(e.message, "timeout") != NULL,
              "'%s' does not say it timed out", e.message);
    close(fd);
}

/* libpq decodes percent-encoded parameter names and values: a password
 * is one whatever its spelling, and so is anything duro cannot tell is
 * not one. Only parameters duro or libpq knows to be harmless show their
 * values (the name decoded, as libpq compares it: case matters); every
 * other value is masked, and a parameter whose name is no plain word, or
 * that is not name=value at all, is masked whole. */
TEST(mask_hides_every_spelling_of_a_password)
{
    /* percent-encoded names, as libpq decodes them */
    check_mask("postgres://u@h/db?sslmode=disable&pass%77ord=S3cret&"
               "schema=nosuch",
               "postgres://u@h/db?sslmode=disable&pass%77ord=***&"
               "schema=nosuch");
    check_mask("postgres://h/db?%70%61%73%73%77%6F%72%64=S3cret",
               "postgres://h/db?%70%61%73%73%77%6F%72%64=***");
    /* percent-encoded values */
    check_mask("postgres://h/db?password=S3%63ret&port=1",
               "postgres://h/db?password=***&port=1");
    check_mask("postgres://u:S3%63ret@h/db", "postgres://u:***@h/db");
    /* case variants, which libpq refuses (names are case-sensitive) */
    check_mask("postgres://h/db?PASSWORD=S3cret",
               "postgres://h/db?PASSWORD=***");
    check_mask("postgres://h/db?Password=S3cret&user=u",
               "postgres://h/db?Password=***&user=u");
    /* other secrets libpq reads */
    check_mask("postgres://h/db?sslpassword=S3cret",
               "postgres://h/db?sslpassword=***");
    check_mask("postgres://h/db?oauth_client_secret=S3cret",
               "postgres://h/db?oauth_client_secret=***");
    /* parameters nobody knows: the value is masked, the name shown */
    check_mask("postgres://h/db?no_such_option=S3cret",
               "postgres://h/db?no_such_option=***");
    check_mask("postgres://h/db?passwd=S3cret", "postgres://h/db?passwd=***");
    /* not name=value, or a name that is no plain word: masked whole */
    check_mask("postgres://h/db?password%3DS3cret", "postgres://h/db?***");
    check_mask("postgres://h/db?sslmode=require&password%3DS3cret=x&port=1",
               "postgres://h/db?sslmode=require&***&port=1");
    check_mask("postgres://h/db?S3cret", "postgres://h/db?***");
    check_mask("postgres://h/db?=S3cret", "postgres://h/db?***");
    check_mask("postgres://h/db?pass word=S3cret", "postgres://h/db?***");
    check_mask("postgres://h/db?pass%zzword=S3cret", "postgres://h/db?***");
    check_mask("postgres://h/db?pass%00word=S3cret", "postgres://h/db?***");
    check_mask("postgres://h/db?port=1&&password==S3cret=",
               "postgres://h/db?port=1&&password=***");
    /* known parameters keep their values, encoded names too */
    check_mask("postgres://h/db?ho%73t=/tmp&application_name=a%20b&"
               "connect_timeout=5&schema=s&pool=2&max_history=9&"
               "max_payload=9&create=0&target_session_attrs=any&"
               "passfile=/p",
               "postgres://h/db?ho%73t=/tmp&application_name=a%20b&"
               "connect_timeout=5&schema=s&pool=2&max_history=9&"
               "max_payload=9&create=0&target_session_attrs=any&"
               "passfile=/p");
    /* SQLite's parameters are shown; a password there is masked too */
    check_mask("sqlite:/tmp/o.db?synchronous=full&busy_timeout_ms=5&mode=ro&"
               "checkpoint_pages=1",
               "sqlite:/tmp/o.db?synchronous=full&busy_timeout_ms=5&mode=ro&"
               "checkpoint_pages=1");
    check_mask("sqlite:o.db?pass%77ord=S3cret", "sqlite:o.db?pass%77ord=***");
}

/* Every message of a URL that duro cannot parse, or libpq refuses, or
 * that names no server that answers, holds neither the secret nor its
 * encoded form - libpq's own reasons included, which quote the URI, a
 * decoded parameter name or a value that does not decode. */
TEST(no_message_holds_a_secret_however_it_is_spelled)
{
    static const char *const refused[] = {
        /* libpq refuses the name: its reason quotes it decoded */
        "postgres://h/db?PASSWORD=S3cret",
        "postgres://h/db?password%3DS3cret=1",
        "postgres://h/db?password%3DS3%63ret=1",
        /* not name=value: duro refuses it */
        "postgres://h/db?password%3DS3cret",
        "postgres://h/db?sslmode=require&S3cret",
        /* a value that does not decode: libpq quotes it */
        "postgres://h/db?password=S3cret%zz",
        "postgres://h/db?pass%77ord=S3cret%zz",
        "postgres://u:S3cret%zz@h/db",
        "postgres://h/db?password=S3cret%00",
        /* an extra '=': libpq quotes the name */
        "postgres://h/db?password=S3cret=x&no_such=1",
        /* errors that quote the whole URI */
        "postgres://u:S3cret@[::1/db",
        "postgres://u:S3cret@[]/db",
        "postgres://h/db?pass%77ord=S3cret&schema=-",
        "postgres://h/db?pass%77ord=S3cret&port=99999",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char message[DURO_ERROR_MESSAGE_MAX];
        check_refused(refused[i], "S3cret", message);
        CHECK_MSG(strstr(message, "S3%63ret") == NULL, "'%s'", message);
        CHECK_MSG(strstr(message, "***") != NULL,
                  "'%s' does not show the masked URL", message);
    }
    /* libpq's reason still says what is wrong */
    char message[DURO_ERROR_MESSAGE_MAX];
    check_refused("postgres://h/db?PASSWORD=S3cret", "S3cret", message);
    CHECK_MSG(strstr(message, "invalid URI query parameter: \"PASSWORD\"") !=
                  NULL,
              "'%s'", message);
    check_refused("postgres://h/db?password%3DS3cret", "S3cret", message);
    CHECK_MSG(strstr(message, "name=value") != NULL, "'%s'", message);

    /* nothing listens: the connection is refused, retryably */
    static const char *const spellings[] = {
        "pass%77ord=S3cret",       "password=S3%63ret", "sslpassword=S3cret",
        "%70assword=S3cret",       "password=S3cret",   "passfile=/nonexistent",
        "application_name=S3cret", /* a value that is no secret is shown */
    };
    for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
        char url[1024];
        snprintf(url, sizeof(url),
                 "postgresql://u:S3cret@/db?host=%s&port=1&%s&schema=nosuch",
                 test_tmpdir(), spellings[i]);
        duro_error e;
        duro_provider *p = NULL;
        CHECK_PRC(duro_provider_open(url, &p, &e), DURO_STORAGE, &e);
        CHECK(p == NULL);
        int shown = strstr(spellings[i], "application_name") != NULL;
        if (shown) {
            /* only the userinfo's is masked */
            CHECK_MSG(strstr(e.message, "u:***@") != NULL &&
                          strstr(e.message, "application_name=S3cret") != NULL,
                      "'%s'", e.message);
            continue;
        }
        CHECK_MSG(strstr(e.message, "S3cret") == NULL &&
                      strstr(e.message, "S3%63ret") == NULL,
                  "the password is in '%s'", e.message);
        CHECK_MSG(strstr(e.message, "schema=nosuch") != NULL,
                  "the masked URL is not in '%s'", e.message);
    }
}

/* libpq's text is scrubbed of every secret of the URL, in every form
 * libpq may quote it (as written, decoded), before it is cut to fit a
 * message: a cut never leaves part of a secret. */
TEST(libpq_text_is_scrubbed_of_the_secrets)
{
    char out[256];
    const char *url = "postgres://u:pa%73s@h/db?pass%77ord=S3%63ret&"
                      "password%3Dxyzzy=1&sslmode=require";
    duro__pg_scrub(url,
                   "a \"pass\" b \"pa%73s\" c \"S3cret\" d \"S3%63ret\" e "
                   "\"password=xyzzy\" f \"password%3Dxyzzy=1\" require",
                   out, sizeof(out));
    CHECK_STR(out, "a \"***\" b \"***\" c \"***\" d \"***\" e \"***\" f "
                   "\"***\" require");
    /* cut to the buffer: the secret is never partly copied */
    duro__pg_scrub(url, "xxxxxxS3cret", out, 9);
    CHECK_STR(out, "xxxxxx**");
    /* nothing to hide: the text as it is */
    duro__pg_scrub("postgres://h/db?sslmode=require", "sslmode require", out,
                   sizeof(out));
    CHECK_STR(out, "sslmode require");
    duro__pg_scrub(NULL, "text", out, sizeof(out));
    CHECK_STR(out, "text");
}

TEST_MAIN(
    T(mask_hides_every_spelling_of_a_password),
    T(no_message_holds_a_secret_however_it_is_spelled),
    T(libpq_text_is_scrubbed_of_the_secrets),
    T(libpq_reasons_are_passed_on_scrubbed), T(mask_hides_the_password),
    T(mask_cuts_to_the_buffer), T(duro_parameters_are_taken_out),
    T(malformed_urls_fail_bad_url_without_the_password),
    T(open_failures_name_the_masked_url),
    T(unescaped_delimiters_in_a_password_are_refused),
    T(schema_names_keep_their_case_and_system_schemas_are_refused),
    T(the_connect_timeout_default_yields_to_the_url_environment_and_services),
    T(session_timeouts_default_and_yield_to_the_url),
    T(a_server_that_never_answers_fails_the_open_after_connect_timeout))
