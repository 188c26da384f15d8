# Runs a C++ compiler on one source file and checks the outcome (cmake -P script).
#   -DCXX=<compiler> -DSOURCE=<file.cpp> -DFLAGS=<flags, separated by '|'> -DMODE=FAIL|PASS|SKIP
#   [-DMAX_LINES=<n>] [-DMAX_LINE_LENGTH=<n>] [-DWHY=<text>]
# MODE=FAIL (the default): passes only if compilation FAILS, the compiler's output contains the text
#   of every `// expect: <text>` line of SOURCE (at least one such line is required), and the output
#   has at most MAX_LINES lines (a `// max-lines: <n>` line in SOURCE overrides MAX_LINES; no limit
#   if neither is given), and no line longer than MAX_LINE_LENGTH characters (`// max-line-length: <n>`
#   overrides it): a report must not spell a whole expression's type. Clang spells a shape error's message as a pack of chars ('m', 'a', 't', ...);
#   the expected text is also looked for in the output with the "', '" between such chars removed.
# MODE=PASS: passes only if compilation succeeds (a control, so the harness cannot pass trivially).
# MODE=SKIP: prints "SKIPPED: <WHY>" (the test's SKIP_REGULAR_EXPRESSION turns that into a skip).
cmake_minimum_required(VERSION 3.20)

if (MODE STREQUAL "SKIP")
  message("SKIPPED: ${WHY}")
  return()
endif ()
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
    message(FATAL_ERROR "${SOURCE} must compile with ${CXX}, but the compiler failed (${rc}):\n${out}")
  endif ()
  message(STATUS "${SOURCE} compiles with ${CXX}, as expected")
  return()
endif ()

file(STRINGS "${SOURCE}" expect_lines REGEX "^[ \t]*//[ \t]*expect:")
if (NOT expect_lines)
  message(FATAL_ERROR "${SOURCE} has no `// expect: <text>` line")
endif ()
if (rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled with ${CXX}, but it must fail to compile")
endif ()

# Lines of output: newlines, plus a last line without one.
string(REGEX REPLACE "[^\n]" "" newlines "${out}")
string(LENGTH "${newlines}" line_count)
if (NOT out STREQUAL "" AND NOT out MATCHES "\n$")
  math(EXPR line_count "${line_count} + 1")
endif ()

string(REPLACE "', '" "" out_joined "${out}")
foreach (line IN LISTS expect_lines)
  string(REGEX REPLACE "^[ \t]*//[ \t]*expect:[ \t]*" "" expected "${line}")
  string(STRIP "${expected}" expected)
  string(FIND "${out}" "${expected}" at)
  if (at EQUAL -1)
    string(FIND "${out_joined}" "${expected}" at)
  endif ()
  if (at EQUAL -1)
    message(FATAL_ERROR "${SOURCE} failed to compile with ${CXX}, but the output lacks the expected text\n"
                        "  expected: ${expected}\ncompiler output (${line_count} lines):\n${out}")
  endif ()
  message(STATUS "${SOURCE} fails to compile with ${CXX}: ${expected}")
endforeach ()

file(STRINGS "${SOURCE}" max_lines_line REGEX "^[ \t]*//[ \t]*max-lines:[ \t]*[0-9]+")
if (max_lines_line)
  string(REGEX REPLACE "^[ \t]*//[ \t]*max-lines:[ \t]*([0-9]+).*" "\\1" MAX_LINES "${max_lines_line}")
endif ()
if (DEFINED MAX_LINES AND NOT MAX_LINES STREQUAL "")
  if (line_count GREATER MAX_LINES)
    message(FATAL_ERROR "${SOURCE}: ${CXX} printed ${line_count} lines, more than the ${MAX_LINES} allowed\n"
                        "compiler output:\n${out}")
  endif ()
  message(STATUS "${SOURCE}: ${line_count} lines of compiler output (at most ${MAX_LINES})")
else ()
  message(STATUS "${SOURCE}: ${line_count} lines of compiler output (no limit)")
endif ()

file(STRINGS "${SOURCE}" max_length_line REGEX "^[ \t]*//[ \t]*max-line-length:[ \t]*[0-9]+")
if (max_length_line)
  string(REGEX REPLACE "^[ \t]*//[ \t]*max-line-length:[ \t]*([0-9]+).*" "\\1" MAX_LINE_LENGTH "${max_length_line}")
endif ()
if (DEFINED MAX_LINE_LENGTH AND NOT MAX_LINE_LENGTH STREQUAL "")
  # Clang's pack of chars counts as the text it spells (out_joined), and a path as its part inside
  # the repository (SOURCE is <repository>/tests/compile_fail/<case>.cpp): where the checkout lives
  # is not the report's length.
  cmake_path(GET SOURCE PARENT_PATH repository)
  cmake_path(GET repository PARENT_PATH repository)
  cmake_path(GET repository PARENT_PATH repository)
  string(REPLACE "${repository}/" "" joined_lines "${out_joined}")
  string(REPLACE ";" "," joined_lines "${joined_lines}")
  string(REPLACE "\n" ";" joined_lines "${joined_lines}")
  set(longest 0)
  foreach (line IN LISTS joined_lines)
    string(LENGTH "${line}" length)
    if (length GREATER longest)
      set(longest ${length})
    endif ()
  endforeach ()
  if (longest GREATER MAX_LINE_LENGTH)
    message(FATAL_ERROR "${SOURCE}: ${CXX} printed a line of ${longest} characters, more than the ${MAX_LINE_LENGTH} allowed\n"
                        "compiler output:\n${out}")
  endif ()
  message(STATUS "${SOURCE}: longest line ${longest} characters (at most ${MAX_LINE_LENGTH})")
endif ()
