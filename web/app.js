// app.js: the demo page. Loads an archive (the built-in demo model by
// default, or a URL, a picked file, a dropped file) with a progress bar into a
// Web Worker, then runs the agent there with the tools declared in an
// editable tools JSON (all 18 of tools.json unless the user narrows them) and
// a query (an example from presets.js, or the user's own); Run streams the
// reasoning, then shows the parsed call with confidence, speed, memory and
// any warnings; a tool result can go back as the next turn. Registers the
// offline service worker.

import {
  loadModel, loadNeedle2, loadNeedle3, Needle, NeedleError, DEMO_ARCHIVE_URL, ARCHIVE_CACHE, STATUS, NEEDLE2_URL, NEEDLE3_URL,
} from '../js/index.js';
import { PRESETS, mockResult } from './presets.js';

const $ = (id) => document.getElementById(id);
const LAST_URL_KEY = 'needle-wasm:last-url';
// The Load Needle 2 and Load Needle 3 buttons, by key (the button's id, and
// LAST_URL_KEY's value when the last model was that button's). Each loads
// from Hugging Face, or from ?needle2=URL (a mirror, or a test's stand-in);
// ?needle2-size=BYTES and ?needle2-sha256=HEX accept another build
// (needle3 alike).
const params = new URLSearchParams(location.search);
function release(key, name, defaultUrl, loader) {
  const expect = {};
  if (params.has(`${key}-size`)) expect.size = Number(params.get(`${key}-size`));
  if (params.has(`${key}-sha256`)) expect.sha256 = params.get(`${key}-sha256`);
  return { key, name, loader, defaultUrl, expect, url: new URL(params.get(key) ?? defaultUrl, location.href).href };
}
const RELEASES = {
  needle2: release('needle2', 'Needle 2', NEEDLE2_URL, loadNeedle2),
  needle3: release('needle3', 'Needle 3', NEEDLE3_URL, loadNeedle3),
};
const READY_VERDICT = 'Pick an example or type a command, and press Run.';
const state = {
  model: null,      // the WorkerModel
  modelInfo: null,  // what the page says about it: { name, size, isDemo }
  loading: null,    // the AbortController of the load in progress
  loads: 0,         // counts load attempts, so a turn that outlived one shows nothing
  running: null,    // the AbortController of the turn in progress
  agent: null,      // the WorkerNeedle, and the tools and settings it was made with
  agentKey: '',
  lastCalls: [],
  catalogue: [],    // tools.json
  turnNumber: 0,    // turns the current conversation kept (the log numbers them)
};

const mb = (bytes) => `${(bytes / 1048576).toFixed(1)} MB`; // memory, as the engine counts it
const fileSize = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`; // files, as Hugging Face counts them

/** How the page names a model: "the built-in demo model (demo.cact, 0.9 MB)". */
function describeModel({ name, size, isDemo }) {
  return isDemo ? `the built-in demo model (${name}, ${fileSize(size)})` : `${name} (${fileSize(size)})`;
}

/** Shows an error: a sentence a person can act on, with the engine's own
 *  message and code beside it in smaller text. `plain` may be omitted. */
function showError(box, error, plain) {
  if (!error) { box.hidden = true; box.replaceChildren(); return; }
  box.hidden = false;
  if (typeof error === 'string') { box.textContent = error; return; }
  const detail = `${error.message}${error.code !== undefined ? ` (code ${error.code})` : ''}`;
  if (!plain) { box.textContent = detail; return; }
  const main = document.createElement('span');
  main.className = 'error-main';
  main.textContent = plain;
  const small = document.createElement('span');
  small.className = 'error-detail';
  small.textContent = `Details: ${detail}`;
  box.replaceChildren(main, small);
}

/** A failed load in words: what went wrong and what to do about it. The codes
 *  are those of js/load.js, js/released-model.js and the engine's STATUS
 *  (js/engine.js); release: the button's, for a load of Needle 2 or 3. */
function explainLoadError(error, release = null) {
  switch (error.code) {
    case STATUS.FORMAT:
      return /not a \.cact archive/.test(error.message) ? 'This file is not a .cact archive.'
        : 'This .cact archive is damaged, or not one this engine can read.';
    case STATUS.UNSUPPORTED:
      return 'This is a Needle 3 archive, which only the needle3 engine runs; this page was set to another engine.';
    case STATUS.NOMEM: return 'This browser tab does not have enough memory for this model. Close other tabs and try again.';
    case STATUS.TOKENIZER: return 'The tokenizer inside this archive is damaged.';
    case 'HTTP':
      if (error.status === 404 && release) {
        return `${release.name} is not at its address (HTTP 404): the file may have been moved or renamed. ` +
          'If you know its new address, paste it in the Archive URL field.';
      }
      if (error.status === 404) return 'There is no file at this address (HTTP 404). Check the URL.';
      if (error.status === 401 || error.status === 403) {
        return `The server refused to send this file (HTTP ${error.status}). On Hugging Face this means the ` +
          'repository is gated or private: download the file where you are signed in, then open it here.';
      }
      if (error.status >= 500) return `The server failed to send this file (HTTP ${error.status}). Try again later.`;
      return `The server answered with an error${error.status ? ` (HTTP ${error.status})` : ''}.`;
    case 'NETWORK':
      return 'The archive could not be downloaded. Check the address and your connection; a server on ' +
        'another site must also allow this page to download from it (CORS).';
    case 'OFFLINE':
      return `You are offline, and ${release?.name ?? 'this model'} is not in this browser's cache yet. Connect to ` +
        'the internet once to download it; after that it loads offline.';
    case 'CORS':
      return 'The browser blocked the download: the server does not let this page read the file (CORS), ' +
        'or it could not be reached. Try again later, or download the file and open it here.';
    case 'NOT_NEEDLE2':
    case 'NOT_NEEDLE3': {
      const { what, actual, expected, stopped } = error.mismatch ?? {};
      const name = error.code === 'NOT_NEEDLE2' ? 'Needle 2' : 'Needle 3';
      const say = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : String(n));
      if (stopped) return `The file at this address is larger than ${name} (${say(expected)} bytes): the download was stopped. Nothing was kept.`;
      if (what === 'sha256') return `The file at this address is not the published ${name}: its SHA-256 differs. Nothing was kept.`;
      return `The file at this address is not ${name}: its ${what} is ${say(actual)}${what === 'size' ? ' bytes' : ''}, ` +
        `${name}'s is ${say(expected)}${what === 'size' ? ' bytes' : ''}. Nothing was kept.`;
    }
    case 'TIMEOUT': return 'The download was too slow and was stopped: the server stalled or took too long. Try again later.';
    case 'INSECURE': return 'This page is not served over https, so the browser cannot check the download. Open it over https.';
    case 'TRUNCATED': return 'The download stopped before the end of the archive. Try again.';
    case 'LENGTH': return 'The server sent more data than it announced; the file may have changed meanwhile. Try again.';
    case 'READ': return 'The file could not be read: it may have been moved or deleted.';
    default: return 'The model could not be loaded.';
  }
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

/** Run and Send are disabled while a turn runs, which drops focus to <body>;
 *  keep it on a control a keyboard user can go on from (Stop, then Run). */
function keepFocus() {
  const active = document.activeElement;
  if (!active || active === document.body || active.disabled) $(state.running ? 'stop' : 'run').focus();
}

/** The header and the tab's title name the model that runs: the page runs
 *  any .cact archive, most often the demo model, which is not Needle 2. */
function showHeaderModel() {
  const info = state.modelInfo;
  const name = !info ? 'needle-wasm' : info.isDemo ? 'Demo model' : info.name;
  $('header-model').textContent = name;
  document.title = `${name} in your browser`;
}

/** How many threads the engine runs on, and why only one when so. */
function showThreads() {
  const threads = state.model?.threads;
  $('stat-threads').textContent = threads ? String(threads.count) : '–';
  $('stat-threads').title = threads?.reason ?? '';
}

function showActiveModel() {
  showHeaderModel();
  showThreads();
  const line = $('active-model');
  if (!state.modelInfo) { line.textContent = 'Active model: none.'; return; }
  const name = document.createElement('strong');
  name.textContent = describeModel(state.modelInfo);
  line.replaceChildren('Active model: ', name);
  $('demo-note').hidden = !state.modelInfo.isDemo;
}

/** Loads an archive, replacing the current model once the new one is in.
 *  Whatever happens, the result of the previous model goes: the page then
 *  shows only what is true of the model that is active. */
async function load(source, { name, isDemo = false, release = null }) {
  state.loading?.abort();
  state.running?.abort();
  const controller = new AbortController();
  state.loading = controller;
  state.loads++;
  showError($('error'), null);
  showError($('agent-error'), null);
  clearResult();
  setVerdict(READY_VERDICT);
  $('stat-state').dataset.last = '';
  setBusy();
  const progress = $('progress');
  progress.removeAttribute('value'); // indeterminate until the first bytes arrive
  $('load-status').textContent = `Loading ${name}…`;
  const started = performance.now();
  try {
    const options = {
      signal: controller.signal,
      onProgress: ({ loaded, total }) => {
        if (total) { progress.max = total; progress.value = loaded; }
        $('load-status').textContent = `Loading ${name}: ${fileSize(loaded)}${total ? ` of ${fileSize(total)}` : ''}`;
      },
    };
    // Needle 2 and 3 are checked to be those archives (js/released-model.js).
    const model = await (release ? release.loader({ ...options, url: source, expect: release.expect }) : loadModel(source, options));
    if (state.loading !== controller) { await model.free(); return; } // a newer load won
    await dropAgent();
    await state.model?.free();
    state.model = model;
    state.modelInfo = { name, size: model.source.size, isDemo };
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    progress.max = 1; progress.value = 1;
    $('load-status').textContent = `Loaded ${name}: ${fileSize(model.source.size)} in ${seconds} s` +
      `${model.source.fromCache ? ' (from the offline cache)' : ''}.` +
      `${model.source.cacheError ? ` Not cached for offline use: ${model.source.cacheError.message}` : ''}`;
    $('stat-memory').textContent = mb(model.peakMemoryBytes);
    if (typeof source === 'string') rememberUrl(source, release ? release.key : source);
    clearTurns();
    document.body.dataset.model = 'ready';
  } catch (error) {
    if (error.name === 'AbortError' && state.loading !== controller) return; // replaced by a newer load
    progress.max = 1; progress.value = 0;
    $('load-status').textContent = `Could not load ${name}. ` +
      (state.modelInfo ? `Still using ${describeModel(state.modelInfo)}.` : 'No model is loaded.');
    showError($('error'), error, explainLoadError(error, release));
    if (!state.model) document.body.dataset.model = 'error';
  } finally {
    if (state.loading === controller) state.loading = null;
    showActiveModel();
    setBusy();
  }
}

/** Loads an archive by URL; relative URLs resolve against this page. */
function loadUrl(text) {
  let href;
  try {
    href = new URL(text, location.href).href;
  } catch {
    showError($('error'), `"${text}" is not a web address. Paste a link to a .cact file, e.g. https://…/needle2.cact or /models/needle2.cact.`);
    return;
  }
  const button = Object.values(RELEASES).find((r) => r.url === href);
  if (button) { loadRelease(button); return; }
  const name = decodeURIComponent(new URL(href).pathname.split('/').pop()) || href;
  load(href, { name, isDemo: href === DEMO_ARCHIVE_URL.href });
}

/** A Load Needle 2 / 3 button: the real model from Hugging Face (or ?needle2=URL), checked. */
function loadRelease(release) {
  load(release.url, { name: release.name, release });
}

/** Keeps only the last used URL archive in the offline cache; key is what
 *  the next visit loads (the URL, or a RELEASES key for its button). */
async function rememberUrl(href, key) {
  localStorage.setItem(LAST_URL_KEY, key);
  if (typeof caches === 'undefined') return;
  const cache = await caches.open(ARCHIVE_CACHE);
  for (const request of await cache.keys()) if (request.url !== href) await cache.delete(request);
}

// ---------------------------------------------------------------- tools

/** tools.json: the 18 tools the demo model was trained on, which the page
 *  declares unless the user narrows them (precached by sw.js for offline visits). */
async function loadCatalogue() {
  const response = await fetch('./tools.json');
  if (!response.ok) throw new Error(`tools.json: HTTP ${response.status}`);
  return response.json();
}

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

/** Whether tools are the whole catalogue, exactly as tools.json has them. */
const isCatalogue = (tools) => state.catalogue.length > 0 && JSON.stringify(tools) === JSON.stringify(state.catalogue);

/** Whether tools leave out a tool of the catalogue (by name). */
function leavesOut(tools) {
  const names = new Set(tools.map((t) => t.name));
  return state.catalogue.some((t) => !names.has(t.name));
}

/** Which tools are declared, in a sentence. */
function describeTools(tools) {
  const retrieval = tools.length > 5 ? '; the 5 closest to each query reach the prompt' : '';
  if (isCatalogue(tools)) return `Tools declared: all ${tools.length} example tools (the demo model's catalogue)${retrieval}.`;
  if (!tools.length) return 'Tools declared: none.';
  return `Tools declared: ${tools.length} (${tools.map((t) => t.name).join(', ')})${retrieval}.`;
}

/** Says which tools a turn will declare, and offers the whole catalogue back
 *  when they are not it: a command for a tool left out gets no call. */
function checkTools() {
  const box = $('tools');
  const status = $('tools-status');
  try {
    const tools = readTools();
    box.removeAttribute('aria-invalid');
    status.textContent = describeTools(tools);
    status.classList.remove('bad');
    $('all-tools').hidden = !state.catalogue.length || isCatalogue(tools);
  } catch (error) {
    box.setAttribute('aria-invalid', 'true');
    status.textContent = error.message;
    status.classList.add('bad');
    $('all-tools').hidden = !state.catalogue.length;
  }
}

function declareAllTools() {
  $('tools').value = JSON.stringify(state.catalogue, null, 2);
  checkTools();
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

function setVerdict(text, bad = false) {
  $('verdict').textContent = text;
  $('verdict').classList.toggle('bad', bad);
}

function clearResult() {
  $('reasoning').textContent = '';
  $('call').textContent = '';
  $('call').classList.remove('none');
  $('rendered-tools').hidden = true;
  showWarnings([]);
  for (const id of ['stat-confidence', 'stat-prefill', 'stat-decode', 'stat-prefilled']) $(id).textContent = '–';
  $('stat-pieces').textContent = '0';
  $('result-form').hidden = true;
  state.lastCalls = [];
}

function clearTurns() {
  $('turns').replaceChildren();
  $('turns-empty').hidden = false;
  $('result-form').hidden = true;
  state.lastCalls = [];
  state.turnNumber = 0;
}

/** A line between conversations; the next kept turn is number 1 again. */
function logNote(text) {
  const item = document.createElement('li');
  item.className = 'note-turn';
  item.textContent = text;
  $('turns').append(item);
  $('turns-empty').hidden = true;
  state.turnNumber = 0;
}

/** Logs a turn. Its number is written out, not left to the list's markers
 *  (which counted the notes between conversations too), and only turns the
 *  conversation kept get one: the engine undoes a stopped or failed turn. */
function logTurn(kind, input, envelope) {
  const item = document.createElement('li');
  const who = document.createElement('p');
  who.className = 'who';
  const label = kind === 'tool_result' ? 'Tool result' : 'Query';
  who.textContent = envelope.success ? `Turn ${++state.turnNumber} · ${label}` : `${label} · not kept`;
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

/** With more than 5 tools, says which 5 the retrieval head put in the prompt. */
function showRenderedTools(agent, declared) {
  const line = $('rendered-tools');
  const rendered = declared > 5 && typeof agent.renderedTools === 'function' ? agent.renderedTools() : [];
  line.hidden = !rendered.length;
  line.textContent = rendered.length
    ? `Tools in the prompt for this query (${rendered.length} of ${declared}, picked by retrieval): ${rendered.map((t) => t.name).join(', ')}`
    : '';
}

/** The turn's warnings (envelope.warnings: one sentence each, e.g. for a
 *  tool the demo model was not trained on); an envelope without them has none. */
function showWarnings(warnings) {
  const list = $('warnings');
  const sentences = Array.isArray(warnings) ? warnings.filter((w) => typeof w === 'string' && w) : [];
  list.replaceChildren(...sentences.map((w) => Object.assign(document.createElement('li'), { textContent: w })));
  list.hidden = !sentences.length;
}

/** narrowed: the tools declared leave out some of the catalogue's (a refusal may be why). */
function showEnvelope(envelope, agent, narrowed) {
  const calls = envelope.function_calls;
  const call = $('call');
  if (envelope.success && calls.length) {
    call.textContent = JSON.stringify(calls, null, 2);
    call.classList.remove('none');
  } else {
    call.textContent = envelope.success ? (envelope.type === 'respond' ? '(no further call)' : '(no call)') : '';
    call.classList.add('none');
  }
  // Streaming kept the end in view; the tool name is at the start.
  call.scrollTop = 0;
  $('stat-confidence').textContent = !envelope.success ? '–' : envelope.confidence === null ? 'n/a' : envelope.confidence.toFixed(2);
  $('stat-prefill').textContent = envelope.prefill_tps ? envelope.prefill_tps.toFixed(0) : '–';
  $('stat-decode').textContent = envelope.decode_tps ? envelope.decode_tps.toFixed(1) : '–';
  if (envelope.peak_ram_mb) $('stat-memory').textContent = `${envelope.peak_ram_mb.toFixed(1)} MB`;
  $('stat-prefilled').textContent = String(agent.prefillCount);

  const stopped = !envelope.success && envelope.error_code === STATUS.ABORTED;
  if (stopped) setVerdict('Stopped. The turn was undone; run again or change the query.');
  else if (envelope.error_code === 'truncated') setVerdict('No call: the token budget ran out before a call was complete. Raise Max tokens and run again.', true);
  else if (!envelope.success) setVerdict(`The turn failed: ${envelope.error} (code ${envelope.error_code}).`, true);
  else if (calls.length) setVerdict(`${calls.length} call${calls.length === 1 ? '' : 's'}. Send the tool's result back below, or ask something else.`);
  else if (envelope.type === 'respond') setVerdict('The model needs no further call.');
  else if (narrowed) setVerdict(`No call: none of the tools declared fits. ${$('all-tools').textContent} (under the query) to reach the rest.`);
  else setVerdict('No call: the model found no tool that fits (a refusal).');
  showWarnings(envelope.warnings);

  state.lastCalls = envelope.success ? calls : [];
  $('result-form').hidden = !state.lastCalls.length;
  if (state.lastCalls.length) $('tool-result').value = '';
}

/** One agent turn in the worker: a query, or a tool result. */
async function turn(kind, input) {
  if (!state.model || state.running) return;
  showError($('agent-error'), null);
  const loads = state.loads;
  let agent;
  let tools;
  try {
    tools = readTools();
    agent = await currentAgent();
  } catch (error) {
    const schema = error.code === STATUS.SCHEMA;
    if (schema || !(error instanceof NeedleError)) {
      $('tools').setAttribute('aria-invalid', 'true');
      $('tools-box').open = true; // show the box the error is in
    }
    showError($('agent-error'), schema ? `The tools were rejected: ${error.message}` : error);
    return;
  }
  const controller = new AbortController();
  state.running = controller;
  $('stat-state').dataset.last = '';
  setBusy();
  keepFocus();
  clearResult();
  setVerdict(kind === 'tool_result' ? 'Reading the tool result…' : 'Thinking…');
  const pieces = pieceWriter();
  try {
    const envelope = await agent.complete(input, {
      kind, signal: controller.signal, maxNewTokens: Math.max(1, Number($('max-tokens').value) || 256),
      onToken: pieces.add,
    });
    if (loads !== state.loads) return; // a load started meanwhile and cleared the result: show nothing
    pieces.flush();
    showEnvelope(envelope, agent, leavesOut(tools));
    showRenderedTools(agent, tools.length);
    logTurn(kind, input, envelope);
    $('stat-state').dataset.last = envelope.success ? 'done' : envelope.error_code === STATUS.ABORTED ? 'stopped' : 'failed';
  } catch (error) {
    if (loads !== state.loads) return;
    pieces.flush();
    if (error.name === 'AbortError') { // Stop, Escape or a new load: the engine undid the turn
      setVerdict('Stopped. The turn was undone; run again or change the query.');
      logTurn(kind, input, { success: false, error_code: STATUS.ABORTED });
      $('stat-state').dataset.last = 'stopped';
      return;
    }
    showError($('agent-error'), error);
    $('stat-state').dataset.last = 'failed';
  } finally {
    pieces.cancel(); // after a load cleared the result, nothing more is shown
    state.running = null;
    setBusy();
    keepFocus();
    document.body.dataset.turnsEnded = String(Number(document.body.dataset.turnsEnded || 0) + 1); // for tests
  }
}

/** Streams a turn's pieces into the page: the first of each box at once,
 *  then what came since every 100 ms. Written piece by piece, each laid the
 *  page out again on the cores the engine runs on. Interleaved runs of
 *  tests/browser/page-decode-bench.mjs (released geometry, two threads): the
 *  engine decoded 0.68-0.73x as fast in the page as in Node with a write per
 *  piece, 0.76-0.79x with one per frame, 0.86-0.93x with one per 100 ms. */
function pieceWriter() {
  const boxes = { reasoning: $('reasoning'), call: $('call') };
  const pending = { reasoning: '', call: '' };
  let count = 0;
  let timer = 0;
  const cancel = () => { clearTimeout(timer); timer = 0; };
  const flush = () => {
    cancel();
    $('stat-pieces').textContent = String(count);
    for (const part of ['reasoning', 'call']) {
      if (!pending[part]) continue;
      boxes[part].textContent += pending[part];
      boxes[part].scrollTop = boxes[part].scrollHeight;
      pending[part] = '';
    }
  };
  const add = ({ kind: part, text }) => {
    count++;
    if (!(part in pending)) return; // markers (<think>, <tool_call>) structure the output; not shown
    pending[part] += text;
    if (!boxes[part].textContent) flush();
    else timer ||= setTimeout(flush, 100);
  };
  return { add, flush, cancel };
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
    setVerdict('New conversation: same tools, nothing said yet.');
    $('stat-state').dataset.last = 'reset';
  } catch (error) {
    showError($('agent-error'), error);
  } finally {
    setBusy();
  }
}

/** An example fills the query only: the tools stay what the user declared,
 *  so a command typed after it reaches the same tools as the example. */
function choosePreset(id) {
  const preset = PRESETS.find((p) => p.id === id) ?? PRESETS[0];
  $('query').value = preset.query;
  showError($('agent-error'), null);
}

/** Declares the 18 tools and fills the examples once tools.json is in;
 *  without it the tools box opens empty for the user's own tools. */
async function setupPresets() {
  try {
    state.catalogue = await loadCatalogue();
  } catch (error) {
    showError($('agent-error'), `The example tools (tools.json) could not be read: ${error.message}. ` +
      'Type your own tools below.');
    $('tools-box').open = true;
    checkTools();
    return;
  }
  $('all-tools').textContent = `Declare all ${state.catalogue.length} tools`;
  declareAllTools();
  $('preset').append(...PRESETS.map((p) => new Option(p.label, p.id)));
  choosePreset(PRESETS[0].id);
  document.body.dataset.presets = 'ready';
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
    if (file) load(file, { name: file.name });
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
  $('preset').addEventListener('change', (e) => choosePreset(e.target.value));
  $('tools').addEventListener('input', checkTools);
  $('all-tools').addEventListener('click', declareAllTools);
  $('url-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const url = $('url').value.trim();
    if (url) loadUrl(url);
  });
  $('file').addEventListener('change', (e) => {
    const file = e.target.files?.[0];
    if (file) load(file, { name: file.name });
    e.target.value = '';
  });
  $('demo').addEventListener('click', () => loadUrl(DEMO_ARCHIVE_URL.href));
  for (const release of Object.values(RELEASES)) {
    $(release.key).addEventListener('click', () => loadRelease(release));
    if (release.url !== release.defaultUrl) $(release.key).title = `from ${release.url}`;
  }
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
  setupPresets();

  const last = localStorage.getItem(LAST_URL_KEY);
  if (Object.hasOwn(RELEASES, last)) loadRelease(RELEASES[last]);
  else {
    if (last) $('url').value = last === DEMO_ARCHIVE_URL.href ? '' : last;
    loadUrl(last || DEMO_ARCHIVE_URL.href);
  }
}

main();
