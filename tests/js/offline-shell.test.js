// The demo page works offline only if its service worker precaches every
// module the page, its model worker and its thread workers import: walks
// the import graph from those entry points and checks web/sw.js's SHELL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const WEB = new URL('../../web/', import.meta.url);
const ENTRIES = ['app.js', '../js/worker.js', '../js/thread-worker.js'];

/** Relative module specifiers of a file: static imports and re-exports, and dynamic import('...'). */
function specifiers(file) {
  const text = readFileSync(file, 'utf8');
  const found = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s*'(\.[^']+)'/g), ...text.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g)];
  return found.map((m) => m[1]);
}

function graph() {
  const seen = new Set();
  const visit = (url) => {
    if (seen.has(url.href)) return;
    seen.add(url.href);
    for (const spec of specifiers(fileURLToPath(url))) visit(new URL(spec, url));
  };
  for (const entry of ENTRIES) visit(new URL(entry, WEB));
  return [...seen];
}

test('the service worker precaches every module the page and its workers import', () => {
  const sw = readFileSync(new URL('sw.js', WEB), 'utf8');
  const shell = sw.slice(sw.indexOf('const SHELL = ['), sw.indexOf('].map(')).match(/'[^']+'/g).map((s) => new URL(s.slice(1, -1), WEB).href);
  const modules = graph();
  assert.ok(modules.length > 15, `only ${modules.length} modules found: the walk is broken`);
  const root = new URL('..', WEB).href;
  assert.deepEqual(modules.filter((m) => !shell.includes(m)).map((m) => m.slice(root.length)), []);
});
