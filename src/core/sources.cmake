list(APPEND DURO_SOURCES
  src/core/engine.c
  src/core/fiber.c
  src/core/orch_api.c
  src/core/replay.c
  src/core/result.c
  src/core/retry.c
  src/core/schedule_plan.c
  src/core/schedule_spec.c
  src/core/tracker.c
  src/core/turn.c)
