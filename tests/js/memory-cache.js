// An in-memory stand-in for a Cache Storage Cache (Node has none), for the
// loader's cache tests (load.test.js, needle2.test.js).
export function memoryCache() {
  const entries = new Map();
  return {
    entries,
    async match(url) {
      const hit = entries.get(String(url));
      return hit && new Response(hit.body, { status: 200, headers: hit.headers });
    },
    async put(url, response) {
      entries.set(String(url), { body: new Uint8Array(await response.arrayBuffer()), headers: [...response.headers] });
    },
    async delete(url) { return entries.delete(String(url)); },
  };
}
