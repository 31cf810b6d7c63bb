// app.js: the demo page. Loads an archive (demo by default, or a URL, a
// picked file, a dropped file) with a progress bar into a Web Worker, then
// runs the agent there: an example (presets.js) fills an editable tools JSON
// and a query; Run streams the reasoning, then shows the parsed call with
// confidence, speed and memory; a tool result can go back as the next turn.
// Registers the offline service worker.

import { loadModel, Needle, NeedleError, DEMO_ARCHIVE_URL, ARCHIVE_CACHE, STATUS } from '../js/index.js';
import { PRESETS, mockResult } from './presets.js';

const $ = (id) => document.getElementById(id);
const LAST_URL_KEY = 'needle-wasm:last-url';
// model: the WorkerModel; agent: its WorkerNeedle and the settings it was made with.
const state = { model: null, loading: null, running: null, agent: null, agentKey: '', lastCalls: [] };

const mb = (bytes) => `${(bytes / 1048576).toFixed(1)} MB`;

function showError(box, error) {
  if (!error) { box.hidden = true; box.textContent = ''; return; }
  box.hidden = false;
  box.textContent = typeof error === 'string' ? error
    : `${error.message}${error.code !== undefined ? ` (code ${error.code})` : ''}`;
}

function setBusy() {
  const ready = !!state.model && !state.loading;
  $('run').disabled = !ready || !!state.running;
  $('stop').disabled = !state.running;
  $('reset').disabled = !ready || !!state.running || !state.agent;
  $('send-result').disabled = !ready || !!state.running;
  $('stat-state').textContent = state.loading ? 'loading' : state.running ? 'running'
    : ready ? ($('stat-state').dataset.last || 'ready') : 'idle';
  document.body.dataset.agent = state.running ? 'running' : 'idle';
}

/** Loads an archive, replacing the current model once the new one is in. */
async function load(source, label, { isDemo = false } = {}) {
  state.loading?.abort();
  state.running?.abort();
  const controller = new AbortController();
  state.loading = controller;
  showError($('error'), null);
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
    await dropAgent();
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
    clearTurns();
    document.body.dataset.model = 'ready';
  } catch (error) {
    if (error.name === 'AbortError' && state.loading !== controller) return; // replaced by a newer load
    progress.max = 1; progress.value = 0;
    $('load-status').textContent = `Could not load ${label}.`;
    showError($('error'), error);
    if (!state.model) document.body.dataset.model = 'error';
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

// ---------------------------------------------------------------- tools

/** The tools JSON parsed and checked for shape; throws a message for people. */
function readTools() {
  let tools;
  try {
    tools = JSON.parse($('tools').value || '[]');
  } catch (error) {
    throw new Error(`The tools are not valid JSON: ${error.message}`);
  }
  if (!Array.isArray(tools)) throw new Error('The tools must be a JSON array of { name, description, parameters }.');
  tools.forEach((t, i) => {
    if (!t || typeof t !== 'object' || Array.isArray(t)) throw new Error(`Tool ${i + 1} is not an object.`);
    if (typeof t.name !== 'string' || !t.name) throw new Error(`Tool ${i + 1} has no "name" string.`);
    if (!t.parameters || typeof t.parameters !== 'object') throw new Error(`Tool "${t.name}" has no "parameters" schema object.`);
  });
  return tools;
}

function checkTools() {
  const box = $('tools');
  try {
    const tools = readTools();
    box.removeAttribute('aria-invalid');
    $('tools-status').textContent = `${tools.length} tool${tools.length === 1 ? '' : 's'}` +
      `${tools.length > 5 ? ': the 5 closest to each query reach the prompt' : ''}.`;
    $('tools-status').classList.remove('bad');
  } catch (error) {
    box.setAttribute('aria-invalid', 'true');
    $('tools-status').textContent = error.message;
    $('tools-status').classList.add('bad');
  }
}

function settings() {
  const number = (id, fallback) => (Number.isFinite(Number($(id).value)) && $(id).value !== '' ? Number($(id).value) : fallback);
  return {
    system: $('system').value.trim(),
    temperature: Math.max(0, number('temperature', 0)),
    seed: Math.max(0, Math.floor(number('seed', 0))),
  };
}

/** The agent for the current tools and settings: the same one while they
 *  stay the same (the conversation goes on), a new one when they change. */
async function currentAgent() {
  const tools = readTools();
  const options = settings();
  const key = JSON.stringify([tools, options]);
  if (state.agent && state.agentKey === key) return state.agent;
  const hadConversation = !!state.agent && $('turns').children.length > 0;
  await dropAgent();
  state.agent = await Needle.create({ model: state.model, tools, ...options });
  state.agentKey = key;
  if (hadConversation) logNote('The tools or settings changed: a new conversation starts.');
  return state.agent;
}

async function dropAgent() {
  const agent = state.agent;
  state.agent = null;
  state.agentKey = '';
  state.lastCalls = [];
  await agent?.free().catch(() => {}); // its worker may be gone with the old model
}

// ---------------------------------------------------------------- turns

function clearResult() {
  $('reasoning').textContent = '';
  $('call').textContent = '';
  $('call').classList.remove('none');
  for (const id of ['stat-confidence', 'stat-prefill', 'stat-decode', 'stat-prefilled']) $(id).textContent = '–';
  $('stat-pieces').textContent = '0';
}

function clearTurns() {
  $('turns').replaceChildren();
  $('turns-empty').hidden = false;
  $('result-form').hidden = true;
  state.lastCalls = [];
}

function logNote(text) {
  const item = document.createElement('li');
  item.className = 'note-turn';
  item.textContent = text;
  $('turns').append(item);
  $('turns-empty').hidden = true;
}

function logTurn(kind, input, envelope) {
  const item = document.createElement('li');
  const who = document.createElement('p');
  who.className = 'who';
  who.textContent = kind === 'tool_result' ? 'Tool result' : 'Query';
  const said = document.createElement('p');
  said.className = 'said';
  said.textContent = kind === 'tool_result' ? JSON.stringify(input) : input;
  const outcome = document.createElement('p');
  outcome.className = envelope.success ? 'outcome' : 'outcome failed';
  outcome.textContent = `→ ${summary(envelope)}`;
  item.append(who, said, outcome);
  $('turns').append(item);
  $('turns-empty').hidden = true;
}

function summary(envelope) {
  if (!envelope.success) return envelope.error_code === STATUS.ABORTED ? 'stopped' : `failed: ${envelope.error}`;
  if (envelope.function_calls.length) {
    return envelope.function_calls.map((c) => `${c.name}(${JSON.stringify(c.arguments)})`).join(', ');
  }
  return envelope.type === 'respond' ? 'responded, no further call' : 'no call: the model declined';
}

function showEnvelope(envelope, agent) {
  const calls = envelope.function_calls;
  const call = $('call');
  if (envelope.success && calls.length) {
    call.textContent = JSON.stringify(calls, null, 2);
    call.classList.remove('none');
  } else {
    call.textContent = envelope.success ? (envelope.type === 'respond' ? '(no further call)' : '(no call)') : '';
    call.classList.add('none');
  }
  $('stat-confidence').textContent = !envelope.success ? '–' : envelope.confidence === null ? 'n/a' : envelope.confidence.toFixed(2);
  $('stat-prefill').textContent = envelope.prefill_tps ? envelope.prefill_tps.toFixed(0) : '–';
  $('stat-decode').textContent = envelope.decode_tps ? envelope.decode_tps.toFixed(1) : '–';
  if (envelope.peak_ram_mb) $('stat-memory').textContent = `${envelope.peak_ram_mb.toFixed(1)} MB`;
  $('stat-prefilled').textContent = String(agent.prefillCount);
  document.body.dataset.envelopes = String(Number(document.body.dataset.envelopes || 0) + 1);

  const stopped = !envelope.success && envelope.error_code === STATUS.ABORTED;
  const verdict = $('verdict');
  verdict.classList.toggle('bad', !envelope.success && !stopped);
  if (stopped) verdict.textContent = 'Stopped. The turn was undone; run again or change the query.';
  else if (!envelope.success) verdict.textContent = `The turn failed: ${envelope.error} (code ${envelope.error_code}).`;
  else if (calls.length) verdict.textContent = `${calls.length} call${calls.length === 1 ? '' : 's'}. Send the tool's result back below, or ask something else.`;
  else if (envelope.type === 'respond') verdict.textContent = 'The model needs no further call.';
  else verdict.textContent = 'No call: the model found no tool that fits (a refusal).';

  state.lastCalls = envelope.success ? calls : [];
  $('result-form').hidden = !state.lastCalls.length;
  if (state.lastCalls.length) $('tool-result').value = '';
}

/** One agent turn in the worker: a query, or a tool result. */
async function turn(kind, input) {
  if (!state.model || state.running) return;
  showError($('agent-error'), null);
  let agent;
  try {
    agent = await currentAgent();
  } catch (error) {
    const schema = error.code === STATUS.SCHEMA;
    if (schema || !(error instanceof NeedleError)) $('tools').setAttribute('aria-invalid', 'true');
    showError($('agent-error'), schema ? `The tools were rejected: ${error.message}` : error);
    return;
  }
  const controller = new AbortController();
  state.running = controller;
  $('stat-state').dataset.last = '';
  setBusy();
  clearResult();
  $('verdict').classList.remove('bad');
  $('verdict').textContent = kind === 'tool_result' ? 'Reading the tool result…' : 'Thinking…';
  let pieces = 0;
  const reasoning = $('reasoning');
  const call = $('call');
  try {
    const envelope = await agent.complete(input, {
      kind, signal: controller.signal, maxNewTokens: Math.max(1, Number($('max-tokens').value) || 256),
      onToken: ({ kind: part, text }) => {
        pieces++;
        $('stat-pieces').textContent = String(pieces);
        const box = part === 'reasoning' ? reasoning : part === 'call' ? call : null;
        if (!box) return; // markers (<think>, <tool_call>) structure the output; not shown
        box.textContent += text;
        box.scrollTop = box.scrollHeight;
      },
    });
    showEnvelope(envelope, agent);
    logTurn(kind, input, envelope);
    $('stat-state').dataset.last = envelope.success ? 'done' : envelope.error_code === STATUS.ABORTED ? 'stopped' : 'failed';
  } catch (error) {
    showError($('agent-error'), error);
    $('stat-state').dataset.last = 'failed';
  } finally {
    state.running = null;
    setBusy();
  }
}

function runQuery() {
  const query = $('query').value.trim();
  if (!query) { showError($('agent-error'), 'Type a query first.'); $('query').focus(); return; }
  turn('query', query);
}

function sendResult(event) {
  event?.preventDefault();
  let value;
  try {
    value = JSON.parse($('tool-result').value);
  } catch (error) {
    showError($('agent-error'), `The tool result is not valid JSON (${error.message}). Try {"ok": true} or "done", or Fill a mock result.`);
    $('tool-result').focus();
    return;
  }
  turn('tool_result', value);
}

async function reset() {
  if (!state.agent || state.running) return;
  showError($('agent-error'), null);
  try {
    await state.agent.reset();
    clearTurns();
    clearResult();
    $('verdict').classList.remove('bad');
    $('verdict').textContent = 'New conversation: same tools, nothing said yet.';
    $('stat-state').dataset.last = 'reset';
  } catch (error) {
    showError($('agent-error'), error);
  } finally {
    setBusy();
  }
}

function choosePreset(id) {
  const preset = PRESETS.find((p) => p.id === id) ?? PRESETS[0];
  $('query').value = preset.query;
  $('tools').value = JSON.stringify(preset.tools, null, 2);
  showError($('agent-error'), null);
  checkTools();
}

// ---------------------------------------------------------------- page

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
  $('run').addEventListener('click', runQuery);
  $('stop').addEventListener('click', () => state.running?.abort());
  $('reset').addEventListener('click', reset);
  $('result-form').addEventListener('submit', sendResult);
  $('mock').addEventListener('click', () => {
    $('tool-result').value = JSON.stringify(mockResult(state.lastCalls), null, 2);
    $('tool-result').focus();
  });
  const ctrlEnter = (fn) => (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); fn(); } };
  $('query').addEventListener('keydown', ctrlEnter(runQuery));
  $('tool-result').addEventListener('keydown', ctrlEnter(sendResult));
  addEventListener('keydown', (e) => { if (e.key === 'Escape' && state.running) state.running.abort(); });
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
