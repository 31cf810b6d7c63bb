// The float64 reference implementation of Needle 2 (the test oracle), in one
// import: readArchive (archive.js), referenceForward (model.js) and
// referenceHeads (heads.js). Written from spec needle2-model.md; test code only.

export { readArchive } from './archive.js';
export { referenceForward } from './model.js';
export { referenceHeads } from './heads.js';
