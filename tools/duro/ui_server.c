/* ui_server.c - duro ui: parses --listen/--token-file/--read-only, makes
 * or reads the token, opens one client (thread-safe, shared by MHD's pool
 * threads), starts libmicrohttpd on the listen address with limits, prints
 * the URL as the first stdout line and serves until SIGINT or SIGTERM.
 * Every request goes through ui_safety.c's gate. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ui.h"

static const char ui_help[] =
    "usage: duro ui [--listen ADDR:PORT] [--token-file F] [--read-only]\n"
    "               [--json]\n"
    "\n"
    "Serves the web console and its JSON API (/api/v1/..., /metrics).\n"
    "The first line on stdout is the URL to open, with the token:\n"
    "  duro ui: http://HOST:PORT/#token=TOKEN\n"
    "With --json it is one JSON object on one line instead:\n"
    "  {\"url\", \"listen\", \"host\", \"port\", \"token\", "
    "\"read_only\"}\n"
    "  --listen ADDR:PORT  where to listen (default 127.0.0.1:8233; port 0\n"
    "                      picks a free port). ADDR is an IPv4 address,\n"
    "                      [IPv6] or localhost; anything but loopback is\n"
    "                      warned about: the console can cancel instances.\n"
    "                      It answers only to Host 127.0.0.1, localhost,\n"
    "                      [::1] and ADDR (DNS rebinding): on 0.0.0.0 the\n"
    "                      URL printed is 127.0.0.1's\n"
    "  --token-file F      the token is F's first line (default:\n"
    "                      $DURO_UI_TOKEN, else 32 random bytes)\n"
    "  --read-only         refuse every action (cancel, terminate, ...)\n"
    "Stops on SIGINT or SIGTERM (exit 0).\n";

/* "ui:NAME": the login name from the password file, else $USER. */
static void make_requester(char *buf, size_t size)
{
    struct passwd pw, *found = NULL;
    char scratch[1024];
    const char *name = NULL;
    if (getpwuid_r(geteuid(), &pw, scratch, sizeof(scratch), &found) == 0 &&
        found != NULL)
        name = found->pw_name;
    if (name == NULL || *name == '\0')
        name = getenv("USER");
    snprintf(buf, size, "ui:%s", name != NULL && *name ? name : "unknown");
}

/* The token: printable ASCII without spaces, 16 to 256 characters. */
static int token_ok(const char *t, size_t len)
{
    if (len < 16 || len > 256)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (t[i] <= ' ' || t[i] > '~' || t[i] == ';' || t[i] == ',')
            return 0;
    return 1;
}

static int load_token(cli *c, ui_server *s, const char *file)
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
    if (from != NULL) {
        size_t len = strlen(buf);
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
                           buf[len - 1] == ' ' || buf[len - 1] == '\t'))
            buf[--len] = '\0';
        if (!token_ok(buf, len))
            return cli_error(c, EXIT_USAGE, "usage",
                             "%s: the token must be 16 to 256 printable "
                             "characters without spaces, ';' or ','",
                             from);
        memcpy(s->token, buf, len + 1);
        s->token_len = len;
        return EXIT_OK;
    }
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
        snprintf(s->token + 2 * i, 3, "%02x", raw[i]);
    s->token_len = 2 * sizeof(raw);
    return EXIT_OK;
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

/* Requests in flight: from their request line (MHD's URI log callback) to
 * their end (its completion callback, which MHD calls for each of them),
 * so that a stop lets them finish (SIGTERM dropped answers, and an action
 * could be applied while the page said "Failed to fetch"). */
#define STOP_GRACE_MS 5000
static pthread_mutex_t flight_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flight_done; /* on CLOCK_MONOTONIC */
static unsigned long in_flight;

static void *request_begins(void *cls, const char *uri,
                            struct MHD_Connection *conn)
{
    pthread_mutex_lock(&flight_lock);
    in_flight++;
    pthread_mutex_unlock(&flight_lock);
    return ui_uri_seen(cls, uri, conn);
}

static void request_ends(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode why)
{
    ui_completed(cls, conn, state, (int)why);
    pthread_mutex_lock(&flight_lock);
    if (in_flight > 0)
        in_flight--;
    if (in_flight == 0)
        pthread_cond_broadcast(&flight_done);
    pthread_mutex_unlock(&flight_lock);
}

/* Waits until no request is in flight, at most STOP_GRACE_MS; the number
 * still in flight. */
static unsigned long wait_in_flight(void)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += STOP_GRACE_MS / 1000;
    deadline.tv_nsec += (long)(STOP_GRACE_MS % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&flight_lock);
    while (in_flight > 0 && pthread_cond_timedwait(&flight_done, &flight_lock,
                                                   &deadline) != ETIMEDOUT)
        ;
    unsigned long left = in_flight;
    pthread_mutex_unlock(&flight_lock);
    return left;
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512], shown[512 * 6 + 16];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    /* MHD's messages may quote what a client sent */
    fprintf(stderr, "duro ui: %s\n", text_escape(line, shown, sizeof(shown)));
}

int cmd_ui(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"listen", required_argument, NULL, 'l'},
        {"token-file", required_argument, NULL, 't'},
        {"read-only", no_argument, NULL, 'r'},
        {0}};
    static ui_server srv; /* read by the pool threads until they stop */
    memset(&srv, 0, sizeof(srv));
    const char *listen_arg = NULL, *token_file = NULL;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, ui_help, &status)) != -1) {
        if (ch == -2)
            return status;
        if (ch == 'l')
            listen_arg = optarg;
        else if (ch == 't')
            token_file = optarg;
        else if (ch == 'r')
            srv.read_only = 1;
    }
    if (optind < argc) {
        char quoted[TEXT_QUOTE_SIZE];
        return cli_usage(c, "unexpected argument '%s'",
                         text_quote(argv[optind], quoted, sizeof(quoted)));
    }
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
    if ((status = load_token(c, &srv, token_file)) != EXIT_OK)
        return status;
    make_requester(srv.requester, sizeof(srv.requester));
    if (!is_loopback(&addr))
        fprintf(stderr,
                "duro ui: warning: listening on %s, not loopback: anyone who "
                "can reach it and has the token can %s\n",
                host,
                srv.read_only ? "read every instance, its inputs and outputs"
                              : "cancel instances");
    if ((status = cli_open(c, srv.read_only ? CLI_OPEN_READ : CLI_OPEN_EXISTING,
                           &srv.client)) != EXIT_OK)
        return status;

    /* SIGINT and SIGTERM are taken by sigwait below; MHD's threads inherit
     * the mask, so the signal always reaches this thread. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Bound here, so the port (and the Host allow-list and cookie name
     * that depend on it) is known before any request can arrive. */
    int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t alen = sizeof(addr);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&addr,
             addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                        : sizeof(struct sockaddr_in)) != 0 ||
        listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &alen) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        duro_client_destroy(srv.client);
        return cli_error(c, EXIT_FAILED, "listen", "cannot listen on %s: %s",
                         listen_arg != NULL ? listen_arg : default_listen,
                         strerror(e));
    }
    srv.port = ntohs(addr.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)&addr)->sin6_port
                         : ((struct sockaddr_in *)&addr)->sin_port);
    snprintf(srv.cookie_name, sizeof(srv.cookie_name), "duro_ui_%u", srv.port);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&flight_done, &ca);
    pthread_condattr_destroy(&ca);
    /* MHD_USE_ITC: MHD_quiesce_daemon needs it */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | (v6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, (MHD_AccessHandlerCallback)ui_handle, &srv,
        MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)fd, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)2,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)32,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
        MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_NOTIFY_COMPLETED,
        request_ends, NULL, MHD_OPTION_URI_LOG_CALLBACK, request_begins, NULL,
        MHD_OPTION_END);
    if (d == NULL) {
        close(fd);
        duro_client_destroy(srv.client);
        return cli_error(c, EXIT_FAILED, "listen",
                         "cannot start the HTTP server on %s",
                         listen_arg != NULL ? listen_arg : default_listen);
    }
    /* The Host names the gate answers (ui_safety.c, DNS rebinding), said
     * before the URL; on 0.0.0.0 or [::] the URL is loopback's (a browser
     * that asks for http://0.0.0.0/ or the machine's other addresses is
     * not answered: 421). */
    const char *url_host = host;
    if (is_wildcard(&addr))
        url_host = addr.ss_family == AF_INET6 ? "[::1]" : "127.0.0.1";
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
    if (c->json) {
        /* one line, flushed, as the text's: a reader takes the first line
         * and the server goes on */
        char url[1024], listening[320];
        snprintf(url, sizeof(url), "http://%s:%u/#token=%s", url_host, srv.port,
                 srv.token);
        snprintf(listening, sizeof(listening), "%s:%u", host, srv.port);
        json_t *doc = json_object();
        jset(doc, "url", jstr(url));
        jset(doc, "listen", jstr(listening));
        jset(doc, "host", jstr(url_host));
        jset(doc, "port", jint(srv.port));
        jset(doc, "token", jstr(srv.token));
        jset(doc, "read_only", json_boolean(srv.read_only));
        char *line = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        if (line != NULL)
            puts(line);
        free(line);
    } else {
        printf("duro ui: http://%s:%u/#token=%s\n", url_host, srv.port,
               srv.token);
    }
    fflush(stdout);
    char masked[1024], shown[TEXT_ESCAPE_SIZE];
    duro_url_mask(c->db, masked, sizeof(masked));
    fprintf(stderr, "duro ui: serving %s%s; stop with Ctrl-C\n",
            text_escape(masked, shown, sizeof(shown)),
            srv.read_only ? " read-only" : "");

    int sig = 0;
    while (sigwait(&stop, &sig) != 0)
        ;
    fprintf(stderr, "duro ui: stopping (%s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* No new connection; the requests in flight finish (at most
     * STOP_GRACE_MS), then the rest is closed. */
    MHD_socket quiet = MHD_quiesce_daemon(d);
    unsigned long left = wait_in_flight();
    if (left > 0)
        fprintf(stderr,
                "duro ui: %lu request(s) still in flight after %d ms: "
                "closed\n",
                left, STOP_GRACE_MS);
    MHD_stop_daemon(d);
    if (quiet != MHD_INVALID_SOCKET)
        close(quiet);
    duro_client_destroy(srv.client);
    return EXIT_OK;
}
