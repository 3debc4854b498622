duro_add_test(test_base LABELS unit tsan SOURCES unit/test_base.c)
include(${CMAKE_CURRENT_LIST_DIR}/fiber.cmake)
duro_add_test(test_engine LABELS unit tsan SOURCES unit/test_engine.c)
duro_add_test(test_engine_cache LABELS unit tsan SOURCES unit/test_engine_cache.c)
