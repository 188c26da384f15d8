# Runs the C++ compiler on one source file and checks the outcome (cmake -P script).
#   -DCXX=<compiler> -DSOURCE=<file.cpp> -DFLAGS=<flags, separated by '|'> -DMODE=FAIL|PASS
# MODE=FAIL (the default): passes only if compilation FAILS and the compiler's output contains
#   the text of every `// expect: <text>` line of SOURCE (at least one such line is required).
# MODE=PASS: passes only if compilation succeeds (a control, so the harness cannot pass trivially).
cmake_minimum_required(VERSION 3.20)

foreach (var IN ITEMS CXX SOURCE)
  if (NOT DEFINED ${var})
    message(FATAL_ERROR "expect_failure.cmake: -D${var}=... is required")
  endif ()
endforeach ()
if (NOT DEFINED MODE)
  set(MODE FAIL)
endif ()

string(REPLACE "|" ";" flag_list "${FLAGS}")
execute_process(
  COMMAND ${CXX} ${flag_list} ${SOURCE}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)

if (MODE STREQUAL "PASS")
  if (NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} must compile, but the compiler failed (${rc}):\n${out}")
  endif ()
  message(STATUS "${SOURCE} compiles, as expected")
  return()
endif ()

file(STRINGS "${SOURCE}" expect_lines REGEX "^[ \t]*//[ \t]*expect:")
if (NOT expect_lines)
  message(FATAL_ERROR "${SOURCE} has no `// expect: <text>` line")
endif ()
if (rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must fail to compile")
endif ()
foreach (line IN LISTS expect_lines)
  string(REGEX REPLACE "^[ \t]*//[ \t]*expect:[ \t]*" "" expected "${line}")
  string(STRIP "${expected}" expected)
  string(FIND "${out}" "${expected}" at)
  if (at EQUAL -1)
    message(FATAL_ERROR "${SOURCE} failed to compile, but the output lacks the expected text\n"
                        "  expected: ${expected}\ncompiler output:\n${out}")
  endif ()
  message(STATUS "${SOURCE} fails to compile with: ${expected}")
endforeach ()
