/* ui_server.c - duro ui: parses its options, makes or reads the tokens
 * (--token-file, --tokens-file), opens one client (thread-safe, shared by
 * MHD's pool threads), binds the listen address, starts libmicrohttpd
 * behind the front door (ui_door.c), prints the login URL as the first
 * stdout line (a new one on SIGUSR1) and serves until SIGINT or SIGTERM.
 * Every request goes through ui_safety.c's gate. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ui.h"

#define SESSION_TTL_MS (12 * 3600 * 1000) /* --session-ttl's default */
#define CODE_TTL_MS (5 * 60 * 1000)       /* --login-code-ttl's default */

static const char ui_help[] =
    "usage: duro ui [--listen ADDR:PORT] [--token-file F] [--tokens-file F]\n"
    "               [--operator NAME] [--login-code-ttl D] [--session-ttl D]\n"
    "               [--read-only] [--json]\n"
    "\n"
    "Serves the web console and its JSON API (/api/v1/..., /metrics).\n"
    "The first line on stdout is the URL to open, with a one-time login\n"
    "code (never the token):\n"
    "  duro ui: http://HOST:PORT/#login=CODE\n"
    "With --json it is one JSON object on one line instead:\n"
    "  {\"url\", \"listen\", \"host\", \"port\", \"token\", "
    "\"read_only\", \"operator\"}\n"
    "SIGUSR1 prints a new line like it, with a fresh code.\n"
    "  --listen ADDR:PORT  where to listen (default 127.0.0.1:8233; port 0\n"
    "                      picks a free port). ADDR is an IPv4 address,\n"
    "                      [IPv6] or localhost; anything but loopback is\n"
    "                      warned about: the console can cancel instances.\n"
    "                      It answers only to Host 127.0.0.1, localhost,\n"
    "                      [::1] and ADDR (DNS rebinding): on 0.0.0.0 the\n"
    "                      URL printed is 127.0.0.1's\n"
    "  --token-file F      your token is F's first line (default:\n"
    "                      $DURO_UI_TOKEN, else 32 random bytes); scripts\n"
    "                      send it as Authorization: Bearer\n"
    "  --tokens-file F     more operators, one a line: NAME TOKEN (# starts\n"
    "                      a comment); each signs in with their own token\n"
    "                      and their actions are recorded as ui:NAME\n"
    "  --operator NAME     who ran it: the login codes sign in as NAME\n"
    "                      (default: your login name)\n"
    "  --login-code-ttl D  how long a login code lives (default 5m)\n"
    "  --session-ttl D     how long a sign-in lasts (default 12h)\n"
    "  --read-only         refuse every action (cancel, terminate, ...)\n"
    "Stops on SIGINT or SIGTERM (exit 0).\n";

/* The login name from the password file, else $USER, else "unknown". */
static void login_name(char *buf, size_t size)
{
    struct passwd pw, *found = NULL;
    char scratch[1024];
    const char *name = NULL;
    if (getpwuid_r(geteuid(), &pw, scratch, sizeof(scratch), &found) == 0 &&
        found != NULL)
        name = found->pw_name;
    if (name == NULL || *name == '\0')
        name = getenv("USER");
    snprintf(buf, size, "%s", name != NULL && *name ? name : "unknown");
}

/* The token of --token-file or $DURO_UI_TOKEN into @p op: 1 when one was
 * given, 0 when none was, or the exit status of a usage error (> 1). */
static int given_token(cli *c, ui_operator *op, const char *file)
{
    char buf[1024] = "";
    const char *from = NULL;
    if (file != NULL) {
        FILE *f = fopen(file, "r");
        if (f == NULL)
            return cli_error(c, EXIT_USAGE, "usage",
                             "--token-file: cannot read %s: %s", file,
                             strerror(errno));
        if (fgets(buf, sizeof(buf), f) == NULL)
            buf[0] = '\0';
        fclose(f);
        from = "--token-file";
    } else if (getenv("DURO_UI_TOKEN") != NULL &&
               *getenv("DURO_UI_TOKEN") != '\0') {
        snprintf(buf, sizeof(buf), "%s", getenv("DURO_UI_TOKEN"));
        from = "DURO_UI_TOKEN";
    }
    if (from == NULL)
        return 0;
    size_t len = strlen(buf);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
                       buf[len - 1] == ' ' || buf[len - 1] == '\t'))
        buf[--len] = '\0';
    if (!ui_token_ok(buf, len))
        return cli_error(c, EXIT_USAGE, "usage",
                         "%s: the token must be 16 to 256 printable "
                         "characters without spaces, ';' or ','",
                         from);
    memcpy(op->token, buf, len + 1);
    op->token_len = len;
    explicit_bzero(buf, sizeof(buf));
    return 1;
}

/* 32 random bytes as hex into @p op's token: 0, or the exit status. */
static int random_token(cli *c, ui_operator *op)
{
    unsigned char raw[32];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return cli_error(c, EXIT_FAILED, "io", "getrandom: %s",
                             strerror(errno));
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(op->token + 2 * i, 3, "%02x", raw[i]);
    op->token_len = 2 * sizeof(raw);
    explicit_bzero(raw, sizeof(raw));
    return EXIT_OK;
}

/* The operators: those of --tokens-file, and the one who ran duro ui
 * (--operator, default the login name) with the token of --token-file or
 * $DURO_UI_TOKEN, else its line in --tokens-file, else a random one. Into
 * *@p ops (caller frees) with the launcher's index; 0 or the exit
 * status. */
static int load_operators(cli *c, const char *token_file,
                          const char *tokens_file, const char *operator_name,
                          ui_operator **ops, size_t *count, size_t *launcher)
{
    char name[256];
    if (operator_name != NULL) {
        if (!ui_name_ok(operator_name)) {
            char quoted[TEXT_QUOTE_SIZE];
            return cli_usage(c,
                             "--operator: '%s' is not a name ([A-Za-z0-9._-], "
                             "1 to 64 characters)",
                             text_quote(operator_name, quoted, sizeof(quoted)));
        }
        snprintf(name, sizeof(name), "%s", operator_name);
    } else {
        login_name(name, sizeof(name));
        if (!ui_name_ok(name)) {
            char quoted[TEXT_QUOTE_SIZE];
            return cli_usage(c,
                             "the login name '%s' is not an operator name "
                             "([A-Za-z0-9._-], 1 to 64 characters): give "
                             "--operator NAME",
                             text_quote(name, quoted, sizeof(quoted)));
        }
    }
    *ops = NULL;
    *count = 0;
    if (tokens_file != NULL) {
        char err[512];
        if (ui_tokens_file(tokens_file, ops, count, err, sizeof(err)) != 0) {
            char shown[TEXT_ESCAPE_SIZE];
            return cli_error(c, EXIT_USAGE, "usage", "--tokens-file %s: %s",
                             text_escape(tokens_file, shown, sizeof(shown)),
                             err);
        }
    }
    ui_operator me;
    memset(&me, 0, sizeof(me));
    /* checked above: at most UI_NAME_MAX characters */
    memcpy(me.name, name, strlen(name) + 1);
    memcpy(me.requester, "ui:", 3);
    memcpy(me.requester + 3, name, strlen(name) + 1);
    int given = given_token(c, &me, token_file);
    int status = EXIT_OK;
    if (given > 1) {
        status = given;
        goto fail;
    }
    for (size_t i = 0; i < *count; i++) {
        if (strcmp((*ops)[i].name, me.name) == 0) {
            if (given && strcmp((*ops)[i].token, me.token) != 0) {
                status = cli_usage(c,
                                   "operator '%s' has a token in "
                                   "--tokens-file and another in %s: keep "
                                   "one",
                                   me.name,
                                   token_file != NULL ? "--token-file"
                                                      : "$DURO_UI_TOKEN");
                goto fail;
            }
            *launcher = i; /* its line's token */
            explicit_bzero(&me, sizeof(me));
            return EXIT_OK;
        }
        if (given && strcmp((*ops)[i].token, me.token) == 0) {
            status = cli_usage(c,
                               "the token of %s is the token of '%s' in "
                               "--tokens-file: each operator needs their "
                               "own",
                               token_file != NULL ? "--token-file"
                                                  : "$DURO_UI_TOKEN",
                               (*ops)[i].name);
            goto fail;
        }
    }
    if (!given && (status = random_token(c, &me)) != EXIT_OK)
        goto fail;
    ui_operator *more = realloc(*ops, (*count + 1) * sizeof(**ops));
    if (more == NULL) {
        status = cli_error(c, EXIT_FAILED, "io", "out of memory");
        goto fail;
    }
    *ops = more;
    (*ops)[*count] = me;
    *launcher = (*count)++;
    explicit_bzero(&me, sizeof(me));
    return EXIT_OK;
fail:
    explicit_bzero(&me, sizeof(me));
    if (*ops != NULL)
        explicit_bzero(*ops, *count * sizeof(**ops));
    free(*ops);
    *ops = NULL;
    return status;
}

/* Parses ADDR:PORT into @p addr (IPv4 or IPv6); @p host gets the name for
 * the URL ("127.0.0.1", "[::1]", "localhost"). */
static int parse_listen(cli *c, const char *text, struct sockaddr_storage *addr,
                        char *host, size_t host_size, int *v6)
{
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text)
        return cli_usage(c, "--listen: expected ADDR:PORT, got '%s'", text);
    char name[256];
    size_t nlen = (size_t)(colon - text);
    if (nlen >= sizeof(name))
        return cli_usage(c, "--listen: address too long");
    memcpy(name, text, nlen);
    name[nlen] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || errno != 0 || port > 65535 ||
        !isdigit((unsigned char)colon[1]))
        return cli_usage(c, "--listen: bad port in '%s'", text);
    memset(addr, 0, sizeof(*addr));
    *v6 = 0;
    if (strcasecmp(name, "localhost") == 0) {
        struct sockaddr_in *in = (struct sockaddr_in *)addr;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        snprintf(host, host_size, "localhost");
    } else if (name[0] == '[' && (nlen < 2 || name[nlen - 1] != ']')) {
        char quoted[TEXT_QUOTE_SIZE];
        return cli_usage(c,
                         "--listen: malformed address '%s' (expected "
                         "ADDR:PORT, ADDR an IPv4 address, [IPv6] or "
                         "localhost)",
                         text_quote(text, quoted, sizeof(quoted)));
    } else if (name[0] == '[') {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
        name[nlen - 1] = '\0';
        if (inet_pton(AF_INET6, name + 1, &in6->sin6_addr) != 1)
            return cli_usage(c, "--listen: bad IPv6 address in '%s'", text);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        snprintf(host, host_size, "[%s]", name + 1);
        *v6 = 1;
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)addr;
        if (inet_pton(AF_INET, name, &in->sin_addr) != 1)
            return cli_usage(c,
                             "--listen: '%s' is not an IPv4 address, "
                             "[IPv6] or localhost",
                             name);
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        snprintf(host, host_size, "%s", name);
    }
    return EXIT_OK;
}

static int is_loopback(const struct sockaddr_storage *addr)
{
    if (addr->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)addr)->sin_addr.s_addr) >>
                24) == 127;
    return IN6_IS_ADDR_LOOPBACK(
        &((const struct sockaddr_in6 *)addr)->sin6_addr);
}

/* 0.0.0.0 or [::]: every interface. */
static int is_wildcard(const struct sockaddr_storage *addr)
{
    if (addr->ss_family == AF_INET)
        return ((const struct sockaddr_in *)addr)->sin_addr.s_addr ==
               htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(
        &((const struct sockaddr_in6 *)addr)->sin6_addr);
}

#define STOP_GRACE_MS 5000 /* for the requests in flight at a stop */

/* MHD's log: its messages may quote what a client sent (escaped), and one
 * may repeat for every connection: at most one line a second. */
static void log_mhd(void *cls, const char *fmt, va_list ap)
{
    static ui_ratelog limiter;
    (void)cls;
    char line[512], shown[512 * 6 + 16];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    ui_log_limited(&limiter, 1000, "%s",
                   text_escape(line, shown, sizeof(shown)));
}

/* MHD's request callbacks, as ui_safety.c wants them. */
static void *request_begins(void *cls, const char *uri,
                            struct MHD_Connection *conn)
{
    return ui_uri_seen(cls, uri, conn);
}

static void request_ends(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode why)
{
    ui_completed(cls, conn, state, (int)why);
}

/* Prints the login line (text or --json) with a fresh code for the
 * operator who ran duro ui, flushed: 0, or -1. */
static int print_login(cli *c, const ui_server *srv, const char *listening)
{
    char code[64], url[1024];
    int64_t expires = 0;
    const ui_operator *me = ui_auth_launcher(srv->auth);
    if (ui_auth_new_code(srv->auth, me, code, &expires) != 0)
        return -1;
    ui_login_url(srv, code, url, sizeof(url));
    if (c->json) {
        /* one line, flushed, as the text's: a reader takes the first line
         * and the server goes on. The token is here for scripts (this is
         * the stdout of a process they started, not a browser's history);
         * the URL holds a one-time code only. */
        json_t *doc = json_object();
        jset(doc, "url", jstr(url));
        jset(doc, "listen", jstr(listening));
        jset(doc, "host", jstr(srv->url_host));
        jset(doc, "port", jint(srv->port));
        jset(doc, "token", jstr(me->token));
        jset(doc, "read_only", json_boolean(srv->read_only));
        jset(doc, "operator", jstr(me->name));
        char *line = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        if (line != NULL)
            puts(line);
        free(line);
    } else {
        printf("duro ui: %s\n", url);
    }
    fflush(stdout);
    return 0;
}

/* Up to 4096 descriptors when the hard limit allows: UI_WAITING_MAX and
 * UI_SERVING_MAX connections must fit beside the store's. */
static void raise_descriptor_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= 4096)
        return;
    rl.rlim_cur =
        rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 4096 ? 4096 : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

int cmd_ui(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"listen", required_argument, NULL, 'l'},
        {"token-file", required_argument, NULL, 't'},
        {"tokens-file", required_argument, NULL, 'T'},
        {"operator", required_argument, NULL, 'o'},
        {"login-code-ttl", required_argument, NULL, 'c'},
        {"session-ttl", required_argument, NULL, 's'},
        {"read-only", no_argument, NULL, 'r'},
        {0}};
    static ui_server srv; /* read by the pool threads until they stop */
    memset(&srv, 0, sizeof(srv));
    const char *listen_arg = NULL, *token_file = NULL, *tokens_file = NULL,
               *operator_name = NULL;
    int64_t code_ttl = CODE_TTL_MS, session_ttl = SESSION_TTL_MS;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, ui_help, &status)) != -1) {
        if (ch == -2)
            return status;
        if (ch == 'l')
            listen_arg = optarg;
        else if (ch == 't')
            token_file = optarg;
        else if (ch == 'T')
            tokens_file = optarg;
        else if (ch == 'o')
            operator_name = optarg;
        else if (ch == 'r')
            srv.read_only = 1;
        else if ((ch == 'c' || ch == 's') &&
                 args_duration(
                     c, ch == 'c' ? "--login-code-ttl" : "--session-ttl",
                     optarg, ch == 'c' ? &code_ttl : &session_ttl) != 0)
            return EXIT_USAGE;
    }
    if (optind < argc) {
        char quoted[TEXT_QUOTE_SIZE];
        return cli_usage(c, "unexpected argument '%s'",
                         text_quote(argv[optind], quoted, sizeof(quoted)));
    }
    if (code_ttl <= 0 || session_ttl <= 0)
        return cli_usage(c, "--login-code-ttl and --session-ttl must be "
                            "more than 0");
    char default_listen[32];
    snprintf(default_listen, sizeof(default_listen), "127.0.0.1:%d",
             UI_DEFAULT_PORT);
    struct sockaddr_storage addr;
    char host[300];
    int v6 = 0;
    if ((status =
             parse_listen(c, listen_arg != NULL ? listen_arg : default_listen,
                          &addr, host, sizeof(host), &v6)) != EXIT_OK)
        return status;
    if (listen_arg != NULL) {
        /* the Host allow-list takes the explicit name too */
        for (size_t i = 0; host[i] && i + 1 < sizeof(srv.listen_host); i++)
            srv.listen_host[i] = (char)tolower((unsigned char)host[i]);
    }
    ui_operator *ops = NULL;
    size_t op_count = 0, launcher = 0;
    if ((status = load_operators(c, token_file, tokens_file, operator_name,
                                 &ops, &op_count, &launcher)) != EXIT_OK)
        return status;
    srv.auth = ui_auth_create(ops, op_count, launcher, session_ttl, code_ttl);
    explicit_bzero(ops, op_count * sizeof(*ops));
    free(ops);
    if (srv.auth == NULL)
        return cli_error(c, EXIT_FAILED, "io", "out of memory");
    if (!is_loopback(&addr))
        fprintf(stderr,
                "duro ui: warning: listening on %s, not loopback: anyone who "
                "can reach it and has a token can %s\n",
                host,
                srv.read_only ? "read every instance, its inputs and outputs"
                              : "cancel instances");
    if ((status = cli_open(c, srv.read_only ? CLI_OPEN_READ : CLI_OPEN_EXISTING,
                           &srv.client)) != EXIT_OK) {
        ui_auth_destroy(srv.auth);
        return status;
    }

    /* SIGINT, SIGTERM and SIGUSR1 are taken by sigwait below; MHD's and
     * the door's threads inherit the mask, so a signal always reaches
     * this thread. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_descriptor_limit();

    /* Bound here, so the port (and the Host allow-list that depends on
     * it) is known before any request can arrive. */
    int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t alen = sizeof(addr);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&addr,
             addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                        : sizeof(struct sockaddr_in)) != 0 ||
        listen(fd, 1024) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &alen) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        duro_client_destroy(srv.client);
        ui_auth_destroy(srv.auth);
        return cli_error(c, EXIT_FAILED, "listen", "cannot listen on %s: %s",
                         listen_arg != NULL ? listen_arg : default_listen,
                         strerror(e));
    }
    srv.port = ntohs(addr.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)&addr)->sin6_port
                         : ((struct sockaddr_in *)&addr)->sin_port);
    /* on 0.0.0.0 or [::] the URL is loopback's (a browser that asks for
     * http://0.0.0.0/ or the machine's other addresses is not answered:
     * 421) */
    snprintf(srv.url_host, sizeof(srv.url_host), "%s",
             !is_wildcard(&addr)          ? host
             : addr.ss_family == AF_INET6 ? "[::1]"
                                          : "127.0.0.1");

    /* The door accepts every connection and hands MHD those whose header
     * block is in (ui_door.c); MHD has no listening socket. Each
     * connection carries one request (Connection: close), so the door's
     * deadline and limits hold for every request. MHD_USE_ITC:
     * MHD_add_connection needs it. The door enforces a grammar stricter
     * than MHD's strict mode, and the gate the Host rule: MHD is told to
     * refuse nothing itself (its refusals lack duro's headers). The door
     * hands over at most 2 * UI_SERVING_MAX at once, so that neither pool
     * thread (each gets half the limit) ever reaches it: MHD would drop
     * a connection unannounced. 128 KiB per connection holds the largest
     * header block the door lets through, with its cookies and
     * arguments parsed. */
    ui_door *door = ui_door_create(fd);
    if (door == NULL) {
        close(fd);
        duro_client_destroy(srv.client);
        ui_auth_destroy(srv.auth);
        return cli_error(c, EXIT_FAILED, "listen",
                         "cannot start the HTTP server: %s", strerror(errno));
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET | (v6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, (MHD_AccessHandlerCallback)ui_handle, &srv,
        MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)2, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(4 * UI_SERVING_MAX), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)15, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024),
        MHD_OPTION_STRICT_FOR_CLIENT, (int)0, MHD_OPTION_NOTIFY_COMPLETED,
        request_ends, NULL, MHD_OPTION_URI_LOG_CALLBACK, request_begins, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, ui_door_notify, door, MHD_OPTION_END);
    if (d == NULL || ui_door_start(door, d) != 0) {
        if (d != NULL)
            MHD_stop_daemon(d);
        ui_door_destroy(door);
        duro_client_destroy(srv.client);
        ui_auth_destroy(srv.auth);
        return cli_error(c, EXIT_FAILED, "listen",
                         "cannot start the HTTP server on %s",
                         listen_arg != NULL ? listen_arg : default_listen);
    }
    /* The Host names the gate answers (ui_safety.c, DNS rebinding), said
     * before the URL. */
    char extra[320] = "";
    if (srv.listen_host[0] && strcmp(srv.listen_host, "127.0.0.1") != 0 &&
        strcmp(srv.listen_host, "localhost") != 0 &&
        strcmp(srv.listen_host, "[::1]") != 0)
        snprintf(extra, sizeof(extra), ", %s:%u", host, srv.port);
    fprintf(stderr,
            "duro ui: answers only to Host 127.0.0.1:%u, localhost:%u, "
            "[::1]:%u%s (any other: 421, against DNS rebinding)\n",
            srv.port, srv.port, srv.port, extra);
    if (is_wildcard(&addr))
        fprintf(stderr,
                "duro ui: listening on every interface (%s:%u), but a "
                "browser on another machine is refused by the Host check: "
                "to be reached at this machine's address A, use --listen "
                "A:%u\n",
                host, srv.port, srv.port);
    char listening[320];
    snprintf(listening, sizeof(listening), "%s:%u", host, srv.port);
    print_login(c, &srv, listening);
    char masked[1024], shown[TEXT_ESCAPE_SIZE];
    duro_url_mask(c->db, masked, sizeof(masked));
    fprintf(stderr,
            "duro ui: serving %s%s as ui:%s; the URL above signs in once, "
            "within %lld s (kill -USR1 %ld prints a new one); stop with "
            "Ctrl-C\n",
            text_escape(masked, shown, sizeof(shown)),
            srv.read_only ? " read-only" : "", ui_auth_launcher(srv.auth)->name,
            (long long)(code_ttl / 1000), (long)getpid());

    int sig = 0;
    for (;;) {
        if (sigwait(&signals, &sig) != 0)
            continue;
        if (sig != SIGUSR1)
            break;
        if (print_login(c, &srv, listening) != 0)
            fprintf(stderr, "duro ui: SIGUSR1: no login code: getrandom "
                            "failed\n");
    }
    fprintf(stderr, "duro ui: stopping (%s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* No new connection; the requests in flight (a byte sent, not yet
     * answered) finish, for at most STOP_GRACE_MS; then the rest is
     * closed. */
    ui_door_stop_accepting(door);
    unsigned long left = ui_door_wait_idle(door, STOP_GRACE_MS);
    if (left > 0)
        fprintf(stderr,
                "duro ui: %lu request(s) still in flight after %d ms: "
                "closed\n",
                left, STOP_GRACE_MS);
    ui_door_halt(door); /* nothing more is handed to MHD */
    MHD_stop_daemon(d);
    ui_door_destroy(door);
    duro_client_destroy(srv.client);
    ui_auth_destroy(srv.auth);
    return EXIT_OK;
}
