/* ui_door.c - the front door of duro ui: one thread accepts every
 * connection and holds it until its request's header block is in (peeked,
 * not read: libmicrohttpd reads the same bytes again), then hands it to MHD
 * (MHD_add_connection). A connection whose header block is not complete
 * UI_HEADER_DEADLINE_MS after its accept is closed (after a 408 when it
 * sent something), and so is the oldest waiting one when UI_WAITING_MAX
 * wait: idle or trickling connections never hold the console. A header
 * block that is too large or breaks HTTP/1.1's grammar is answered here
 * (400, 411, 413, 414, 431, 505; 503 when MHD serves UI_SERVING_MAX), with
 * duro's headers: MHD 0.9.75 never gets a request it would refuse by
 * itself, with its own pages that lack them. Once in MHD, a connection
 * that has not signed in (ui_door_trust) has UI_HEADER_DEADLINE_MS more
 * to be done, and is the first closed when UI_SERVING_MAX are served: a
 * slow reader of the page or a trickled sign-in body cannot hold MHD
 * either. Owns the listening socket and the waiting connections (its
 * thread only); the connections MHD serves are under its lock, added and
 * removed by MHD's threads (ui_door_notify) and closed by the door with
 * shutdown(), which is safe under that lock: MHD closes a socket only
 * after its CLOSED notification. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ui.h"

#define LINGER_MS 2000      /* reading what follows a refusal before closing */
#define ACCEPT_PAUSE_MS 100 /* after EMFILE with nothing to evict */

/* A connection before its header block is in, or a refused one that is
 * read (and dropped) a little before being closed, so that the client
 * reads the answer rather than a reset. */
typedef struct waiting {
    int fd;
    int64_t deadline_ms;
    size_t got;    /* bytes peeked so far */
    int in_flight; /* counted in door->busy (it sent a byte) */
    int lingering; /* answered; in the lingering list */
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct waiting *prev, *next;
} waiting;

typedef struct waiting_list {
    waiting *head, *tail; /* by deadline: FIFO, every one gets the same */
} waiting_list;

/* A connection MHD serves (its socket context). */
typedef struct served {
    ui_door *door;
    int fd;
    int64_t since_ms; /* handed over (about: when MHD took it) */
    int trusted;      /* a request on it signed in */
    int ended;        /* shut down by the door, MHD not done with it */
    struct served *prev, *next;
} served;

struct ui_door {
    int listen_fd, epoll_fd, wake_fd;
    struct MHD_Daemon *daemon;
    pthread_t thread;
    int started;
    waiting_list waiting, lingering; /* the door thread's only */
    unsigned held;                   /* in both lists */
    int64_t accept_paused_until;
    int accepting;
    char peek[UI_HEADER_MAX + 1];
    pthread_mutex_t lock; /* guards the fields below */
    pthread_cond_t changed;
    unsigned long busy; /* in flight: waiting with a byte, or served */
    unsigned serving;   /* handed to MHD, not yet closed */
    unsigned ended;     /* of them, shut down by the door */
    served *served_head, *served_tail; /* oldest first */
    int stop_accepting, quit;
};

/* Tokens where the separators are not (RFC 9110 5.6.2). */
static int is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

typedef struct verdict {
    size_t header_len; /* complete: the bytes of the block */
    unsigned status;   /* refused */
    const char *code, *message;
} verdict;

static int refuse(verdict *v, unsigned status, const char *code,
                  const char *message)
{
    v->status = status;
    v->code = code;
    v->message = message;
    return -1;
}

/* "METHOD /target HTTP/1.x": 0, or -1 with @p v set. */
static int check_request_line(const char *s, size_t len, verdict *v)
{
    size_t i = 0, arguments = 1;
    while (i < len && is_tchar((unsigned char)s[i]))
        i++;
    if (i == 0 || i > 32 || i == len || s[i] != ' ')
        return refuse(v, 400, "bad_request",
                      "malformed request line (expected METHOD /path "
                      "HTTP/1.1)");
    size_t target = ++i;
    if (i == len || s[i] != '/')
        return refuse(v, 400, "bad_request",
                      "the request target must be a path starting with /");
    for (; i < len && s[i] != ' '; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch >= 0x7f)
            return refuse(v, 400, "bad_request",
                          "a control, space or non-ASCII byte in the "
                          "request target");
        arguments += ch == '&';
    }
    if (arguments > UI_ARGUMENTS_MAX)
        return refuse(v, 414, "uri_too_long",
                      "too many arguments in the request target");
    if (i == target || i == len)
        return refuse(v, 400, "bad_request",
                      "malformed request line (expected METHOD /path "
                      "HTTP/1.1)");
    const char *version = s + i + 1;
    size_t vlen = len - i - 1;
    if (vlen != 8 || memcmp(version, "HTTP/", 5) != 0 || version[6] != '.' ||
        version[5] < '0' || version[5] > '9' || version[7] < '0' ||
        version[7] > '9')
        return refuse(v, 400, "bad_request",
                      "malformed request line (expected METHOD /path "
                      "HTTP/1.1)");
    if (version[5] != '1')
        return refuse(v, 505, "http_version_not_supported",
                      "only HTTP/1.0 and HTTP/1.1 are served");
    return 0;
}

/* The value of a header line without its surrounding blanks. */
static void field_value(const char *s, size_t len, size_t colon,
                        const char **value, size_t *vlen)
{
    size_t a = colon + 1, b = len;
    while (a < b && (s[a] == ' ' || s[a] == '\t'))
        a++;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
        b--;
    *value = s + a;
    *vlen = b - a;
}

static int name_is(const char *s, size_t len, const char *name)
{
    return strlen(name) == len && strncasecmp(s, name, len) == 0;
}

/* "Name: value": 0, or -1 with @p v set. */
static int check_field(const char *s, size_t len, verdict *v)
{
    size_t colon = 0;
    while (colon < len && is_tchar((unsigned char)s[colon]))
        colon++;
    if (colon == 0 || colon == len || s[colon] != ':')
        return refuse(v, 400, "bad_request",
                      "malformed header line (expected Name: value; no "
                      "folded lines, no space before the colon)");
    for (size_t i = colon + 1; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return refuse(v, 400, "bad_request",
                          "a control character in a header value");
    }
    const char *value;
    size_t vlen;
    field_value(s, len, colon, &value, &vlen);
    if (name_is(s, colon, "Transfer-Encoding"))
        return refuse(v, 411, "length_required",
                      "a body needs Content-Length (Transfer-Encoding is "
                      "not accepted)");
    if (name_is(s, colon, "Content-Length")) {
        for (size_t i = 0; i < vlen; i++)
            if (value[i] < '0' || value[i] > '9')
                return refuse(v, 400, "bad_request",
                              "Content-Length is not a number");
        if (vlen == 0)
            return refuse(v, 400, "bad_request",
                          "Content-Length is not a number");
        if (vlen > 15)
            return refuse(v, 413, "too_large", "the body is larger than 1 MiB");
    }
    if (name_is(s, colon, "Cookie")) {
        size_t pairs = 1;
        for (size_t i = 0; i < vlen; i++)
            pairs += value[i] == ';' || value[i] == ',';
        if (pairs > UI_COOKIES_MAX)
            return refuse(v, 431, "headers_too_large",
                          "too many cookies (this console sets none: "
                          "another web application on this host did)");
    }
    return 0;
}

/* The header block at the start of @p b (@p n bytes): 1 complete
 * (v->header_len), 0 not yet, -1 refused (v->status, ...). Lines end with
 * CRLF or LF, as MHD reads them; anything MHD 0.9.75 would answer by
 * itself is refused here. */
static int check_block(const char *b, size_t n, verdict *v)
{
    size_t pos = 0, lines = 0;
    for (;;) {
        const char *nl = memchr(b + pos, '\n', n - pos);
        if (nl == NULL) {
            /* not HTTP at all (TLS, say): said now, not at the deadline */
            size_t m = 0;
            while (lines == 0 && m < n && is_tchar((unsigned char)b[m]))
                m++;
            if (lines == 0 && m < n && (m == 0 || b[m] != ' '))
                return refuse(v, 400, "bad_request",
                              "malformed request line (expected METHOD "
                              "/path HTTP/1.1)");
            if (lines == 0 && n >= UI_REQUEST_LINE_MAX)
                return refuse(v, 414, "uri_too_long",
                              "the request line is longer than 8 KiB");
            if (n >= UI_HEADER_MAX)
                return refuse(v, 431, "headers_too_large",
                              "the request's headers are larger than "
                              "16 KiB");
            return 0;
        }
        size_t end = (size_t)(nl - b), len = end - pos;
        if (len > 0 && b[end - 1] == '\r')
            len--;
        if (lines == 0 && end + 1 > UI_REQUEST_LINE_MAX)
            return refuse(v, 414, "uri_too_long",
                          "the request line is longer than 8 KiB");
        if (end + 1 > UI_HEADER_MAX)
            return refuse(v, 431, "headers_too_large",
                          "the request's headers are larger than 16 KiB");
        if (memchr(b + pos, '\0', len) != NULL ||
            memchr(b + pos, '\r', len) != NULL)
            return refuse(v, 400, "bad_request",
                          "a NUL or a lone CR in the request's headers");
        if (lines == 0) {
            if (check_request_line(b + pos, len, v) != 0)
                return -1;
        } else if (len == 0) {
            v->header_len = end + 1;
            return 1;
        } else {
            if (lines > UI_HEADER_LINES_MAX)
                return refuse(v, 431, "headers_too_large",
                              "more than 64 header lines");
            if (check_field(b + pos, len, v) != 0)
                return -1;
        }
        lines++;
        pos = end + 1;
    }
}

/* ---- counts -------------------------------------------------------------- */

static void busy_add(ui_door *door, long busy, int serving)
{
    pthread_mutex_lock(&door->lock);
    door->busy = (unsigned long)((long)door->busy + busy);
    door->serving = (unsigned)((int)door->serving + serving);
    pthread_cond_broadcast(&door->changed);
    pthread_mutex_unlock(&door->lock);
}

/* The context of a connection MHD took when no record could be made: it
 * is counted, never trusted nor closed by the door. */
static char counted_only;

void ui_door_notify(void *cls, struct MHD_Connection *conn, void **context,
                    enum MHD_ConnectionNotificationCode code)
{
    ui_door *door = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        served *s = calloc(1, sizeof(*s));
        if (s == NULL || info == NULL) {
            free(s);
            *context = &counted_only;
            return;
        }
        s->door = door;
        s->fd = info->connect_fd;
        s->since_ms = ui_now_ms();
        pthread_mutex_lock(&door->lock);
        s->prev = door->served_tail;
        if (door->served_tail != NULL)
            door->served_tail->next = s;
        else
            door->served_head = s;
        door->served_tail = s;
        pthread_mutex_unlock(&door->lock);
        *context = s;
        return;
    }
    if (*context == NULL)
        return;
    served *s = *context == &counted_only ? NULL : *context;
    pthread_mutex_lock(&door->lock);
    if (s != NULL) {
        if (s->prev != NULL)
            s->prev->next = s->next;
        else
            door->served_head = s->next;
        if (s->next != NULL)
            s->next->prev = s->prev;
        else
            door->served_tail = s->prev;
        if (s->ended)
            door->ended--;
    }
    door->busy--;
    door->serving--;
    pthread_cond_broadcast(&door->changed);
    pthread_mutex_unlock(&door->lock);
    free(s);
    *context = NULL;
}

void ui_door_trust(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    served *s = info != NULL ? info->socket_context : NULL;
    if (s == NULL || (void *)s == (void *)&counted_only)
        return;
    pthread_mutex_lock(&s->door->lock);
    s->trusted = 1;
    pthread_mutex_unlock(&s->door->lock);
}

/* Closes @p s (under the lock): MHD sees the end and lets it go. */
static void end_served(ui_door *door, served *s)
{
    shutdown(s->fd, SHUT_RDWR);
    s->ended = 1;
    door->ended++;
}

/* ---- the waiting lists --------------------------------------------------- */

static void list_append(waiting_list *l, waiting *w)
{
    w->next = NULL;
    w->prev = l->tail;
    if (l->tail != NULL)
        l->tail->next = w;
    else
        l->head = w;
    l->tail = w;
}

static void list_remove(waiting_list *l, waiting *w)
{
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        l->head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    else
        l->tail = w->prev;
    w->prev = w->next = NULL;
}

/* Forgets @p w; closes its socket unless @p keep_fd (handed to MHD). */
static void drop(ui_door *door, waiting *w, int keep_fd)
{
    list_remove(w->lingering ? &door->lingering : &door->waiting, w);
    door->held--;
    if (w->in_flight)
        busy_add(door, -1, 0);
    if (!keep_fd) {
        epoll_ctl(door->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
        close(w->fd);
    }
    free(w);
}

/* Answers @p w with duro's error and moves it to the lingering list: the
 * socket is read and dropped until the client closes or LINGER_MS pass. */
static void answer(ui_door *door, waiting *w, unsigned status, const char *code,
                   const char *message)
{
    char response[4096], sink[4096];
    size_t len =
        ui_raw_error(status, code, message, response, sizeof(response));
    /* what was sent so far: a close with unread bytes would be a reset,
     * which may destroy the answer before the client reads it */
    while (recv(w->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
        ;
    if (len > 0)
        send(w->fd, response, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(w->fd, SHUT_WR);
    list_remove(&door->waiting, w);
    if (w->in_flight) {
        w->in_flight = 0;
        busy_add(door, -1, 0);
    }
    w->lingering = 1;
    w->deadline_ms = ui_now_ms() + LINGER_MS;
    list_append(&door->lingering, w);
}

static ui_ratelog log_timeout, log_evict, log_full, log_refused, log_slow,
    log_dropped;

/* Closes the oldest connection held (lingering first): 0, or -1 when
 * none is held. */
static int evict_oldest(ui_door *door)
{
    waiting *w = door->lingering.head;
    if (w == NULL) {
        w = door->waiting.head;
        if (w == NULL)
            return -1;
        ui_log_limited(&log_evict, 10000,
                       "%u connections were waiting for their request "
                       "(at most %d): the oldest closed",
                       door->held, UI_WAITING_MAX);
    }
    drop(door, w, 0);
    return 0;
}

/* Room in MHD for one more: when UI_SERVING_MAX are served, the oldest
 * that has not signed in is closed; 0, or -1 when all have (or MHD holds
 * twice as many, closing). Under the lock. */
static int make_room(ui_door *door)
{
    if (door->serving >= 2 * UI_SERVING_MAX)
        return -1;
    if (door->serving - door->ended < UI_SERVING_MAX)
        return 0;
    for (served *s = door->served_head; s != NULL; s = s->next)
        if (!s->trusted && !s->ended) {
            end_served(door, s);
            ui_log_limited(&log_slow, 10000,
                           "%d requests were being served: the oldest that "
                           "had not signed in was closed",
                           UI_SERVING_MAX);
            return 0;
        }
    return -1;
}

/* Hands @p w, whose header block is in, to MHD. */
static void hand_over(ui_door *door, waiting *w)
{
    pthread_mutex_lock(&door->lock);
    int full = make_room(door) != 0;
    pthread_mutex_unlock(&door->lock);
    if (full) {
        ui_log_limited(&log_full, 10000,
                       "%d requests are being served: a new one was "
                       "answered 503",
                       UI_SERVING_MAX);
        answer(door, w, 503, "busy",
               "too many requests are being served; try again");
        return;
    }
    int fd = w->fd;
    struct sockaddr_storage addr = w->addr;
    socklen_t addr_len = w->addr_len;
    epoll_ctl(door->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
    /* counted as MHD's before it may close it: ui_door_notify uncounts */
    busy_add(door, 1, 1);
    drop(door, w, 1);
    if (MHD_add_connection(door->daemon, fd, (struct sockaddr *)&addr,
                           addr_len) != MHD_YES) {
        busy_add(door, -1, -1); /* MHD closed it */
        ui_log_limited(&log_dropped, 10000,
                       "a request could not be handed to the HTTP server "
                       "(out of memory?): closed");
    }
}

/* What @p w sent so far: waits, refuses or hands it over. */
static void examine(ui_door *door, waiting *w, int hung_up)
{
    if (w->lingering) {
        char sink[4096];
        ssize_t n;
        while ((n = recv(w->fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
            ;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            drop(door, w, 0);
        return;
    }
    ssize_t n =
        recv(w->fd, door->peek, sizeof(door->peek), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 ||
        (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop(door, w, 0); /* gone before its request was in */
        return;
    }
    if (n < 0)
        return;
    w->got = (size_t)n;
    if (!w->in_flight) {
        w->in_flight = 1;
        busy_add(door, 1, 0);
    }
    verdict v = {0};
    int rc = check_block(door->peek, (size_t)n, &v);
    if (rc > 0) {
        hand_over(door, w);
    } else if (rc < 0) {
        ui_log_limited(&log_refused, 10000,
                       "a request was refused before its headers were "
                       "read: %u %s",
                       v.status, v.code);
        answer(door, w, v.status, v.code, v.message);
    } else if (hung_up) {
        drop(door, w, 0); /* it can never complete */
    }
}

static void accept_some(ui_door *door)
{
    for (int i = 0; i < 64 && door->accepting; i++) {
        waiting *w = calloc(1, sizeof(*w));
        if (w == NULL)
            return;
        w->addr_len = sizeof(w->addr);
        w->fd = accept4(door->listen_fd, (struct sockaddr *)&w->addr,
                        &w->addr_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (w->fd < 0) {
            int e = errno;
            free(w);
            if ((e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) &&
                evict_oldest(door) != 0) {
                /* nothing to give back: pause, or accept would spin */
                door->accept_paused_until = ui_now_ms() + ACCEPT_PAUSE_MS;
                epoll_ctl(door->epoll_fd, EPOLL_CTL_DEL, door->listen_fd, NULL);
                return;
            }
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM ||
                e == EINTR || e == ECONNABORTED)
                continue;
            return; /* EAGAIN: all taken */
        }
        if (door->held >= UI_WAITING_MAX)
            evict_oldest(door);
        w->deadline_ms = ui_now_ms() + UI_HEADER_DEADLINE_MS;
        list_append(&door->waiting, w);
        door->held++;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                                 .data.ptr = w};
        if (epoll_ctl(door->epoll_fd, EPOLL_CTL_ADD, w->fd, &ev) != 0)
            drop(door, w, 0);
    }
}

/* Closes what outlived its deadline; the ms until the next deadline, or
 * -1 for none. */
static int expire(ui_door *door)
{
    int64_t now = ui_now_ms(), next = -1;
    while (door->lingering.head != NULL &&
           door->lingering.head->deadline_ms <= now)
        drop(door, door->lingering.head, 0);
    while (door->waiting.head != NULL &&
           door->waiting.head->deadline_ms <= now) {
        waiting *w = door->waiting.head;
        ui_log_limited(&log_timeout, 10000,
                       "a connection sent no complete request within %d s: "
                       "closed",
                       UI_HEADER_DEADLINE_MS / 1000);
        if (w->got > 0)
            answer(door, w, 408, "request_timeout",
                   "the request's headers took longer than 10 s");
        else
            drop(door, w, 0);
    }
    /* a connection in MHD that has not signed in has as long again */
    pthread_mutex_lock(&door->lock);
    for (served *s = door->served_head; s != NULL; s = s->next) {
        if (s->trusted || s->ended)
            continue;
        int64_t end = s->since_ms + UI_HEADER_DEADLINE_MS;
        if (end <= now) {
            end_served(door, s);
            ui_log_limited(&log_slow, 10000,
                           "a request that had not signed in was not done "
                           "%d s after its headers: closed",
                           UI_HEADER_DEADLINE_MS / 1000);
        } else if (next < 0 || end < next) {
            next = end;
        }
    }
    pthread_mutex_unlock(&door->lock);
    if (door->waiting.head != NULL &&
        (next < 0 || door->waiting.head->deadline_ms < next))
        next = door->waiting.head->deadline_ms;
    if (door->lingering.head != NULL &&
        (next < 0 || door->lingering.head->deadline_ms < next))
        next = door->lingering.head->deadline_ms;
    if (door->accepting && door->accept_paused_until > 0) {
        if (door->accept_paused_until <= now) {
            door->accept_paused_until = 0;
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = door};
            epoll_ctl(door->epoll_fd, EPOLL_CTL_ADD, door->listen_fd, &ev);
        } else if (next < 0 || door->accept_paused_until < next) {
            next = door->accept_paused_until;
        }
    }
    if (next < 0)
        return -1;
    return next <= now ? 0 : (int)(next - now);
}

/* Stops accepting: the listening socket is closed (a new connection is
 * refused by the kernel) and the connections that sent nothing too. */
static void close_door(ui_door *door)
{
    door->accepting = 0;
    epoll_ctl(door->epoll_fd, EPOLL_CTL_DEL, door->listen_fd, NULL);
    close(door->listen_fd);
    door->listen_fd = -1;
    waiting *w = door->waiting.head;
    while (w != NULL) {
        waiting *next = w->next;
        if (w->got == 0)
            drop(door, w, 0);
        w = next;
    }
}

static void *door_main(void *arg)
{
    ui_door *door = arg;
    struct epoll_event events[64];
    for (;;) {
        int timeout = expire(door);
        int n = epoll_wait(door->epoll_fd, events, 64, timeout);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;
            if (p == door) {
                accept_some(door);
            } else if (p == &door->wake_fd) {
                uint64_t drained;
                if (read(door->wake_fd, &drained, sizeof(drained)) < 0)
                    drained = 0;
                pthread_mutex_lock(&door->lock);
                int quit = door->quit, stop = door->stop_accepting;
                pthread_mutex_unlock(&door->lock);
                if (quit)
                    return NULL;
                if (stop && door->accepting)
                    close_door(door);
            } else {
                examine(door, p,
                        (events[i].events &
                         (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
            }
        }
    }
    return NULL;
}

/* ---- life ---------------------------------------------------------------- */

ui_door *ui_door_create(int listen_fd)
{
    ui_door *door = calloc(1, sizeof(*door));
    if (door == NULL)
        return NULL;
    door->listen_fd = listen_fd;
    door->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    door->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int flags = fcntl(listen_fd, F_GETFL);
    if (door->epoll_fd < 0 || door->wake_fd < 0 || flags < 0 ||
        fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        if (door->epoll_fd >= 0)
            close(door->epoll_fd);
        if (door->wake_fd >= 0)
            close(door->wake_fd);
        free(door);
        return NULL;
    }
    pthread_mutex_init(&door->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&door->changed, &ca);
    pthread_condattr_destroy(&ca);
    door->accepting = 1;
    return door;
}

int ui_door_start(ui_door *door, struct MHD_Daemon *daemon)
{
    door->daemon = daemon;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = door};
    struct epoll_event wake = {.events = EPOLLIN, .data.ptr = &door->wake_fd};
    if (epoll_ctl(door->epoll_fd, EPOLL_CTL_ADD, door->listen_fd, &ev) != 0 ||
        epoll_ctl(door->epoll_fd, EPOLL_CTL_ADD, door->wake_fd, &wake) != 0 ||
        pthread_create(&door->thread, NULL, door_main, door) != 0)
        return -1;
    door->started = 1;
    return 0;
}

static void wake(ui_door *door)
{
    uint64_t one = 1;
    if (write(door->wake_fd, &one, sizeof(one)) < 0)
        return; /* the counter is full: it is awake already */
}

void ui_door_stop_accepting(ui_door *door)
{
    pthread_mutex_lock(&door->lock);
    door->stop_accepting = 1;
    pthread_mutex_unlock(&door->lock);
    wake(door);
}

unsigned long ui_door_wait_idle(ui_door *door, int64_t ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)(ms / 1000);
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&door->lock);
    while (door->busy > 0 && pthread_cond_timedwait(&door->changed, &door->lock,
                                                    &deadline) != ETIMEDOUT)
        ;
    unsigned long left = door->busy;
    pthread_mutex_unlock(&door->lock);
    return left;
}

void ui_door_halt(ui_door *door)
{
    if (door->started) {
        pthread_mutex_lock(&door->lock);
        door->quit = 1;
        pthread_mutex_unlock(&door->lock);
        wake(door);
        pthread_join(door->thread, NULL);
        door->started = 0;
    }
    while (door->waiting.head != NULL)
        drop(door, door->waiting.head, 0);
    while (door->lingering.head != NULL)
        drop(door, door->lingering.head, 0);
    if (door->listen_fd >= 0)
        close(door->listen_fd);
    door->listen_fd = -1;
}

void ui_door_destroy(ui_door *door)
{
    if (door == NULL)
        return;
    ui_door_halt(door);
    /* MHD has stopped: it notified the end of each of its connections,
     * which freed their records */
    close(door->epoll_fd);
    close(door->wake_fd);
    pthread_cond_destroy(&door->changed);
    pthread_mutex_destroy(&door->lock);
    free(door);
}
