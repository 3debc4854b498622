/* ui.h - what the modules of `duro ui` share: the server's settings
 * (ui_server.c), one request (the gate that enforces every safety rule
 * before routing, ui_safety.c), the JSON API and /metrics (ui_api.c) and
 * the embedded assets (ui_assets.c, with the table embed.c generates).
 * Requests run on MHD's pool threads, concurrently: everything here is
 * read-only after start, and the client is thread-safe (duro.h). */
#ifndef DURO_UI_H
#define DURO_UI_H

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

/* Read-only once the daemon runs. */
typedef struct ui_server {
    duro_client *client;
    char token[257];
    size_t token_len;
    char cookie_name[32]; /* "duro_ui_<port>": cookies ignore ports */
    unsigned port;
    char listen_host[300]; /* explicit --listen host, normalised; "" */
    int read_only;
    char requester[300]; /* "ui:NAME": requested_by of every action */
} ui_server;

struct MHD_Connection;
struct MHD_Response;

typedef struct ui_request {
    struct MHD_Connection *conn;
    const ui_server *srv;
    const char *method;
    const char *path;
    const struct ui_route *route; /* NULL for the session exchange */
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

/* ---- ui_api.c ------------------------------------------------------------ */

typedef struct ui_route ui_route;
/* The route for @p path, or NULL (404). *@p method_ok is 0 when the path is
 * known but not with @p method (405). */
const ui_route *ui_route_find(const char *path, const char *method,
                              int *method_ok);
/* 1 for a route that changes the store (refused by --read-only). */
int ui_route_is_action(const ui_route *route);
/* Runs the route; @p body is the parsed JSON object of a POST (NULL for
 * GET). */
int ui_route_run(const ui_route *route, ui_request *r, json_t *body);
/* base64url (no padding) of @p len bytes; caller frees. */
char *ui_ref_encode(const char *bytes, size_t len);

/* ---- ui_assets.c --------------------------------------------------------- */

/* The asset for a GET path ("/" is "/index.html"), or NULL. */
const ui_asset *ui_asset_find(const char *path);
int ui_asset_send(ui_request *r, const ui_asset *a);

#endif
