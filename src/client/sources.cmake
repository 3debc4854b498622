list(APPEND DURO_SOURCES
  src/client/client.c
  src/client/client_metrics.c
  src/client/export.c
  src/client/schedule.c)
