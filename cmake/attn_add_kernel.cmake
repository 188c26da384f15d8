# attn_add_kernel(NAME <name> EXPRESSION <registered name>
#                 [SOURCES <files with ATTN_REGISTER_KERNEL>...] [TARGETS <halide target>...]
#                 [BIND <dim>=<size>...] [SCHEDULE <parameters>] [PATH automatic|fused|generic]
#                 [WITH_WEIGHTS] [WITH_LSE] [GRADIENTS] [TUNING_DB <file>])
# Builds kernel <EXPRESSION> ahead of time, at build time, into a static library target <NAME>
# whose header <NAME>.h declares `int <NAME>(halide_buffer_t*...)`: its entry point, which checks
# the tensors, over the pipeline <NAME>_pipeline that Halide's add_halide_library builds from the
# kernel's Halide generator (its function <NAME>_unchecked, Halide's runtime <NAME>_pipeline.runtime).
# With SOURCES, a generator is built from them (their ATTN_REGISTER_KERNEL expressions and the named variants); without,
# attn-gen builds one of attnforge's named variants. TARGETS default to host; several give one
# library that picks the first the CPU can run (most specific first, the last is the fallback).
# GRADIENTS builds the expression's backward pass instead (attn::jit_gradients): its function takes
# the tensors, then d_output, then output and lse as the forward saved them (one softmax), then
# writes d_<tensor> for each float tensor.
# TUNING_DB names the tuning database (attn-tune --db, attn_add_tuner) whose record for this kernel,
# its BIND sizes and each target sets the schedule; the kernel is rebuilt when the file changes, and
# its header names each target's schedule and the record it came from. Without it, the default
# schedule, whatever databases the machine has: the build depends on its inputs only.
# Linking <NAME> needs no Halide and no attnforge library: only libc, libm, libdl and threads
# (and the two libraries above, which it brings).
# The kernel's entry point (its checks, in C) is compiled by this project's compiler (C, else C++),
# so that a cross-compiling toolchain builds it for the machine it builds for.
find_package(Threads REQUIRED)

# Stops the configuration where the calling function, its arguments parsed into ARG_*, lacks one of
# the arguments named after `caller` or was given one it does not know.
function(attn_check_arguments caller)
  foreach (required IN LISTS ARGN)
    if (NOT ARG_${required})
      list(JOIN ARGN " and " names)
      message(FATAL_ERROR "${caller}: ${names} are required")
    endif ()
  endforeach ()
  if (ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${caller}(${ARG_NAME}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif ()
endfunction()

function(attn_add_kernel)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "WITH_WEIGHTS;WITH_LSE;GRADIENTS" "NAME;EXPRESSION;SCHEDULE;PATH;TUNING_DB" "SOURCES;TARGETS;BIND")
  attn_check_arguments(attn_add_kernel NAME EXPRESSION)
  if (ARG_SOURCES)
    set(generator ${ARG_NAME}.generator)
    add_executable(${generator} ${ARG_SOURCES})
    target_link_libraries(${generator} PRIVATE attnforge::generator)
  else ()
    set(generator attnforge::attn-gen)
  endif ()

  # The pipeline: Halide's add_halide_library over the generator (runtime/kernel_generator.hpp), its
  # options as GeneratorParams; the entry point and the header: attn-gen --entry-point-only, with the
  # same options, its checks compiled by this project's compiler.
  if (NOT ARG_TARGETS)
    set(ARG_TARGETS host)
  endif ()
  list(JOIN ARG_TARGETS "," targets)
  set(params ${ARG_BIND})
  set(args "${ARG_EXPRESSION}" --name ${ARG_NAME} --entry-point-only --target ${targets})
  foreach (b IN LISTS ARG_BIND)
    list(APPEND args --bind ${b})
  endforeach ()
  if (ARG_SCHEDULE)
    string(REGEX REPLACE "[ ,]+" ";" schedule_params "${ARG_SCHEDULE}")  # a GeneratorParam each
    list(APPEND params ${schedule_params})
    list(APPEND args --schedule "${ARG_SCHEDULE}")
  endif ()
  if (ARG_PATH)
    list(APPEND params path=${ARG_PATH})
    list(APPEND args --path ${ARG_PATH})
  endif ()
  foreach (flag IN ITEMS WITH_WEIGHTS WITH_LSE GRADIENTS)
    if (ARG_${flag})
      string(TOLOWER ${flag} param)
      string(REPLACE "_" "-" option ${param})
      list(APPEND params ${param}=true)
      list(APPEND args --${option})
    endif ()
  endforeach ()
  set(db_dependency)
  if (ARG_TUNING_DB)
    cmake_path(ABSOLUTE_PATH ARG_TUNING_DB BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE OUTPUT_VARIABLE db)
    list(APPEND params tuning_db=${db})
    list(APPEND args --tuning-db ${db})
    set(db_dependency ${db})
  endif ()
  if (CMAKE_C_COMPILER)
    list(APPEND args --cc "${CMAKE_C_COMPILER}")
  else ()
    list(APPEND args --cc "${CMAKE_CXX_COMPILER}")
  endif ()

  string(REGEX REPLACE "[^A-Za-z0-9_]+" "_" generator_name "${ARG_EXPRESSION}")  # registry.hpp: c_identifier
  add_halide_library(${ARG_NAME}_pipeline FROM ${generator} GENERATOR ${generator_name} FUNCTION_NAME ${ARG_NAME}_unchecked
                     TARGETS ${ARG_TARGETS} FEATURES user_context PARAMS ${params} DEPENDS ${db_dependency})

  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.kernel)
  add_custom_command(OUTPUT ${dir}/${ARG_NAME}_entry.a ${dir}/${ARG_NAME}.h
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
                     COMMAND ${generator} ${args} --output-dir ${dir}
                     DEPENDS ${generator} ${db_dependency}
                     COMMENT "attnforge: the entry point of kernel ${ARG_NAME} (${ARG_EXPRESSION})" VERBATIM)
  add_custom_target(${ARG_NAME}.generate DEPENDS ${dir}/${ARG_NAME}_entry.a ${dir}/${ARG_NAME}.h)

  add_library(${ARG_NAME} STATIC IMPORTED GLOBAL)
  file(MAKE_DIRECTORY ${dir})  # an imported target's include directory must exist when configuring
  set_target_properties(${ARG_NAME} PROPERTIES IMPORTED_LOCATION ${dir}/${ARG_NAME}_entry.a
                        INTERFACE_INCLUDE_DIRECTORIES ${dir}
                        INTERFACE_LINK_LIBRARIES "${ARG_NAME}_pipeline;Threads::Threads;${CMAKE_DL_LIBS};m")
  add_dependencies(${ARG_NAME} ${ARG_NAME}.generate)
endfunction()

# attn_add_tuner(NAME <name> SOURCES <files with ATTN_REGISTER_KERNEL>...)
# Builds a tuner program <name>: attn-tune for attnforge's named variants and the expressions the
# SOURCES register, so that a project tunes its own variants at its sizes and builds them with the
# records it wrote:
#   <name> my::causal_alibi --bind T=2048 --bind Dh=64 --db ${CMAKE_SOURCE_DIR}/tuning.json
#   attn_add_kernel(NAME my_kernel SOURCES ... EXPRESSION my::causal_alibi BIND T=2048 Dh=64 TUNING_DB tuning.json)
function(attn_add_tuner)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME" "SOURCES")
  attn_check_arguments(attn_add_tuner NAME SOURCES)
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE attnforge::tuner)
endfunction()
