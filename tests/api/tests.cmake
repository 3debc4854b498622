# The public API as a whole: every DURO_API function called with each
# pointer argument NULL (the list of functions is generated from the headers
# at build time, so a new function fails the test until it is covered).
set(DURO_API_HEADERS
  ${PROJECT_SOURCE_DIR}/include/duro.h
  ${PROJECT_SOURCE_DIR}/include/duro/common.h
  ${PROJECT_SOURCE_DIR}/include/duro/provider.h)
string(REPLACE ";" "|" DURO_API_HEADER_ARG "${DURO_API_HEADERS}")
add_custom_command(
  OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/api/api_functions.h
  COMMAND ${CMAKE_COMMAND} -DOUT=${CMAKE_CURRENT_BINARY_DIR}/api/api_functions.h
          -DHEADERS=${DURO_API_HEADER_ARG}
          -P ${CMAKE_CURRENT_LIST_DIR}/api_functions.cmake
  DEPENDS ${DURO_API_HEADERS} ${CMAKE_CURRENT_LIST_DIR}/api_functions.cmake
  COMMENT "Listing the DURO_API functions of the public headers"
  VERBATIM)

duro_add_test(test_api_nulls LABELS api tsan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_api_nulls.c
          ${CMAKE_CURRENT_BINARY_DIR}/api/api_functions.h)
target_link_libraries(test_api_nulls PRIVATE duro_rt_util)
target_include_directories(test_api_nulls PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/api)

# The public headers compile as C++ (11, 17 and 20) with -Wall -Wextra
# -Wpedantic -Werror, macros included, whatever DURO_WERROR says: the
# compiler runs when the test runs.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  foreach(std 11 17 20)
    add_test(NAME cxx_headers_${std}
      COMMAND ${CMAKE_CXX_COMPILER} -std=c++${std} -Wall -Wextra -Wpedantic
              -Wshadow -Werror -fsyntax-only -I${PROJECT_SOURCE_DIR}/include
              ${CMAKE_CURRENT_LIST_DIR}/cxx_headers.cpp)
    set_tests_properties(cxx_headers_${std} PROPERTIES LABELS "api;unit")
  endforeach()
else()
  message(WARNING "no C++ compiler found: the C++ header check is skipped")
endif()

# The version macros of duro.h say project(VERSION) of CMakeLists.txt.
add_test(NAME version_header
  COMMAND ${CMAKE_COMMAND} -DHEADER=${PROJECT_SOURCE_DIR}/include/duro.h
          -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_CURRENT_LIST_DIR}/check_version.cmake)
set_tests_properties(version_header PROPERTIES LABELS "api;unit")
