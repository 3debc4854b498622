# End-to-end runtime tests: real runtime, real SQLite files.
add_library(duro_rt_util STATIC ${CMAKE_CURRENT_LIST_DIR}/rt_util.c)
target_link_libraries(duro_rt_util PUBLIC duro_test_harness)
target_include_directories(duro_rt_util PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_compile_options(duro_rt_util PRIVATE ${DURO_WARNINGS})
target_compile_definitions(duro_rt_util PRIVATE _GNU_SOURCE)

function(duro_runtime_test name)
  duro_add_test(${name} LABELS runtime tsan SOURCES ${ARGN})
  target_link_libraries(${name} PRIVATE duro_rt_util)
endfunction()

duro_runtime_test(test_smoke ${CMAKE_CURRENT_LIST_DIR}/test_smoke.c)
duro_runtime_test(test_cancel ${CMAKE_CURRENT_LIST_DIR}/test_cancel.c)

duro_runtime_test(test_cancel_faults ${CMAKE_CURRENT_LIST_DIR}/test_cancel_faults.c
                  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_cancel_faults PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
