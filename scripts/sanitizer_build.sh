# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: the one sanitizer build they share,
# build-asan/ (clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer's coverage), and the
# sanitizers' settings (tests/sanitizers/README.md says why each is there).
#   sanitizer_build <targets...>   configure build-asan/ if needed, then build those targets
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
venv="$root/.venv"
halide_dir=$("$venv/bin/python" -c 'import halide, os; print(os.path.join(halide.install_dir(), "lib64", "cmake", "Halide"))')
asan_build="$root/build-asan"
supp="$root/tests/sanitizers"

sanitizer_build() {
  "$venv/bin/cmake" -S "$root" -B "$asan_build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DBUILD_TESTING=ON -DATTN_SANITIZE=address,undefined -DATTN_FUZZ=ON \
    -DHalide_DIR="$halide_dir" -DHalideHelpers_DIR="${halide_dir%/Halide}/HalideHelpers" >/dev/null
  # The build runs attn-gen (sanitized) to make the AOT tests' kernels: leaks are checked in the tests.
  ASAN_OPTIONS=detect_leaks=0 "$venv/bin/cmake" --build "$asan_build" -j "${ATTN_JOBS:-2}" --target "$@"
}

# Halide compiles on a stack of its own (swapcontext), which ASan cannot follow: compile on ours.
export HL_COMPILER_STACK_SIZE=0
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
