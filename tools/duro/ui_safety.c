/* ui_safety.c - the gate of duro ui: every request passes here, and every
 * safety rule is enforced here once, before routing:
 *   1. header sanity: one Host, one Content-Length, not both Content-Length
 *      and Transfer-Encoding, no NUL in a decoded header, cookie or
 *      argument, no control character in the path, raw or %-encoded (400);
 *      MHD 0.9.75 lets all of these through;
 *   2. the Host allow-list (DNS rebinding): 127.0.0.1:PORT, localhost:PORT,
 *      [::1]:PORT and the explicit --listen host, case and trailing dot
 *      normalised (421), on every method and path;
 *   3. no token in the URL (?token=: 400);
 *   4. CSRF, for every method but GET and HEAD: Sec-Fetch-Site
 *      same-origin, or (absent) Origin equal to ours, or (both absent) a
 *      bearer token (403); Content-Type application/json (415); a body of
 *      at most 1 MiB (413) holding a JSON object (400);
 *   5. auth for /api and /metrics: the cookie duro_ui_<port> (from POST
 *      /api/v1/session) or Authorization: Bearer, compared in constant
 *      time (401); the page and its assets need none;
 *   6. routing, before auth and the body: unknown route 404, wrong method
 *      405; then (after auth) --read-only refuses every action (403).
 * Every response carries the CSP and the other headers (ui_response). */
#include <ctype.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ui.h"

static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src "
    "'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'";

struct MHD_Response *ui_response(const void *data, size_t len, const char *mime,
                                 int api)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (resp == NULL)
        return NULL;
    MHD_add_response_header(resp, "Content-Type", mime);
    MHD_add_response_header(resp, "Content-Security-Policy", csp);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(resp, "Cross-Origin-Resource-Policy",
                            "same-origin");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    if (api)
        MHD_add_response_header(resp, "Cache-Control", "no-store");
    return resp;
}

int ui_queue(ui_request *r, unsigned status, struct MHD_Response *resp)
{
    r->done = 1;
    if (resp == NULL)
        return MHD_NO; /* out of memory: MHD closes the connection */
    enum MHD_Result rc = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

int ui_send_json(ui_request *r, unsigned status, json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(doc);
    if (text == NULL)
        return ui_queue(r, status, NULL);
    size_t len = strlen(text);
    text[len] = '\n';
    struct MHD_Response *resp =
        ui_response(text, len + 1, "application/json", 1);
    free(text);
    return ui_queue(r, status, resp);
}

int ui_send_error(ui_request *r, unsigned status, const char *code,
                  const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    json_t *err = json_object();
    jset(err, "code", jstr(code));
    jset(err, "message", jstr(message));
    json_t *doc = json_object();
    jset(doc, "error", err);
    return ui_send_json(r, status, doc);
}

/* ---- 1. header sanity ---------------------------------------------------- */

typedef struct header_scan {
    int host, content_length, transfer_encoding, nul;
} header_scan;

static enum MHD_Result scan_value(void *cls, enum MHD_ValueKind kind,
                                  const char *key, size_t key_size,
                                  const char *value, size_t value_size)
{
    header_scan *h = cls;
    if (strlen(key) != key_size ||
        (value != NULL && strlen(value) != value_size))
        h->nul = 1;
    if (kind == MHD_HEADER_KIND) {
        h->host += strcasecmp(key, "Host") == 0;
        h->content_length += strcasecmp(key, "Content-Length") == 0;
        h->transfer_encoding += strcasecmp(key, "Transfer-Encoding") == 0;
    }
    return MHD_YES;
}

/* ---- 2. Host ------------------------------------------------------------- */

/* "Name.:port" as "name:port" into @p out (lowercase, no trailing dot in
 * the name); 0 when malformed. No port: ":80". */
static int normalise_host(const char *in, size_t len, char *out, size_t size)
{
    char name[300];
    size_t n = 0, i = 0;
    if (len == 0 || len >= sizeof(name))
        return 0;
    if (in[0] == '[') {
        while (i < len && in[i] != ']')
            name[n++] = in[i++];
        if (i == len)
            return 0;
        name[n++] = in[i++];
    } else {
        while (i < len && in[i] != ':')
            name[n++] = (char)tolower((unsigned char)in[i++]);
        while (n > 0 && name[n - 1] == '.')
            n--;
    }
    name[n] = '\0';
    if (n == 0)
        return 0;
    const char *port = "80";
    char digits[8];
    if (i < len) {
        if (in[i] != ':' || len - i - 1 == 0 || len - i - 1 > 5)
            return 0;
        size_t d = 0;
        for (i++; i < len; i++) {
            if (!isdigit((unsigned char)in[i]))
                return 0;
            digits[d++] = in[i];
        }
        digits[d] = '\0';
        port = digits;
    }
    for (size_t k = 0; k < n; k++)
        if (name[k] <= ' ' || name[k] == '/' || name[k] == '@')
            return 0;
    snprintf(out, size, "%s:%d", name, atoi(port));
    return 1;
}

static int host_allowed(const ui_server *s, const char *host, size_t len)
{
    char norm[320], want[320];
    if (!normalise_host(host, len, norm, sizeof(norm)))
        return 0;
    const char *names[] = {"127.0.0.1", "localhost", "[::1]",
                           s->listen_host[0] ? s->listen_host : NULL};
    for (size_t i = 0; i < 4 && names[i] != NULL; i++) {
        snprintf(want, sizeof(want), "%s:%u", names[i], s->port);
        if (strcmp(norm, want) == 0)
            return 1;
    }
    return 0;
}

/* ---- 5. auth ------------------------------------------------------------- */

static int same_secret(const ui_server *s, const char *given)
{
    if (given == NULL)
        return 0;
    size_t len = strlen(given);
    unsigned char diff = len != s->token_len;
    for (size_t i = 0; i < s->token_len; i++)
        diff |= (unsigned char)(s->token[i] ^ (i < len ? given[i] : 0));
    return diff == 0;
}

/* The token of "Authorization: Bearer T", or NULL. */
static const char *bearer(struct MHD_Connection *conn)
{
    const char *a =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (a == NULL || strncasecmp(a, "Bearer ", 7) != 0)
        return NULL;
    a += 7;
    while (*a == ' ')
        a++;
    return a;
}

/* ---- the session: the page's token for the cookie ------------------------ */

static int session(ui_request *r, json_t *body)
{
    json_t *t = json_object_get(body, "token");
    if (!json_is_string(t) || !same_secret(r->srv, json_string_value(t)))
        return ui_send_error(r, 401, "unauthorized", "wrong token");
    json_t *doc = json_object();
    jset(doc, "ok", json_true());
    jset(doc, "read_only", json_boolean(r->srv->read_only));
    jset(doc, "requested_by", jstr(r->srv->requester));
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    struct MHD_Response *resp =
        text ? ui_response(text, strlen(text), "application/json", 1) : NULL;
    free(text);
    if (resp != NULL) {
        char cookie[400];
        snprintf(cookie, sizeof(cookie),
                 "%s=%s; HttpOnly; SameSite=Strict; Path=/",
                 r->srv->cookie_name, r->srv->token);
        MHD_add_response_header(resp, "Set-Cookie", cookie);
    }
    return ui_queue(r, 200, resp);
}

/* ---- the gate ------------------------------------------------------------ */

static int is_safe_method(const char *m)
{
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
}

/* Every rule on the headers alone (the first call, before any body is
 * read): *@p handled 0 to go on (r->route set, NULL for the session),
 * else the MHD result of the refusal (or asset) queued. */
static int gate(ui_request *r, int *handled)
{
    const ui_server *s = r->srv;
    struct MHD_Connection *conn = r->conn;
    *handled = 1;
    header_scan h = {0};
    MHD_get_connection_values_n(
        conn, MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND,
        scan_value, &h);
    if (h.host != 1)
        return ui_send_error(r, 400, "bad_host",
                             "exactly one Host header is required");
    const char *host =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (host == NULL || !host_allowed(s, host, strlen(host))) {
        char also[320] = "";
        if (s->listen_host[0])
            snprintf(also, sizeof(also), ", %s:%u", s->listen_host, s->port);
        return ui_send_error(r, 421, "bad_host",
                             "Host is not this server's address (use "
                             "127.0.0.1:%u, localhost:%u%s; another address "
                             "needs --listen ADDR:PORT on it)",
                             s->port, s->port, also);
    }
    if (h.content_length > 1 || (h.content_length && h.transfer_encoding))
        return ui_send_error(r, 400, "bad_request",
                             "repeated Content-Length, or Content-Length with "
                             "Transfer-Encoding");
    if (h.nul)
        return ui_send_error(r, 400, "bad_request",
                             "NUL in a header, cookie or argument");
    if (r->bad_path)
        return ui_send_error(r, 400, "bad_request",
                             "a NUL or another control character in the "
                             "path");
    if (MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "token"))
        return ui_send_error(r, 400, "token_in_url",
                             "the token is never taken from the URL (it "
                             "would end up in logs): use the page's "
                             "#token= fragment or Authorization: Bearer");
    const char *path = r->path;
    int api = strncmp(path, "/api/", 5) == 0 || strcmp(path, "/metrics") == 0;
    if (!api) {
        if (!is_safe_method(r->method))
            return ui_send_error(r, 405, "method_not_allowed",
                                 "only GET and HEAD here");
        const ui_asset *a = ui_asset_find(path);
        if (a == NULL)
            return ui_send_error(r, 404, "not_found", "no such page");
        return ui_asset_send(r, a);
    }
    int is_session = strcmp(path, "/api/v1/session") == 0;
    if (is_session && strcmp(r->method, "POST") != 0)
        return ui_send_error(r, 405, "method_not_allowed", "POST only");
    if (!is_session) {
        int method_ok = 1;
        r->route = ui_route_find(path, r->method, &method_ok);
        if (r->route == NULL && method_ok)
            return ui_send_error(r, 404, "not_found", "no such route");
        if (r->route == NULL)
            return ui_send_error(r, 405, "method_not_allowed",
                                 "this route does not take %s", r->method);
    }
    const char *tok = bearer(conn);
    if (!is_safe_method(r->method)) {
        const char *site = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                       "Sec-Fetch-Site");
        const char *origin =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
        int ok;
        if (site != NULL)
            ok = strcmp(site, "same-origin") == 0;
        else if (origin != NULL)
            ok = strncmp(origin, "http://", 7) == 0 &&
                 host_allowed(s, origin + 7, strlen(origin + 7));
        else
            ok = tok != NULL;
        if (!ok)
            return ui_send_error(r, 403, "cross_origin",
                                 "a state-changing request must come from "
                                 "this console's own page (Sec-Fetch-Site "
                                 "same-origin, or our Origin) or carry "
                                 "Authorization: Bearer");
        const char *type =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
        size_t tlen = type ? strcspn(type, "; ") : 0;
        if (type == NULL || tlen != 16 ||
            strncasecmp(type, "application/json", 16) != 0)
            return ui_send_error(r, 415, "unsupported_media_type",
                                 "the body must be Content-Type: "
                                 "application/json");
        const char *length = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                         "Content-Length");
        if (length != NULL && strtoull(length, NULL, 10) > UI_BODY_MAX)
            return ui_send_error(r, 413, "too_large",
                                 "the body is larger than 1 MiB");
    }
    if (!is_session) {
        /* without Sec-Fetch-Site and Origin (a script) only the bearer
         * token counts: a cookie alone could be a forged request */
        const char *cookie =
            MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, s->cookie_name);
        int cookie_ok =
            is_safe_method(r->method) ||
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                        "Sec-Fetch-Site") ||
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
        if (!(tok != NULL && same_secret(s, tok)) &&
            !(cookie_ok && same_secret(s, cookie)))
            return ui_send_error(r, 401, "unauthorized",
                                 "a token is needed: open the URL duro ui "
                                 "printed, or send Authorization: Bearer");
        if (ui_route_is_action(r->route) && s->read_only)
            return ui_send_error(r, 403, "read_only",
                                 "duro ui runs with --read-only: actions are "
                                 "refused");
    }
    *handled = 0;
    return MHD_YES;
}

/* The route, once the body (if any) is in and is a JSON object. */
static int dispatch(ui_request *r)
{
    json_t *body = NULL;
    if (!is_safe_method(r->method)) {
        if (r->too_large)
            return ui_send_error(r, 413, "too_large",
                                 "the body is larger than 1 MiB");
        json_error_t err;
        body = json_loadb(r->body ? r->body : "", r->body_len,
                          JSON_REJECT_DUPLICATES, &err);
        if (body == NULL || !json_is_object(body)) {
            json_decref(body);
            return ui_send_error(
                r, 400, "bad_json", "the body must be one JSON object%s%s",
                body == NULL ? ": " : "", body == NULL ? err.text : "");
        }
    }
    int rc =
        r->route == NULL ? session(r, body) : ui_route_run(r->route, r, body);
    json_decref(body);
    return rc;
}

static int hex_value(char ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

void *ui_uri_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    ui_request *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    /* the path, up to the arguments (a NUL there is caught decoded) */
    for (const char *p = uri; *p != '\0' && *p != '?'; p++) {
        int byte = (unsigned char)*p;
        if (*p == '%' && hex_value(p[1]) >= 0 && hex_value(p[2]) >= 0)
            byte = hex_value(p[1]) * 16 + hex_value(p[2]);
        if (byte < 0x20 || byte == 0x7f)
            r->bad_path = 1;
    }
    return r;
}

int ui_handle(void *cls, struct MHD_Connection *conn, const char *url,
              const char *method, const char *version, const char *upload,
              size_t *upload_size, void **state)
{
    (void)version;
    ui_request *r = *state;
    if (r == NULL || r->conn == NULL) {
        /* the first call: ui_uri_seen made the state, unless out of
         * memory */
        if (r == NULL)
            r = calloc(1, sizeof(*r));
        if (r == NULL)
            return MHD_NO;
        *state = r;
        r->conn = conn;
        r->srv = cls;
        r->method = method;
        r->path = url;
        int handled = 0;
        int rc = gate(r, &handled);
        if (handled || !is_safe_method(method))
            return rc; /* refused, an asset, or wait for the body */
        return dispatch(r);
    }
    if (r->done) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->too_large || r->body_len + n > UI_BODY_MAX) {
            r->too_large = 1;
            return MHD_YES;
        }
        if (r->body_len + n > r->body_cap) {
            size_t cap = r->body_cap ? r->body_cap : 4096;
            while (cap < r->body_len + n)
                cap *= 2;
            char *more = realloc(r->body, cap);
            if (more == NULL)
                return MHD_NO;
            r->body = more;
            r->body_cap = cap;
        }
        memcpy(r->body + r->body_len, upload, n);
        r->body_len += n;
        return MHD_YES;
    }
    return dispatch(r);
}

void ui_completed(void *cls, struct MHD_Connection *conn, void **state, int why)
{
    (void)cls;
    (void)conn;
    (void)why;
    ui_request *r = *state;
    if (r != NULL) {
        free(r->body);
        free(r);
        *state = NULL;
    }
}
