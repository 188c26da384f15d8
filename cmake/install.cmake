# `cmake --install build --prefix P`: headers, libraries, attn-gen and the CMake package
# (find_package(attnforge) -> attnforge::attnforge, attnforge::generator, attnforge::attn-gen,
# attn_add_kernel()). Headers keep the tree's layout under include/attnforge, so the same
# #include "runtime/jit.hpp" works in the tree and installed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(attn_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/attnforge)

install(DIRECTORY dsl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnforge FILES_MATCHING PATTERN "*.hpp")
install(FILES runtime/jit.hpp runtime/gradients.hpp runtime/named_call.hpp runtime/kernel.hpp runtime/tensor.hpp runtime/limits.hpp runtime/errors.hpp
              runtime/aot_compile.hpp runtime/disk_cache.hpp runtime/kernel_buffer.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnforge/runtime)
install(FILES generators/aot/registry.hpp generators/aot/named_variants.hpp generators/aot/call_context.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnforge/generators/aot)

# attn_warnings only ever links privately (no effect on users) but must be exported with them.
install(TARGETS attn_dsl attn_warnings attn_generators attnforge attnforge_generator attn-gen attn-cache EXPORT attnforgeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT attnforgeTargets NAMESPACE attnforge:: DESTINATION ${attn_cmake_dir})
configure_package_config_file(cmake/attnforgeConfig.cmake.in ${PROJECT_BINARY_DIR}/attnforgeConfig.cmake
                              INSTALL_DESTINATION ${attn_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnforgeConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnforgeConfig.cmake ${PROJECT_BINARY_DIR}/attnforgeConfigVersion.cmake
              cmake/attn_add_kernel.cmake
        DESTINATION ${attn_cmake_dir})
