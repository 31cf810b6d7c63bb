// node-import.js: imports a Node.js built-in module at run time. The
// specifier is a variable, not a literal, on purpose: bundlers building for
// the browser (Vite, webpack, esbuild) then leave the import alone instead of
// stubbing it or splitting it into a chunk, which a classic-script worker
// bundle (Vite's default worker format) cannot hold. Only Node paths call it.

export const importNode = (name) => import(/* @vite-ignore */ /* webpackIgnore: true */ name);
