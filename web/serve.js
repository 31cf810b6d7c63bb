#!/usr/bin/env node
// serve.js: the dev server behind `npm start` (node:http only). Builds the
// engine and demo archive when they are missing, then serves web/ at /, and
// the repo's js/ and dist/ at /js and /dist, on localhost:PORT (default
// 8080), with the cross-origin isolation headers (COOP/COEP), ETags and
// Range-free static files. Paths cannot leave those three folders.

import { createServer } from 'node:http';
import { createReadStream, existsSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { join, normalize, sep, extname } from 'node:path';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MOUNTS = { '/js/': join(ROOT, 'js'), '/dist/': join(ROOT, 'dist'), '/': join(ROOT, 'web') };
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.webmanifest': 'application/manifest+json',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.wasm': 'application/wasm', '.cact': 'application/octet-stream',
  '.txt': 'text/plain; charset=utf-8',
};
const SECURITY = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
  'x-content-type-options': 'nosniff',
};

/** The file a URL path names, or null when it leaves its mount. */
export function resolvePath(urlPath) {
  let path;
  try { path = decodeURIComponent(urlPath.split('?')[0]); } catch { return null; }
  if (path.includes('\0')) return null;
  if (path.endsWith('/')) path += 'index.html';
  for (const [prefix, dir] of Object.entries(MOUNTS)) {
    if (!path.startsWith(prefix)) continue;
    const file = normalize(join(dir, path.slice(prefix.length)));
    return file.startsWith(dir + sep) ? file : null;
  }
  return null;
}

/** The service worker, with its cache version set to a hash of the app
 *  shell, so that any change to the app makes browsers install a new one. */
async function serviceWorker() {
  const hash = createHash('sha256');
  for (const folder of ['web', 'js']) {
    for (const name of (await readdir(join(ROOT, folder))).sort()) {
      hash.update(await readFile(join(ROOT, folder, name)).catch(() => ''));
    }
  }
  for (const name of (await readdir(join(ROOT, 'dist')).catch(() => [])).filter((n) => n.endsWith('.wasm')).sort()) {
    hash.update(`${name}:${(await stat(join(ROOT, 'dist', name))).mtimeMs}`);
  }
  const text = await readFile(join(ROOT, 'web', 'sw.js'), 'utf8');
  return text.replace(/const BUILD = '[^']*';/, `const BUILD = '${hash.digest('hex').slice(0, 12)}';`);
}

function send(res, status, body, headers = {}) {
  res.writeHead(status, { ...SECURITY, 'content-type': 'text/plain; charset=utf-8', ...headers });
  res.end(body);
}

async function handle(req, res) {
  // A path, not "//x" or "/\\x", which URL parsers read as a host (new URL throws for "//").
  if (!/^\/(?![/\\])/.test(req.url)) return send(res, 400, 'bad request target\n');
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n', { allow: 'GET, HEAD' });
  const file = resolvePath(new URL(req.url, 'http://localhost').pathname);
  if (!file) return send(res, 403, 'forbidden\n');
  const info = await stat(file).catch(() => null);
  if (!info?.isFile()) return send(res, 404, 'not found\n');
  const type = TYPES[extname(file)] ?? 'application/octet-stream';
  if (file === join(ROOT, 'web', 'sw.js')) {
    const body = await serviceWorker();
    return send(res, 200, req.method === 'HEAD' ? '' : body, { 'content-type': type, 'cache-control': 'no-cache' });
  }
  const etag = `"${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`;
  const headers = {
    ...SECURITY, 'content-type': type, etag, 'last-modified': info.mtime.toUTCString(),
    'cache-control': 'no-cache', // always revalidate: cheap 304s, never stale
  };
  if (req.headers['if-none-match'] === etag) {
    res.writeHead(304, headers);
    return res.end();
  }
  res.writeHead(200, { ...headers, 'content-length': info.size });
  if (req.method === 'HEAD') return res.end();
  createReadStream(file).on('error', () => res.destroy()).pipe(res);
}

/** Runs build.sh when the engine or the demo archive is missing. */
function buildIfNeeded() {
  if (existsSync(join(ROOT, 'dist', 'needle.wasm')) && existsSync(join(ROOT, 'dist', 'demo.cact'))) return;
  console.log('needle-wasm: building dist/ (first run) ...');
  const result = spawnSync('bash', [join(ROOT, 'build.sh')], { cwd: ROOT, stdio: 'inherit' });
  if (result.status !== 0) console.error('needle-wasm: the build failed; serving what exists (the page will show the error)');
}

/** Starts the server; resolves with { server, url }. port 0 picks a free one. */
export function startServer({ port = Number(process.env.PORT ?? 8080), host = '127.0.0.1' } = {}) {
  const server = createServer((req, res) => {
    handle(req, res).catch((error) => send(res, 500, `${error.message}\n`));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const address = server.address();
      resolve({ server, url: `http://localhost:${address.port}/` });
    });
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === (await import('node:fs')).realpathSync(process.argv[1])) {
  if (!process.argv.includes('--no-build')) buildIfNeeded();
  startServer().then(
    ({ url }) => console.log(`needle-wasm demo: ${url}  (Ctrl-C to stop)`),
    (error) => { console.error(`needle-wasm: cannot serve: ${error.message}`); process.exitCode = 1; },
  );
}
