# duro ui (the web console), when duro is built with libmicrohttpd: the
# gate's safety rules over raw TCP (test_ui) and a grep that the page
# never builds HTML from strings.
add_test(NAME ui_no_html_sinks
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/no_html_sinks.sh
          ${PROJECT_SOURCE_DIR}/tools/duro/web)
set_tests_properties(ui_no_html_sinks PROPERTIES LABELS "ui;cli")
if(DURO_HAVE_UI)
  pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
  add_executable(test_ui ${CMAKE_CURRENT_LIST_DIR}/test_ui.c)
  target_link_libraries(test_ui PRIVATE duro_static PkgConfig::JANSSON)
  target_compile_definitions(test_ui PRIVATE _GNU_SOURCE)
  target_compile_options(test_ui PRIVATE ${DURO_WARNINGS})
  add_test(NAME test_ui COMMAND test_ui $<TARGET_FILE:duro_cli>)
  set_tests_properties(test_ui PROPERTIES LABELS "ui;cli" TIMEOUT 120)
endif()
# The page in a real browser (tests/browser/run.sh): skipped, and says so,
# without /usr/bin/chromium, node or tests/browser/node_modules.
if(DURO_HAVE_UI)
  add_test(NAME ui_browser
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/browser/run.sh
            $<TARGET_FILE:duro_cli> $<TARGET_FILE:cli_fixture>
            ${CMAKE_CURRENT_BINARY_DIR}/browser-screenshots)
  set_tests_properties(ui_browser PROPERTIES LABELS "ui;cli" TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()
