/* ui_none.c - `duro ui` in a duro built without libmicrohttpd: it says so
 * and fails as an unsupported feature does (exit 1, code "unsupported"). */
#include "cli.h"

int cmd_ui(cli *c, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error(c, EXIT_FAILED, "unsupported",
                     "this duro was built without libmicrohttpd, so it has "
                     "no web console (install libmicrohttpd-dev and "
                     "rebuild)");
}
