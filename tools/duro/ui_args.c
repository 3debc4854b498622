/* ui_args.c - what the routes of duro ui's JSON API share (ui_api.c,
 * ui_schedules.c): refs (base64url of an id's bytes, so that any id
 * travels in a URL or a JSON string), query arguments and body fields read
 * with their 400s, a failed duro call as its HTTP status, and the log
 * line of an action. Below the routes; calls only ui_reply.c. Runs on
 * MHD's pool threads; keeps no state. */
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "ui.h"

/* ---- refs ---------------------------------------------------------------- */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *ui_ref_encode(const char *bytes, size_t len)
{
    const unsigned char *s = (const unsigned char *)bytes;
    char *out = malloc(len / 3 * 4 + 5);
    if (out == NULL)
        abort();
    size_t o = 0, i = 0;
    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
    }
    out[o] = '\0';
    return out;
}

/* The id of a ref (caller frees), or NULL when it is not base64url of a
 * non-empty id without NUL. */
char *ui_ref_decode(const char *ref)
{
    size_t len = ref != NULL ? strlen(ref) : 0;
    if (len == 0 || len % 4 == 1 || len > 4096)
        return NULL;
    char *out = malloc(len / 4 * 3 + 3);
    if (out == NULL)
        abort();
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        const char *p = strchr(b64, ref[i]);
        if (ref[i] == '\0' || p == NULL) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)(p - b64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xFF);
        }
    }
    out[o] = '\0';
    if (strlen(out) != o || o == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* ---- arguments ----------------------------------------------------------- */

const char *ui_arg(ui_request *r, const char *key)
{
    const char *v =
        MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
    return v != NULL && *v != '\0' ? v : NULL;
}

/* An unsigned integer argument; -1 after queueing a 400 in *rc. */
int ui_arg_uint(ui_request *r, const char *key, uint64_t dflt, uint64_t max,
                uint64_t *out, int *rc)
{
    const char *v = ui_arg(r, key);
    *out = dflt;
    if (v == NULL)
        return 0;
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end != '\0' || n > max) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "%s: expected an integer from 0 to %llu", key,
                            (unsigned long long)max);
        return -1;
    }
    *out = n;
    return 0;
}

/* The id of ?ref= (or body "ref"); NULL after queueing the error. */
char *ui_need_ref(ui_request *r, const char *ref, const char *what, int *rc)
{
    if (ref == NULL) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "ref is required (base64url of the id)");
        return NULL;
    }
    char *id = ui_ref_decode(ref);
    if (id == NULL)
        *rc = ui_send_error(r, 400, "bad_argument",
                            "ref is not base64url of %s id", what);
    return id;
}

/* The error of a failed duro call: 404 not found; 409 invalid state, a
 * lost compare-and-set (conflict) or an id taken (already exists); 400
 * invalid or too large; 501 unsupported; else 500. The code as the CLI's
 * (duro_errname, lowercase). */
int ui_send_rc(ui_request *r, int rc, const char *what)
{
    const char *detail = duro_errmsg();
    if (detail == NULL || *detail == '\0')
        detail = duro_strerror(rc);
    char code[64];
    const char *name = duro_errname(rc);
    if (strncmp(name, "DURO_", 5) == 0)
        name += 5;
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof(code); i++)
        code[i] =
            (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    code[i] = '\0';
    unsigned status = rc == DURO_NOT_FOUND        ? 404
                      : rc == DURO_INVALID_STATE  ? 409
                      : rc == DURO_CONFLICT       ? 409
                      : rc == DURO_ALREADY_EXISTS ? 409
                      : rc == DURO_INVALID        ? 400
                      : rc == DURO_TOO_LARGE      ? 400
                      : rc == DURO_UNSUPPORTED    ? 501
                                                  : 500;
    return ui_send_error(r, status, code, "%s: %s", what, detail);
}

typedef struct unknown_arg {
    const char *const *known;
    const char *key;
} unknown_arg;

static enum MHD_Result find_unknown_arg(void *cls, enum MHD_ValueKind kind,
                                        const char *key, const char *value)
{
    unknown_arg *u = cls;
    (void)kind;
    (void)value;
    for (size_t i = 0; u->known[i] != NULL; i++)
        if (strcmp(u->known[i], key) == 0)
            return MHD_YES;
    u->key = key;
    return MHD_NO;
}

/* 0 when every argument is in @p known (NULL-ended); else queues 400
 * naming the first other one (a misspelt filter, "nmae=", must not list
 * everything) and returns -1. */
int ui_known_args(ui_request *r, const char *const *known, int *rc)
{
    unknown_arg unknown = {known, NULL};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, find_unknown_arg,
                              &unknown);
    if (unknown.key == NULL)
        return 0;
    char shown[TEXT_QUOTE_SIZE];
    *rc = ui_send_error(r, 400, "bad_argument", "unknown parameter '%s'",
                        text_quote(unknown.key, shown, sizeof(shown)));
    return -1;
}

/* The text of @p key in @p obj (a body or its filter, @p where: "" or
 * "filter."): *@p out is NULL when the key is absent (no filter on it, or
 * the default), else a non-empty string without NUL. Any other value
 * (a number, an array, null, "") queues 400 naming the key and returns -1:
 * a filter mistake must never widen a bulk action to every instance. */
int ui_body_text(ui_request *r, json_t *obj, const char *where, const char *key,
                 const char **out, int *rc)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (v == NULL)
        return 0;
    if (!json_is_string(v)) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "%s%s must be a string (leave it out for "
                            "none)",
                            where, key);
        return -1;
    }
    if (json_string_length(v) == 0) {
        *rc =
            ui_send_error(r, 400, "bad_argument",
                          "%s%s is empty (leave it out for none)", where, key);
        return -1;
    }
    if (strlen(json_string_value(v)) != json_string_length(v)) {
        *rc = ui_send_error(r, 400, "bad_argument", "%s%s holds a NUL", where,
                            key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

void ui_log_action(ui_request *r, const char *what, const char *id,
                   const char *outcome)
{
    char shown[256];
    fprintf(stderr, "duro ui: %s %s by %s: %s\n", what,
            text_short(id, 80, shown, sizeof(shown)), r->who->requester,
            outcome);
}

/* 0 when every key of @p obj is in @p known (NULL-ended); else queues 400
 * naming the first other one (in @p where: "body", "filter") and returns
 * -1. A misspelt filter key ("nmae") must not widen a bulk action to
 * every instance. */
int ui_known_keys(ui_request *r, json_t *obj, const char *where,
                  const char *const *known, int *rc)
{
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value)
    {
        size_t i = 0;
        while (known[i] != NULL && strcmp(known[i], key) != 0)
            i++;
        if (known[i] == NULL) {
            char shown[TEXT_QUOTE_SIZE];
            *rc = ui_send_error(r, 400, "bad_argument",
                                "unknown key '%s' in the %s",
                                text_quote(key, shown, sizeof(shown)), where);
            return -1;
        }
    }
    return 0;
}
