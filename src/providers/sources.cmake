list(APPEND DURO_SOURCES
  src/providers/provider.c)
