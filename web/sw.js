// sw.js: offline support for the demo page. Precaches the app shell, the
// engine (wasm) and the worker; serves them network-first so online visits
// always see the current files, and from the cache when offline. Archives
// (.cact) are not handled here: js/load.js keeps the last used one in its
// own Cache Storage bucket and falls back to it when the network is down.
// A new app version (VERSION, or BUILD which `npm start` sets to a hash of
// the app files) installs a new cache and deletes the old one.

const VERSION = '0.1.0';
const BUILD = '';
const CACHE = `needle-app-${VERSION}${BUILD ? `-${BUILD}` : ''}`;
const SHELL = [
  './', './index.html', './app.js', './presets.js', './style.css', './manifest.webmanifest', './icon.svg',
  './tools.json',
  '../js/index.js', '../js/client.js', '../js/worker.js', '../js/protocol.js', '../js/load.js',
  '../js/model.js', '../js/engine.js', '../js/wasm.js', '../js/agent.js', '../js/json-text.js', '../js/node-import.js',
  '../js/thread-worker.js', '../js/options.js', '../js/exact-json.js', '../js/needle2.js', '../js/errors.js',
  '../js/openai.js', '../js/openai-request.js', '../js/openai-chunks.js', '../js/load-model.js', '../js/demo-model.js',
  '../js/needle3.js', '../js/released-model.js', '../js/download-guard.js', '../js/postprocess.js',
  '../dist/needle.wasm', '../dist/needle-nosimd.wasm', '../dist/needle-relaxed.wasm', '../dist/needle-threads.wasm',
  '../dist/needle3.wasm',
  '../dist/needle3-threads.wasm',
].map((path) => new URL(path, self.location).href);

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith('needle-app-') && name !== CACHE) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const { request } = event;
  const url = new URL(request.url);
  if (request.method !== 'GET' || url.origin !== self.location.origin || url.pathname.endsWith('.cact')) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const response = await fetch(request);
      if (response.ok && SHELL.includes(url.origin + url.pathname)) await cache.put(url.origin + url.pathname, response.clone());
      return response;
    } catch (error) {
      const cached = await cache.match(url.origin + url.pathname);
      if (cached) return cached;
      throw error;
    }
  })());
});
