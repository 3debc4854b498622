list(APPEND DURO_SOURCES
  src/core/fiber.c)
