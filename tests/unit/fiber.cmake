# fiber unit tests
duro_add_test(test_fiber LABELS unit tsan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fiber.c)
