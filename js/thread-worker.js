// thread-worker.js: one worker of the engine's thread pool (src/kernels/threads.h).
// It instantiates the engine's compiled threaded module over the engine's
// shared memory (the start function sees memory already initialised and
// leaves it alone; _initialize is not called: the engine's thread ran it),
// moves its stack pointer to the stack the engine allocated for it, says
// ready, and enters needle_thread_work, which returns when the engine calls
// needle_threads_stop. The same file serves Node worker_threads and browser
// (module) Web Workers.
//
// Message in: { module, memory, stackTop }. Messages out: { ready: true },
// then { done: true } when the pool let it go, or { error: message }.

import { importNode } from './node-import.js';

function run({ module, memory, stackTop }, post) {
  try {
    const instance = new WebAssembly.Instance(module, {
      env: {
        memory,
        emscripten_notify_memory_growth() {},
        needle_now_ms: () => performance.now(), // only differences matter (the idle spin)
      },
    });
    const x = instance.exports;
    x.stackRestore(stackTop);
    post({ ready: true });
    x.needle_thread_work();
    post({ done: true });
  } catch (error) {
    post({ error: String(error?.stack ?? error) });
  }
}

// No top-level await: bundlers emit browser workers as classic scripts.
if (typeof WorkerGlobalScope === 'undefined') { // Node worker_threads
  importNode('node:worker_threads').then(({ parentPort, workerData }) => {
    run(workerData, (message) => parentPort.postMessage(message));
    parentPort.close();
  });
} else {
  self.onmessage = ({ data }) => {
    run(data, (message) => self.postMessage(message));
    self.close();
  };
}
