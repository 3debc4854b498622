/* ui_safety.c - the gate of duro ui: every request passes here, and every
 * safety rule is enforced here once, before routing (the front door,
 * ui_door.c, has already refused what breaks HTTP/1.1's grammar or sizes):
 *   1. header sanity: one Host, one Content-Length, no NUL in a decoded
 *      header, cookie or argument, no control character in the path, raw
 *      or %-encoded (400); MHD 0.9.75 lets all of these through;
 *   2. the Host allow-list (DNS rebinding): 127.0.0.1:PORT, localhost:PORT,
 *      [::1]:PORT and the explicit --listen host, case and trailing dot
 *      normalised (421), on every method and path;
 *   3. no token in the URL (?token=: 400);
 *   4. CSRF, for every method but GET and HEAD: Sec-Fetch-Site
 *      same-origin, or (absent) Origin equal to ours, or (both absent) a
 *      credential header (403); Content-Type application/json (415); a
 *      body of at most 1 MiB (413) holding a JSON object (400);
 *   5. sign-in for /api and /metrics: X-Duro-Session (a session of POST
 *      /api/v1/session) or Authorization: Bearer (a token, with the
 *      failure backoff of ui_auth.c) (401, 429); never a cookie, so
 *      nothing is sent by the browser on its own; the page and its assets
 *      need none;
 *   6. routing, before sign-in and the body: unknown route 404, wrong
 *      method 405; then (after sign-in) --read-only refuses every action
 *      (403).
 * Every response carries the CSP and the other headers (ui_reply.c's
 * ui_response, and the door's ui_raw_error), and Connection: close: every
 * request comes through the door, whose deadline and limits then hold for each.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ui.h"

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

/* The Host names answered, each once: 127.0.0.1, localhost, [::1] and
 * the explicit --listen host when it is none of them; how many. */
static size_t host_names(const ui_server *s, const char *names[4])
{
    size_t n = 0;
    names[n++] = "127.0.0.1";
    names[n++] = "localhost";
    names[n++] = "[::1]";
    if (s->listen_host[0] && strcmp(s->listen_host, "127.0.0.1") != 0 &&
        strcmp(s->listen_host, "localhost") != 0 &&
        strcmp(s->listen_host, "[::1]") != 0)
        names[n++] = s->listen_host;
    return n;
}

static int host_allowed(const ui_server *s, const char *host, size_t len)
{
    char norm[320], want[320];
    if (!normalise_host(host, len, norm, sizeof(norm)))
        return 0;
    const char *names[4];
    size_t n = host_names(s, names);
    for (size_t i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "%s:%u", names[i], s->port);
        if (strcmp(norm, want) == 0)
            return 1;
    }
    return 0;
}

/* ---- 5. sign-in ---------------------------------------------------------- */

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

/* Sets r->who from the request's credential as the route needs it: 0, or
 * -1 with the refusal queued (its MHD result in *@p rc). */
static int sign_in(ui_request *r, int needs, const char *token,
                   const char *session, int *rc)
{
    if (needs == UI_NEEDS_NOTHING)
        return 0;
    if (needs == UI_NEEDS_BEARER && token == NULL) {
        *rc = ui_send_error(r, 403, "bearer_required",
                            "this route takes Authorization: Bearer only (a "
                            "session cannot make login codes: they would "
                            "outlive it)");
        return -1;
    }
    if (session != NULL && needs != UI_NEEDS_BEARER) {
        r->who = ui_auth_session(r->srv->auth, session);
        if (r->who != NULL)
            return 0;
        *rc = ui_send_error(r, 401, "unauthorized",
                            "the session has ended or expired: sign in "
                            "again");
        return -1;
    }
    if (token == NULL) {
        *rc = ui_send_error(r, 401, "unauthorized",
                            "sign in: open the URL duro ui printed, or send "
                            "Authorization: Bearer");
        return -1;
    }
    if (ui_auth_bearer(r, token, &r->who, rc) != 0)
        return -1;
    r->by_bearer = 1;
    return 0;
}

/* ---- the gate ------------------------------------------------------------ */

static int is_safe_method(const char *m)
{
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
}

/* Every rule on the headers alone (the first call, before any body is
 * read): *@p handled 0 to go on (r->route and r->who set), else the MHD
 * result of the refusal (or asset) queued. */
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
        const char *names[4];
        size_t n = host_names(s, names);
        char list[1400];
        size_t used = 0;
        for (size_t i = 0; i < n && used < sizeof(list); i++)
            used +=
                (size_t)snprintf(list + used, sizeof(list) - used, "%s%s:%u",
                                 i ? ", " : "", names[i], s->port);
        return ui_send_error(r, 421, "bad_host",
                             "Host is not this server's address (use %s; "
                             "another address needs --listen ADDR:PORT on "
                             "it)",
                             list);
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
                             "would end up in logs and history): send "
                             "Authorization: Bearer, or sign in on the "
                             "page");
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
    int method_ok = 1;
    r->route = ui_route_find(path, r->method, &method_ok);
    if (r->route == NULL && method_ok)
        return ui_send_error(r, 404, "not_found", "no such route");
    if (r->route == NULL)
        return ui_send_error(r, 405, "method_not_allowed",
                             "this route does not take %s", r->method);
    const char *tok = bearer(conn);
    const char *session =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Duro-Session");
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
            ok = tok != NULL || session != NULL;
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
    int rc = MHD_YES;
    if (sign_in(r, ui_route_needs(r->route), tok, session, &rc) != 0)
        return rc;
    if (r->who != NULL)
        ui_door_trust(conn);
    if (ui_route_is_action(r->route) && s->read_only)
        return ui_send_error(r, 403, "read_only",
                             "duro ui runs with --read-only: actions are "
                             "refused");
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
    int rc = ui_route_run(r->route, r, body);
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

/* "127.0.0.1:54321" or "[::1]:54321" of the client, for the log. */
static void peer_of(struct MHD_Connection *conn, char *out, size_t size)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char addr[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    const struct sockaddr *sa = info != NULL ? info->client_addr : NULL;
    if (sa != NULL && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
        port = ntohs(in->sin_port);
        snprintf(out, size, "%s:%u", addr, port);
    } else if (sa != NULL && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
        port = ntohs(in6->sin6_port);
        snprintf(out, size, "[%s]:%u", addr, port);
    } else {
        snprintf(out, size, "?");
    }
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
        peer_of(conn, r->peer, sizeof(r->peer));
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
