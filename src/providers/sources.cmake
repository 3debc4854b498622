list(APPEND DURO_SOURCES
  src/providers/bulk.c
  src/providers/provider.c
  src/providers/query.c)
