#!/usr/bin/env bash
# Builds needle-wasm.
#   ./build.sh          the wasm engine variants (dist/needle.wasm, dist/needle-relaxed.wasm,
#                       dist/needle-nosimd.wasm) and the demo archives
#   ./build.sh native   the same C natively with AddressSanitizer + UBSan, and the
#                       C unit tests both natively and as WASI modules (build/)
#   ./build.sh fuzz     the libFuzzer targets (archive, tokenizer, grammar) in build/
#   ./build.sh all      everything above
#   ./build.sh deps     installs the Debian packages the build and tests need (root)
#   ./build.sh train    retrains the demo model into src/train/demo-model/ (not in all)
set -euo pipefail
cd "$(dirname "$0")"

export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"  # Debian's emcc optimiser needs Debian's acorn
# The engine's layers (docs/architecture.md): format, kernels, model, grammar, agent.
ENGINE_SOURCES=$(ls src/{format,kernels,model,grammar,agent}/*.c | grep -v '_simd128\.c$')
SIMD_SOURCES=$(ls src/kernels/*_simd128.c)
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

# Sources that run once per load or per prompt (parsing, tokenizing, the
# agent's bookkeeping, Needle 3's prompt rendering and call post-processor),
# the call grammar's shortest-completion bound (a budget check a call token
# consults once) and its grounded values, the sampler and Needle 3's
# confidence rule (a pass or two over the logits a token, beside a forward
# pass over every weight), Needle 3's layer glue (its MLP's rank-8
# conditioning; the Kronecker stages stay in kernels/), the scalar CQ,
# Hadamard, Kronecker and A8 references (the SIMD builds run their twins),
# and the glue a product or a mask passes once (the tiled dispatch, the
# thread pool, the grammar's mask cache): compiled for size (-Oz),
# which keeps the modules under their budgets (300 KB, Needle 3's 400 KB);
# everything else a token runs through is compiled for speed.
SIZE_SOURCES="src/agent/agent.c src/format/archive.c src/format/archive_v3.c src/kernels/bench.c src/kernels/cq.c src/kernels/cq_a8.c src/kernels/cq_q8.c src/grammar/grammar.c src/grammar/grammar_complete.c src/grammar/grammar_oneof.c src/grammar/grammar_schema.c src/grammar/grammar_v3_rules.c src/model/inspect.c src/format/json.c src/model/model.c src/model/weights.c src/grammar/regex.c src/model/sampler.c src/format/tokenizer.c src/agent/postprocess.c src/agent/pp_dates.c src/agent/pp_gates.c src/agent/pp_json.c src/agent/pp_place.c src/agent/pp_repair.c src/agent/pp_tail.c src/agent/pp_text.c src/agent/pp_validation.c src/agent/pp_verbs.c src/agent/pp_words.c src/agent/system_facts.c src/agent/toolset.c src/agent/call_prob.c src/agent/value_search.c src/grammar/grammar_ground.c src/grammar/grammar_value.c src/grammar/grammar_cache.c src/kernels/cq_tiled.c src/kernels/hadamard.c src/kernels/kron.c src/kernels/a8.c src/kernels/threads.c src/model/model_v3.c src/model/mlp3.c"

# One engine module: OUT, then the variant's flags (-m and -D flags compile,
# the others link) and extra sources. Standalone, no Emscripten JS glue:
# js/wasm.js instantiates it with its imports.
engine_module() {
  local out=$1; shift
  local objs="build/obj/$(basename "$out" .wasm)" cflags=() lflags=() sources=($ENGINE_SOURCES) src opt
  for arg in "$@"; do
    case $arg in *.c) sources+=("$arg") ;; -m*|-D*) cflags+=("$arg") ;; *) lflags+=("$arg") ;; esac
  done
  rm -rf "$objs" && mkdir -p "$objs" # no object of a removed source lingers
  for src in "${sources[@]}"; do
    opt=-O3; [[ " $SIZE_SOURCES " == *" $src "* ]] && opt=-Oz
    # In a SIMD Needle 3 module a scalar kernel with a SIMD twin is its
    # reference, and its glue (attention's per-vector quantisers, once a head)
    # ran as fast at -Oz (ab-bench.mjs); the Needle 2 modules have the room.
    [[ " ${cflags[*]} " == *" -msimd128 "* && " ${cflags[*]} " == *" -DND_NEEDLE3 "* && -f "${src%.c}_simd128.c" ]] && opt=-Oz
    emcc $CFLAGS_COMMON $opt "${cflags[@]}" -c "$src" -o "$objs/$(basename "$src" .c).o"
  done
  emcc -O3 "${cflags[@]}" "${lflags[@]}" \
    --no-entry -sSTANDALONE_WASM -sALLOW_MEMORY_GROWTH -sINITIAL_MEMORY=4194304 \
    -sTOTAL_STACK=1048576 -sEXPORTED_FUNCTIONS="$EXPORTS" --js-library "$(host_imports)" \
    "$objs"/*.o -o "$out"
  echo "built $out ($(stat -c %s "$out") bytes)"
}

# The variants js/wasm.js chooses from with WebAssembly.validate: SIMD128 (the
# baseline every current browser runs); relaxed SIMD (Chromium 114+), the
# baseline with i8x16.relaxed_swizzle, which skips the out-of-range fix-up the
# CQ table lookups never need; and a scalar fallback for hosts without
# SIMD128 (Safari before 16.4, old Chromium and Firefox).
wasm() {
  mkdir -p dist
  engine_module dist/needle.wasm -msimd128 -DND_SIMD128 $SIMD_SOURCES
  relaxed_module dist/needle.wasm dist/needle-relaxed.wasm
  engine_module dist/needle-nosimd.wasm
  threads_module dist/needle-threads.wasm
  # Needle 3 archives run in this variant only (js/model.js picks it by the
  # archive's tag): it keeps the Needle 2 modules within their budget.
  engine_module dist/needle3.wasm -msimd128 -DND_SIMD128 -DND_NEEDLE3 $SIMD_SOURCES
  threads_module dist/needle3-threads.wasm -DND_NEEDLE3
  local size f
  for f in dist/needle.wasm dist/needle-threads.wasm dist/needle3.wasm dist/needle3-threads.wasm; do
    local budget=300000; [[ $f == *needle3* ]] && budget=400000
    size=$(stat -c %s "$f")
    if [ "$size" -ge "$budget" ]; then echo "$f is $size bytes, over its budget of $budget" >&2; exit 1; fi
  done
}

# The SIMD128 build with wasm atomics over an imported shared memory, which
# js/thread-worker.js instantiates again in each worker (src/kernels/threads.h).
# emcc 3.1.6 refuses -pthread with STANDALONE_WASM, so the module is linked
# by hand: --shared-memory makes the data segments passive, initialised once
# by the start function behind an atomic flag, so a worker's instance leaves
# memory alone. Emscripten's libc is linked unchanged (its non-mt build,
# hence --no-check-features): only the engine's thread calls malloc or any
# other stateful libc function; workers run the kernels alone. The module
# declares a 2 GB maximum; js/wasm.js creates the memory with its own, lower,
# maximum.
threads_module() {
  local out=$1
  shift
  engine_module "$out" "$@" -msimd128 -DND_SIMD128 -matomics -mbulk-memory $SIMD_SOURCES \
    -sIMPORTED_MEMORY -sMAXIMUM_MEMORY=2147483648 -Wl,--shared-memory -Wl,--no-check-features
  node -e '
    const m = new WebAssembly.Module(require("fs").readFileSync(process.argv[1]));
    const memory = WebAssembly.Module.imports(m).find((i) => i.kind === "memory");
    const names = WebAssembly.Module.exports(m).map((e) => e.name);
    const missing = ["needle_thread_work", "needle_threads_start", "stackRestore", "stackSave"].filter((n) => !names.includes(n));
    if (!memory || missing.length) { console.error(`${process.argv[1]}: no imported memory or missing ${missing}`); process.exit(1); }
    new WebAssembly.Instance(m, { env: { memory: new WebAssembly.Memory({ initial: 64, maximum: 1024, shared: true }),
      needle_now_ms: () => 0, emscripten_notify_memory_growth() {} } });' "$out"
}

# A post-link rewrite, not -mrelaxed-simd: Debian's LLVM 14 encodes relaxed
# instructions with pre-standard opcodes (relaxed_swizzle 0xfd 0xa2 0x01) that
# no engine accepts. The result must validate where relaxed SIMD is on.
relaxed_module() {
  node src/tools/relax-swizzle.mjs "$1" "$2"
  node --experimental-wasm-relaxed-simd -e '
    if (!WebAssembly.validate(require("fs").readFileSync(process.argv[1]))) {
      console.error(`${process.argv[1]} does not validate with relaxed SIMD on`); process.exit(1); }' "$2"
}

# The demo model (trained by `./build.sh train`, committed) with its tools,
# and two random-weight fixtures for tests and the bench, never shipped: the
# released geometry and a tiny one.
archives() {
  cp src/train/demo-model/needle-demo.cact dist/demo.cact
  cp web/tools.json dist/demo-tools.json
  node js/cli.js make-random dist/released-random.cact
  node js/cli.js make-random dist/tiny.cact --tiny
}

# Retrains the demo model from its seed (not part of `all`: about 85 minutes for
# the data, the tokenizer and the base on two ranks, 20 for the heads, then 10
# to measure it) and writes src/train/demo-model/.
train() {
  local need=()
  /usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch)
  /usr/bin/python3 -c 'import numpy' 2>/dev/null || need+=(python3-numpy)
  /usr/bin/python3 -c 'import sentencepiece' 2>/dev/null || need+=(python3-sentencepiece)
  # Without OpenBLAS Debian's torch runs on the reference BLAS, 20-40x slower.
  compgen -G "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so*" >/dev/null || need+=(libopenblas0-pthread)
  command -v spm_train >/dev/null || need+=(sentencepiece)
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  # The committed model's recipe: 130,000 conversations (68-84 training
  # templates per tool, train-templates.json among them; 14% multi-call
  # commands, 6% small talk with no call), 60% of the free-text
  # values invented (so copying is the only way to get them right), half of
  # them going on with one or two later requests over the same tools (the
  # tools block, most of every prompt, then serves more targets), a 2,048-piece
  # tokenizer with every digit a piece of its own (2,048: each piece of a
  # held-out value seen more often, 60.2% exact calls of the base against
  # 56.5% with 4,096), 8,000 steps of 4,096 tokens
  # on one cosine schedule, computed by two data-parallel ranks of 2,048
  # tokens, one core and one torch thread each (6,116 tok/s beside other work,
  # 7,694 alone; one process on one core ran 4,892-5,157 with another run on
  # the other core; two torch threads in one process ran slower than one),
  # the last 30% with CQ and fast mode's int8 fake quantisation (the input of
  # every product rotated and held as int8 per group, the levels as
  # int8: src/kernels/cq_q8.h) at CQ4 for every
  # matrix (train.py's default map; the released map, CQ2 for all but the
  # embedding and the mHC Phi, made 50.2% exact calls of the base against
  # 56.5%); then the probe heads on the frozen base: the retrieval head first
  # (each right tool of a command against the wrong ones), then the
  # confidence head on 8,192 of the model's own calls (made after the
  # retrieval head, as the engine makes them) on commands whose free-text
  # values are all invented and 1,024 targets and corruptions, garbled values
  # among them, at lr 1e-3 for 1,500 steps, its bias then raised to where
  # min(head, decode probability) best ranks the held-back own calls.
  # src/train/README.md has the runs behind each choice.
  export OPENBLAS_NUM_THREADS=1
  local train="/usr/bin/python3 src/train/train.py --out build/train --seed 1 --batch-tokens 2048 --ranks 2 --train 130000 --synthetic 0.6 --later 0.5 --threads 1 --vocabulary 2048"
  $train --stage base --steps 8000 --warmup 200 --lr 3e-3 --qat-share 0.3
  $train --stage heads --own-calls 8192 --own-synthetic 1.0 --corrupted-examples 1024 --confidence-steps 1500 --confidence-lr 1e-3
  node src/train/publish.mjs build/train src/train/demo-model
}

native() {
  mkdir -p build/native build/wasi
  local san="-g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
  for t in tests/c/test_*.c; do
    local name; name=$(basename "$t" .c)
    cc $CFLAGS_COMMON -DND_NEEDLE3 -Itests/c $san "$t" $ENGINE_SOURCES -lm -o "build/native/$name"
    # The same test as a WASI module with the SIMD kernels, run by tests/js/c-units.test.js.
    emcc $CFLAGS_COMMON -DND_NEEDLE3 -Itests/c -O2 -msimd128 -DND_SIMD128 -sSTANDALONE_WASM \
      -sALLOW_MEMORY_GROWTH -sTOTAL_STACK=1048576 --js-library "$(host_imports)" \
      "$t" $ENGINE_SOURCES $SIMD_SOURCES \
      -o "build/wasi/$name.wasm"
  done
  echo "built native and WASI unit tests in build/"
}

fuzz() {
  mkdir -p build
  for target in tests/fuzz/fuzz_*.c; do
    clang $CFLAGS_COMMON -DND_NEEDLE3 -g -O1 -fsanitize=fuzzer,address,undefined \
      "$target" $ENGINE_SOURCES -lm -o "build/$(basename "$target" .c)"
  done
  echo "built the fuzz targets in build/"
}

deps() {
  local need=()
  command -v emcc >/dev/null || need+=(emscripten)
  command -v spm_encode >/dev/null || need+=(sentencepiece)
  command -v clang >/dev/null || need+=(clang)
  compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null || need+=(libclang-rt-14-dev)
  command -v node >/dev/null || need+=(nodejs npm)
  [ -x /usr/bin/chromium ] || need+=(chromium)
  [ -x /usr/bin/firefox-esr ] || need+=(firefox-esr)  # the page's tests run in Firefox too
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
  train) wasm; train ;;  # the heads stage and publish.mjs run the engine
  *) echo "usage: $0 [wasm|native|fuzz|all|deps|train]" >&2; exit 2 ;;
esac
