duro_add_test(test_base LABELS unit tsan SOURCES unit/test_base.c)
