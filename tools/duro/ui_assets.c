/* ui_assets.c - the page and its files, from the table embed.c generated
 * (compiled into the binary; nothing is read at run time). Served with
 * their MIME type (module scripts need a JavaScript type under nosniff),
 * an ETag (the content's hash) and Cache-Control: no-cache, so a browser
 * revalidates and a new build is picked up at once. */
#include <microhttpd.h>
#include <string.h>

#include "ui.h"

const ui_asset *ui_asset_find(const char *path)
{
    if (strcmp(path, "/") == 0)
        path = "/index.html";
    else if (strncmp(path, "/static/", 8) == 0)
        path += 7;
    else
        return NULL;
    for (const ui_asset *a = ui_assets; a->path != NULL; a++)
        if (strcmp(a->path, path) == 0)
            return a;
    return NULL;
}

int ui_asset_send(ui_request *r, const ui_asset *a)
{
    const char *match =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "If-None-Match");
    int fresh = match != NULL && strcmp(match, a->etag) == 0;
    struct MHD_Response *resp = ui_response(fresh ? "" : (const char *)a->data,
                                            fresh ? 0 : a->len, a->mime, 0);
    if (resp != NULL) {
        MHD_add_response_header(resp, "ETag", a->etag);
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    }
    return ui_queue(r, fresh ? 304 : 200, resp);
}
