/* client_internal.h - what the client's other files (schedule.c) use of
 * client.c's handle. Any thread. */
#ifndef DURO_CLIENT_INTERNAL_H
#define DURO_CLIENT_INTERNAL_H

#include "duro.h"

/* The client's provider. */
duro_provider *duro__client_provider(duro_client *c);
/* The checks every client call starts with: a client, not from
 * orchestration code (DURO_MISUSE, set in duro_errmsg()). */
int duro__client_enter(duro_client *c);

#endif
