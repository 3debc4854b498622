list(APPEND DURO_SOURCES
  src/core/engine.c
  src/core/fiber.c
  src/core/result.c
  src/core/tracker.c
  src/core/turn.c)
