# The duro command, run for real against SQLite files that cli_fixture
# (a program on libduro with a real runtime) puts into known states.
add_executable(cli_fixture ${CMAKE_CURRENT_LIST_DIR}/cli_fixture.c)
target_link_libraries(cli_fixture PRIVATE duro_static)
target_compile_definitions(cli_fixture PRIVATE _GNU_SOURCE)
target_compile_options(cli_fixture PRIVATE ${DURO_WARNINGS})
add_test(NAME test_cli
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_cli.sh
          $<TARGET_FILE:duro_cli> $<TARGET_FILE:cli_fixture>
          ${PROJECT_SOURCE_DIR}/tools/duro)
set_tests_properties(test_cli PROPERTIES LABELS cli TIMEOUT 300)
# The bash completion typed into an interactive bash on a pseudo-terminal
# (skipped, exit 77, without bash or python3).
add_test(NAME test_cli_completion
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_completion.sh
          ${PROJECT_SOURCE_DIR}/tools/duro)
set_tests_properties(test_cli_completion PROPERTIES LABELS cli TIMEOUT 120
                     SKIP_RETURN_CODE 77)
