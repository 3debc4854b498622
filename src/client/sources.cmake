list(APPEND DURO_SOURCES
  src/client/client.c)
