# `cmake --install build --prefix P`: headers, libraries, attn-gen, attn-tune, attn-cache, the
# Halide they were built with and the CMake package (find_package(attnforge) ->
# attnforge::attnforge, attnforge::generator, attnforge::attn-gen, attn_add_kernel()). Headers keep the tree's layout under include/attnforge, so the same
# #include "runtime/jit.hpp" works in the tree and installed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(attn_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/attnforge)

install(DIRECTORY dsl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnforge FILES_MATCHING PATTERN "*.hpp")
install(FILES runtime/jit.hpp runtime/gradients.hpp runtime/named_call.hpp runtime/kernel.hpp runtime/tensor.hpp runtime/half_floats.hpp runtime/limits.hpp runtime/errors.hpp
              runtime/aot_compile.hpp runtime/disk_cache.hpp runtime/kernel_buffer.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnforge/runtime)
install(FILES generators/aot/registry.hpp generators/aot/named_variants.hpp generators/aot/call_context.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnforge/generators/aot)

# The Halide attnforge was built with goes into the prefix too (its package, libraries, tools and
# headers, in its own layout): attn-gen, attn-tune and attn-cache load libHalide at run time and a
# consumer's JIT links it, so the prefix is one folder that can move, with nothing found outside.
cmake_path(GET Halide_DIR PARENT_PATH halide_cmake_dir)             # <root>/<lib>/cmake
cmake_path(GET halide_cmake_dir PARENT_PATH halide_lib_dir)         # <root>/<lib>
cmake_path(GET halide_lib_dir PARENT_PATH halide_root)
cmake_path(GET halide_lib_dir FILENAME halide_lib_name)
set(attn_halide_dir ${CMAKE_INSTALL_LIBDIR}/attnforge/halide)
set(attn_halide_config_dir ${attn_halide_dir}/${halide_lib_name}/cmake/Halide)  # attnforgeConfig.cmake finds it there
install(DIRECTORY ${halide_root}/include ${halide_root}/bin ${halide_root}/share ${halide_lib_dir}
        DESTINATION ${attn_halide_dir} USE_SOURCE_PERMISSIONS
        PATTERN "Halide_Python" EXCLUDE PATTERN "libHalidePyStubs.a" EXCLUDE PATTERN "__pycache__" EXCLUDE)
# The programs find it relative to themselves.
set_target_properties(attn-gen attn-tune attn-cache PROPERTIES INSTALL_RPATH "$ORIGIN/../${attn_halide_dir}/${halide_lib_name}")

# attn_warnings only ever links privately (no effect on users) but must be exported with them.
install(TARGETS attn_dsl attn_warnings attn_generators attnforge attn_named_variants attnforge_generator attn_tuner attnforge_tuner
                attn-gen attn-tune attn-cache
        EXPORT attnforgeTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT attnforgeTargets NAMESPACE attnforge:: DESTINATION ${attn_cmake_dir})
configure_package_config_file(cmake/attnforgeConfig.cmake.in ${PROJECT_BINARY_DIR}/attnforgeConfig.cmake
                              INSTALL_DESTINATION ${attn_cmake_dir} PATH_VARS attn_halide_config_dir)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnforgeConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnforgeConfig.cmake ${PROJECT_BINARY_DIR}/attnforgeConfigVersion.cmake
              cmake/attn_add_kernel.cmake
        DESTINATION ${attn_cmake_dir})
