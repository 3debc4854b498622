# check_version.cmake - run with `cmake -DHEADER=<duro.h> -DVERSION=<x.y.z>
# -P`: fails unless DURO_VERSION_MAJOR, _MINOR, _PATCH and _STRING in HEADER
# say VERSION, the project(VERSION) of CMakeLists.txt (the one source of
# truth: the pkg-config file, the CMake package and the soname follow it).
file(READ "${HEADER}" text)
set(found "")
foreach(part MAJOR MINOR PATCH)
  if(NOT text MATCHES "\n#define DURO_VERSION_${part} ([0-9]+)\n")
    message(FATAL_ERROR "${HEADER}: no '#define DURO_VERSION_${part} <n>'")
  endif()
  list(APPEND found "${CMAKE_MATCH_1}")
endforeach()
list(JOIN found "." numbers)
if(NOT text MATCHES "\n#define DURO_VERSION_STRING \"([^\"]*)\"\n")
  message(FATAL_ERROR "${HEADER}: no '#define DURO_VERSION_STRING \"...\"'")
endif()
set(string "${CMAKE_MATCH_1}")
if(NOT numbers STREQUAL VERSION OR NOT string STREQUAL VERSION)
  message(FATAL_ERROR
    "the version in ${HEADER} (MAJOR.MINOR.PATCH ${numbers}, STRING "
    "\"${string}\") differs from project(VERSION ${VERSION}) in "
    "CMakeLists.txt: change both when the version changes")
endif()
message(STATUS "duro.h and CMakeLists.txt both say ${VERSION}")
