list(APPEND DURO_SOURCES
  src/runtime/activity.c
  src/runtime/engine_cache.c
  src/runtime/manager.c
  src/runtime/metrics.c
  src/runtime/orchestrator.c
  src/runtime/registry.c
  src/runtime/replay_json.c
  src/runtime/replayer.c
  src/runtime/runtime.c
  src/runtime/schedule_firing.c
  src/runtime/services.c
  src/runtime/test_env.c
  src/runtime/worker.c)
