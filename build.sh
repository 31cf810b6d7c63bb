#!/usr/bin/env bash
# Builds needle-wasm.
#   ./build.sh          the wasm engine (dist/needle.wasm) and the demo archives
#   ./build.sh native   the same C natively with AddressSanitizer + UBSan, and the
#                       C unit tests both natively and as WASI modules (build/)
#   ./build.sh fuzz     the libFuzzer target for the archive loader (build/fuzz_archive)
#   ./build.sh all      everything above
#   ./build.sh deps     installs the Debian packages the build and tests need (root)
set -euo pipefail
cd "$(dirname "$0")"

export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"  # Debian's emcc optimiser needs Debian's acorn
ENGINE_SOURCES=$(ls src/*.c | grep -v '_simd128\.c$')
SIMD_SOURCES=$(ls src/*_simd128.c 2>/dev/null || true)
CFLAGS_COMMON="-std=c11 -Wall -Wextra -Wno-unused-parameter -Isrc"
# Every exported C function of the engine, listed once here.
EXPORTS=$(sed -n 's/^NEEDLE_API[^(]* \**\(needle_[a-z0-9_]*\)(.*/_\1/p' src/needle.h | paste -sd, -)
EXPORTS="$EXPORTS,_malloc,_free"

# Tells emcc that env.needle_now_ms (src/platform.h) is an import js/wasm.js provides.
host_imports() {
  mkdir -p build
  echo 'mergeInto(LibraryManager.library, { needle_now_ms: function () { return 0; } });' > build/host-imports.js
  echo build/host-imports.js
}

wasm() {
  mkdir -p dist
  # Standalone module, no Emscripten JS glue: js/wasm.js instantiates it with one import.
  emcc $CFLAGS_COMMON -O3 -msimd128 -DND_SIMD128 \
    --no-entry -sSTANDALONE_WASM -sALLOW_MEMORY_GROWTH -sINITIAL_MEMORY=4194304 \
    -sTOTAL_STACK=1048576 -sEXPORTED_FUNCTIONS="$EXPORTS" --js-library "$(host_imports)" \
    $ENGINE_SOURCES $SIMD_SOURCES -o dist/needle.wasm
  echo "built dist/needle.wasm ($(stat -c %s dist/needle.wasm) bytes)"
}

archives() {
  node js/cli.js make-demo dist/demo.cact
  node js/cli.js make-demo dist/tiny.cact --tiny
}

native() {
  mkdir -p build/native build/wasi
  local san="-g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
  for t in tests/c/test_*.c; do
    local name; name=$(basename "$t" .c)
    cc $CFLAGS_COMMON -Itests/c $san "$t" $ENGINE_SOURCES -lm -o "build/native/$name"
    # The same test as a WASI module with the SIMD kernels, run by tests/js/c-units.test.js.
    emcc $CFLAGS_COMMON -Itests/c -O2 -msimd128 -DND_SIMD128 -sSTANDALONE_WASM \
      -sALLOW_MEMORY_GROWTH -sTOTAL_STACK=1048576 --js-library "$(host_imports)" \
      "$t" $ENGINE_SOURCES $SIMD_SOURCES \
      -o "build/wasi/$name.wasm"
  done
  echo "built native and WASI unit tests in build/"
}

fuzz() {
  mkdir -p build
  clang $CFLAGS_COMMON -g -O1 -fsanitize=fuzzer,address,undefined \
    tests/fuzz/fuzz_archive.c $ENGINE_SOURCES -lm -o build/fuzz_archive
  echo "built build/fuzz_archive"
}

deps() {
  local need=()
  command -v emcc >/dev/null || need+=(emscripten)
  command -v spm_encode >/dev/null || need+=(sentencepiece)
  command -v clang >/dev/null || need+=(clang)
  compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null || need+=(libclang-rt-14-dev)
  command -v node >/dev/null || need+=(nodejs npm)
  [ -x /usr/bin/chromium ] || need+=(chromium)
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  echo "dependencies present"
}

case "${1:-wasm}" in
  wasm) wasm; archives ;;
  native) native ;;
  fuzz) fuzz ;;
  all) wasm; archives; native; fuzz ;;
  deps) deps ;;
  *) echo "usage: $0 [wasm|native|fuzz|all|deps]" >&2; exit 2 ;;
esac
