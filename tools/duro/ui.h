/* ui.h - what the modules of `duro ui` share: the server's settings
 * (ui_server.c), the front door that holds a connection until its header
 * block is in (ui_door.c), one request (the gate that enforces every
 * safety rule before routing, ui_safety.c), who may sign in and how
 * (operators, sessions, login codes, the failure backoff: ui_auth.c), the
 * JSON API and /metrics (ui_api.c, the schedules' routes in ui_schedules.c,
 * what the routes share in ui_args.c) and the embedded assets (ui_assets.c,
 * with the table embed.c generates). Requests run on MHD's pool threads,
 * concurrently: ui_server is read-only after start, ui_auth has its own
 * lock, and the client is thread-safe (duro.h). */
#ifndef DURO_UI_H
#define DURO_UI_H

#include <microhttpd.h>
#include <stddef.h>

#include "cli.h"

/* An embedded file (embed.c writes the table, ended by a NULL path). */
typedef struct ui_asset {
    const char *path; /* "/app.js" */
    const char *mime;
    const unsigned char *data;
    size_t len;
    const char *etag; /* "\"<fnv-1a 64 hex>\"" */
} ui_asset;
extern const ui_asset ui_assets[];

#define UI_BODY_MAX (1024 * 1024) /* largest request body */
#define UI_DEFAULT_PORT 8233

/* The front door's limits (ui_door.c, docs/ui-api.md "Connections"). */
#define UI_HEADER_DEADLINE_MS 10000 /* accept to the end of the headers */
#define UI_REQUEST_LINE_MAX 8192    /* bytes, CRLF included: else 414 */
#define UI_HEADER_MAX 16384         /* the whole header block: else 431 */
#define UI_HEADER_LINES_MAX 64      /* header fields: else 431 */
#define UI_COOKIES_MAX 128          /* pairs in Cookie: else 431 */
#define UI_ARGUMENTS_MAX 64         /* '&'-separated arguments: else 414 */
#define UI_WAITING_MAX 512 /* connections before their headers are in */
#define UI_SERVING_MAX 256 /* connections MHD serves at once */

/* Who signs in: one line of --tokens-file, or the operator who ran duro ui
 * (--operator, default the login name) with the token of --token-file,
 * $DURO_UI_TOKEN or 32 random bytes. */
#define UI_NAME_MAX 64
typedef struct ui_operator {
    char name[UI_NAME_MAX + 1];      /* [A-Za-z0-9._-]{1,64} */
    char requester[UI_NAME_MAX + 4]; /* "ui:NAME": requested_by */
    char token[257];
    size_t token_len;
} ui_operator;

typedef struct ui_auth ui_auth; /* ui_auth.c; its own lock */
typedef struct ui_door ui_door; /* ui_door.c */

/* Read-only once the daemon runs. */
typedef struct ui_server {
    duro_client *client;
    ui_auth *auth;
    unsigned port;
    char listen_host[300]; /* explicit --listen host, normalised; "" */
    char url_host[300];    /* the host of the printed URL: "127.0.0.1" */
    int read_only;
} ui_server;

typedef struct ui_request {
    struct MHD_Connection *conn;
    const ui_server *srv;
    const char *method;
    const char *path;
    const struct ui_route *route;
    const ui_operator *who; /* the signed-in operator (after the gate) */
    int by_bearer;          /* signed in with Authorization: Bearer */
    char peer[64];          /* "127.0.0.1:54321": for the log */
    int done;     /* a response was queued: ignore the rest of the body */
    int bad_path; /* the raw path holds a control character or %00-%1f,
                     %7f (MHD cuts the decoded path at a NUL) */
    int too_large;
    char *body;
    size_t body_len, body_cap;
} ui_request;

/* ---- ui_safety.c --------------------------------------------------------- */

/* The MHD access handler and its completion callback. */
int ui_handle(void *cls, struct MHD_Connection *conn, const char *url,
              const char *method, const char *version, const char *upload,
              size_t *upload_size, void **state);
void ui_completed(void *cls, struct MHD_Connection *conn, void **state,
                  int why);
/* MHD's URI log callback: the request's state, made from the raw URI
 * before MHD decodes it (NULL when out of memory: ui_handle makes it). */
void *ui_uri_seen(void *cls, const char *uri, struct MHD_Connection *conn);
/* A response over a copy of @p data with the security headers every
 * response carries (CSP, nosniff, ...); @p api adds Cache-Control:
 * no-store. NULL when out of memory. */
struct MHD_Response *ui_response(const void *data, size_t len, const char *mime,
                                 int api);
/* Queues @p resp (and drops our reference); the MHD result. */
int ui_queue(ui_request *r, unsigned status, struct MHD_Response *resp);
/* A JSON document (stolen) as an API response. */
int ui_send_json(ui_request *r, unsigned status, json_t *doc);
/* {"error":{"code","message"}} with @p status. */
int ui_send_error(ui_request *r, unsigned status, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The same, with "Retry-After: @p retry_after_s" and, when @p failures is
 * not 0, "failures" and "retry_after_s" in the error object (429 and the
 * 401s of the sign-in backoff). */
int ui_send_refusal(ui_request *r, unsigned status, const char *code,
                    unsigned failures, unsigned retry_after_s, const char *fmt,
                    ...) __attribute__((format(printf, 6, 7)));
/* A whole HTTP/1.1 response (status line, duro's headers, Connection:
 * close, the JSON error) into @p out, for the front door, which answers
 * without MHD; its length (0 when @p size is too small). */
size_t ui_raw_error(unsigned status, const char *code, const char *message,
                    char *out, size_t size);
/* Prints "duro ui: " and the message on stderr at most once per
 * @p every_ms for @p limiter (a static, zeroed), counting the lines it
 * held back and saying how many with the next one it prints. Any
 * thread. */
typedef struct ui_ratelog {
    int64_t next_ms;
    unsigned long held;
} ui_ratelog;
void ui_log_limited(ui_ratelog *limiter, int64_t every_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* CLOCK_MONOTONIC and CLOCK_REALTIME in milliseconds. */
int64_t ui_now_ms(void);
int64_t ui_wall_ms(void);

/* ---- ui_api.c ------------------------------------------------------------ */

typedef struct ui_route ui_route;
/* The route for @p path, or NULL (404). *@p method_ok is 0 when the path is
 * known but not with @p method (405). */
const ui_route *ui_route_find(const char *path, const char *method,
                              int *method_ok);
/* 1 for a route that changes the store (refused by --read-only). */
int ui_route_is_action(const ui_route *route);
/* What a route needs: UI_NEEDS_SIGNIN (a session or a bearer token),
 * UI_NEEDS_NOTHING (POST /api/v1/session: it is the sign-in) or
 * UI_NEEDS_BEARER (POST /api/v1/login-code: a session cannot mint codes,
 * else it would outlive its expiry). */
enum { UI_NEEDS_SIGNIN = 0, UI_NEEDS_NOTHING = 1, UI_NEEDS_BEARER = 2 };
int ui_route_needs(const ui_route *route);
/* Runs the route; @p body is the parsed JSON object of a POST (NULL for
 * GET). */
int ui_route_run(const ui_route *route, ui_request *r, json_t *body);
/* The routes of ui_schedules.c (docs/ui-api.md "Schedules"). */
int ui_get_schedules(ui_request *r, json_t *body);
int ui_get_schedule(ui_request *r, json_t *body);
int ui_post_schedule_create(ui_request *r, json_t *body);
int ui_post_schedule_update(ui_request *r, json_t *body);
int ui_post_schedule_pause(ui_request *r, json_t *body);
int ui_post_schedule_resume(ui_request *r, json_t *body);
int ui_post_schedule_trigger(ui_request *r, json_t *body);
int ui_post_schedule_delete(ui_request *r, json_t *body);

/* ---- ui_args.c ----------------------------------------------------------- */

/* base64url (no padding) of @p len bytes; caller frees. */
char *ui_ref_encode(const char *bytes, size_t len);
/* The id of a ref (caller frees), or NULL when it is not base64url of a
 * non-empty id without NUL. */
char *ui_ref_decode(const char *ref);
/* The value of query argument @p key, NULL when absent or empty. */
const char *ui_arg(ui_request *r, const char *key);
/* An unsigned integer argument (@p dflt when absent); -1 after queueing a
 * 400 in *@p rc. */
int ui_arg_uint(ui_request *r, const char *key, uint64_t dflt, uint64_t max,
                uint64_t *out, int *rc);
/* The id of ?ref= (or body "ref"), caller frees; NULL after queueing the
 * 400 in *@p rc ("ref is not base64url of @p what id": "an instance"). */
char *ui_need_ref(ui_request *r, const char *ref, const char *what, int *rc);
/* The error response of a failed duro call @p rc (the HTTP status follows
 * the code), its message "@p what: duro_errmsg()". */
int ui_send_rc(ui_request *r, int rc, const char *what);
/* 0 when every query argument is in @p known (NULL-ended); else queues 400
 * naming the first other one and returns -1. */
int ui_known_args(ui_request *r, const char *const *known, int *rc);
/* The text of @p key in @p obj (@p where: "" or "filter." for messages):
 * *@p out NULL when absent, else a non-empty string without NUL; any other
 * value queues 400 naming the key and returns -1. */
int ui_body_text(ui_request *r, json_t *obj, const char *where, const char *key,
                 const char **out, int *rc);
/* 0 when every key of @p obj is in @p known (NULL-ended); else queues 400
 * naming the first other one (in @p where: "body", "filter") and returns
 * -1. */
int ui_known_keys(ui_request *r, json_t *obj, const char *where,
                  const char *const *known, int *rc);
/* "duro ui: WHAT ID by ui:NAME: OUTCOME" on stderr. */
void ui_log_action(ui_request *r, const char *what, const char *id,
                   const char *outcome);

/* ---- ui_auth.c ----------------------------------------------------------- */

/* Parses --tokens-file @p path into @p ops (caller frees), one operator a
 * line: "NAME TOKEN", blank lines and "#" comments skipped. A bad line
 * (name, token, a repeated name or token) is refused with its number into
 * @p err. 0, or -1. */
int ui_tokens_file(const char *path, ui_operator **ops, size_t *count,
                   char *err, size_t err_size);
/* 1 when @p name is an operator name ([A-Za-z0-9._-]{1,64}). */
int ui_name_ok(const char *name);
/* 1 when @p token may be a token: 16 to 256 printable characters without
 * spaces, ';' or ','. */
int ui_token_ok(const char *token, size_t len);
/* The sign-in state over @p count operators (copied); @p launcher is the
 * index of the one the printed login codes sign in. NULL when out of
 * memory. Lifetimes in ms. */
ui_auth *ui_auth_create(const ui_operator *ops, size_t count, size_t launcher,
                        int64_t session_ttl_ms, int64_t code_ttl_ms);
void ui_auth_destroy(ui_auth *a);
const ui_operator *ui_auth_launcher(const ui_auth *a);
/* A fresh one-time login code for @p who into @p code (at least 33
 * bytes), dead after its first use or code_ttl; when it expires
 * (CLOCK_REALTIME ms) in *@p expires_ms. 0, or -1 (getrandom failed). */
int ui_auth_new_code(ui_auth *a, const ui_operator *who, char *code,
                     int64_t *expires_ms);
/* The operator of a live session @p id, or NULL (unknown, ended or
 * expired). */
const ui_operator *ui_auth_session(ui_auth *a, const char *id);
/* The gate's check of a bearer token: 0 with *@p who set, else the
 * refusal is queued (401, or 429 while token sign-ins wait) and *@p rc is
 * its MHD result. */
int ui_auth_bearer(ui_request *r, const char *token, const ui_operator **who,
                   int *rc);
/* The routes of ui_auth.c: POST /api/v1/session {"token"} or {"code"},
 * POST /api/v1/logout, POST /api/v1/login-code. */
int ui_auth_post_session(ui_request *r, json_t *body);
int ui_auth_post_logout(ui_request *r, json_t *body);
int ui_auth_post_login_code(ui_request *r, json_t *body);
/* "http://HOST:PORT/#login=CODE" for @p srv into @p out. */
void ui_login_url(const ui_server *srv, const char *code, char *out,
                  size_t size);

/* ---- ui_door.c ----------------------------------------------------------- */

/* The door over the listening socket @p listen_fd (taken). NULL when out
 * of memory or epoll fails. */
ui_door *ui_door_create(int listen_fd);
/* MHD's MHD_OPTION_NOTIFY_CONNECTION callback, with the door as its
 * closure: counts the connections MHD serves. */
void ui_door_notify(void *cls, struct MHD_Connection *conn, void **context,
                    enum MHD_ConnectionNotificationCode code);
/* Marks the connection of a request that signed in: the door never
 * closes it early (one that has not is closed when it takes longer than
 * UI_HEADER_DEADLINE_MS in MHD, or first when MHD is full). Any thread. */
void ui_door_trust(struct MHD_Connection *conn);
/* Starts the door's thread, handing complete requests to @p daemon. 0,
 * or -1. */
int ui_door_start(ui_door *door, struct MHD_Daemon *daemon);
/* Stops accepting (the listening socket is closed) and closes the
 * connections that sent nothing; the others go on. */
void ui_door_stop_accepting(ui_door *door);
/* Waits until no connection is in flight (one that sent a byte and was
 * not answered, waiting here or served by MHD), at most @p ms; how many
 * are left. */
unsigned long ui_door_wait_idle(ui_door *door, int64_t ms);
/* Stops the thread and closes what it holds, so that nothing is handed
 * to MHD any more: before MHD_stop_daemon. */
void ui_door_halt(ui_door *door);
/* Halts it if need be and frees it: after MHD_stop_daemon (whose closing
 * connections it counts). NULL is a no-op. */
void ui_door_destroy(ui_door *door);

/* ---- ui_assets.c --------------------------------------------------------- */

/* The asset for a GET path ("/" is "/index.html"), or NULL. */
const ui_asset *ui_asset_find(const char *path);
int ui_asset_send(ui_request *r, const ui_asset *a);

#endif
