list(APPEND DURO_SOURCES
  src/providers/bulk.c
  src/providers/provider.c)
