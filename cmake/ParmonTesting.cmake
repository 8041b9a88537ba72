# parmon_add_unit_test(NAME SOURCES ... [LIBS ...]): a unit test that lives beside the code it
# tests (src/<dir>/foo_test.cc next to foo.cc), one gtest binary registered with ctest. Unit tests
# run no parmon executable; end-to-end tests stay under tests/ (parmon_add_test there).
include_guard(GLOBAL)
if(PARMON_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()

function(parmon_add_unit_test name)
  if(NOT PARMON_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PRIVATE GTest::gtest_main ${T_LIBS})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300 LABELS unit)
endfunction()
