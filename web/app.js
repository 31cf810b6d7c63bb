// app.js: the demo page. Loads an archive (demo by default, or a URL, a
// picked file, a dropped file) with a progress bar, streams generated text
// with tok/s and memory, stops on request, and registers the offline service
// worker. The model runs in a Web Worker (loadModel's default in pages).

import { loadModel, DEMO_ARCHIVE_URL, ARCHIVE_CACHE } from '../js/index.js';
import { PRESETS } from './presets.js';

const $ = (id) => document.getElementById(id);
const LAST_URL_KEY = 'needle-wasm:last-url';
const state = { model: null, loading: null, running: null };

const mb = (bytes) => `${(bytes / 1048576).toFixed(1)} MB`;

function showError(error) {
  const box = $('error');
  if (!error) { box.hidden = true; box.textContent = ''; return; }
  box.hidden = false;
  box.textContent = `${error.message}${error.code !== undefined ? ` (code ${error.code})` : ''}`;
}

function setBusy() {
  const ready = !!state.model && !state.loading;
  $('generate').disabled = !ready || !!state.running;
  $('stop').disabled = !state.running;
  $('stat-state').textContent = state.loading ? 'loading' : state.running ? 'generating' : ready ? 'ready' : 'idle';
}

/** Loads an archive, replacing the current model once the new one is in. */
async function load(source, label, { isDemo = false } = {}) {
  state.loading?.abort();
  const controller = new AbortController();
  state.loading = controller;
  showError(null);
  setBusy();
  const progress = $('progress');
  progress.removeAttribute('value'); // indeterminate until the first bytes arrive
  $('load-status').textContent = `Loading ${label}…`;
  const started = performance.now();
  try {
    const model = await loadModel(source, {
      signal: controller.signal,
      onProgress: ({ loaded, total }) => {
        if (total) { progress.max = total; progress.value = loaded; }
        $('load-status').textContent = `Loading ${label}: ${mb(loaded)}${total ? ` of ${mb(total)}` : ''}`;
      },
    });
    await state.model?.free();
    state.model = model;
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    progress.max = 1; progress.value = 1;
    $('load-status').textContent = `Loaded ${label}: ${mb(model.source.size)} in ${seconds} s` +
      `${model.source.fromCache ? ' (from the offline cache)' : ''}.` +
      `${model.source.cacheError ? ` Not cached for offline use: ${model.source.cacheError.message}` : ''}`;
    $('weights-note').hidden = !isDemo;
    $('stat-memory').textContent = mb(model.peakMemoryBytes);
    if (typeof source === 'string' || source instanceof URL) rememberUrl(String(source));
    document.body.dataset.model = 'ready';
  } catch (error) {
    if (error.name === 'AbortError' && state.loading !== controller) return; // replaced by a newer load
    progress.max = 1; progress.value = 0;
    $('load-status').textContent = `Could not load ${label}.`;
    showError(error);
    document.body.dataset.model = 'error';
  } finally {
    if (state.loading === controller) state.loading = null;
    setBusy();
  }
}

/** Keeps only the last used URL archive in the offline cache. */
async function rememberUrl(url) {
  const href = new URL(url, location.href).href;
  localStorage.setItem(LAST_URL_KEY, href);
  if (typeof caches === 'undefined') return;
  const cache = await caches.open(ARCHIVE_CACHE);
  for (const request of await cache.keys()) if (request.url !== href) await cache.delete(request);
}

async function generate() {
  if (!state.model || state.running) return;
  const controller = new AbortController();
  state.running = controller;
  setBusy();
  showError(null);
  const output = $('output');
  output.textContent = '';
  let tokens = 0;
  let first = 0;
  const started = performance.now();
  try {
    for await (const { text } of state.model.generate($('prompt').value, {
      maxTokens: Number($('max-tokens').value) || 64,
      temperature: Number($('temperature').value) || 0,
      seed: Number($('seed').value) || 0,
      signal: controller.signal,
    })) {
      tokens++;
      if (tokens === 1) first = performance.now();
      output.textContent += text;
      output.scrollTop = output.scrollHeight;
      $('stat-tokens').textContent = String(tokens);
      const seconds = (performance.now() - first) / 1000;
      if (tokens > 1 && seconds > 0) $('stat-speed').textContent = ((tokens - 1) / seconds).toFixed(1);
    }
    $('stat-state').dataset.last = 'done';
  } catch (error) {
    if (error.name === 'AbortError') $('stat-state').dataset.last = 'stopped';
    else showError(error);
  } finally {
    state.running = null;
    $('stat-memory').textContent = mb(state.model.peakMemoryBytes);
    $('stat-speed').title = `${tokens} tokens in ${((performance.now() - started) / 1000).toFixed(2)} s including the prompt`;
    setBusy();
    $('stat-state').textContent = $('stat-state').dataset.last === 'stopped' ? 'stopped' : 'ready';
  }
}

function choosePreset(id) {
  const preset = PRESETS.find((p) => p.id === id) ?? PRESETS[0];
  $('prompt').value = preset.query;
  $('tools').value = JSON.stringify(preset.tools, null, 2);
  $('tools-status').textContent = `${preset.tools.length} tool${preset.tools.length === 1 ? '' : 's'}`;
}

function checkTools() {
  try {
    const tools = JSON.parse($('tools').value || '[]');
    if (!Array.isArray(tools)) throw new Error('expected a JSON array of tools');
    $('tools-status').textContent = `${tools.length} tool${tools.length === 1 ? '' : 's'}`;
  } catch (error) {
    $('tools-status').textContent = `Tools JSON: ${error.message}`;
  }
}

function setupDrop() {
  let depth = 0;
  const hasFiles = (e) => [...(e.dataTransfer?.types ?? [])].includes('Files');
  addEventListener('dragenter', (e) => { if (hasFiles(e)) { depth++; document.body.classList.add('dragging'); } });
  addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; document.body.classList.remove('dragging'); } });
  addEventListener('dragover', (e) => { if (hasFiles(e)) e.preventDefault(); });
  addEventListener('drop', (e) => {
    e.preventDefault();
    depth = 0;
    document.body.classList.remove('dragging');
    const file = e.dataTransfer?.files?.[0];
    if (file) load(file, file.name);
  });
}

function setupNetwork() {
  const badge = $('network');
  const update = () => {
    badge.textContent = navigator.onLine ? 'online' : 'offline';
    badge.classList.toggle('offline', !navigator.onLine);
  };
  addEventListener('online', update);
  addEventListener('offline', update);
  update();
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('sw.js').then(
      () => { if (navigator.onLine) badge.title = 'works offline after this visit'; },
      (error) => { badge.title = `offline mode unavailable: ${error.message}`; },
    );
  }
}

function main() {
  $('preset').append(...PRESETS.map((p) => new Option(p.label, p.id)));
  $('preset').addEventListener('change', (e) => choosePreset(e.target.value));
  $('tools').addEventListener('input', checkTools);
  choosePreset(PRESETS[0].id);
  $('prompt').value = 'turn on the kitchen lights';

  $('url-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const url = $('url').value.trim();
    if (url) load(url, url.split('/').pop() || url);
  });
  $('file').addEventListener('change', (e) => {
    const file = e.target.files?.[0];
    if (file) load(file, file.name);
    e.target.value = '';
  });
  $('demo').addEventListener('click', () => load(DEMO_ARCHIVE_URL.href, 'the demo archive', { isDemo: true }));
  $('generate').addEventListener('click', generate);
  $('stop').addEventListener('click', () => state.running?.abort());
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) generate();
  });
  setupDrop();
  setupNetwork();

  const last = localStorage.getItem(LAST_URL_KEY);
  if (last && last !== DEMO_ARCHIVE_URL.href) {
    $('url').value = last;
    load(last, last.split('/').pop());
  } else {
    load(DEMO_ARCHIVE_URL.href, 'the demo archive', { isDemo: true });
  }
}

main();
