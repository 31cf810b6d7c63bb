// Random Needle 3 archives whose greedy reasoning ends within a few tokens, as
// a trained model's does. The makers' engine closes the reasoning only with 32
// steps left (needle3-engine.md section 2; src/agent/agent.c
// reasoning_budget_v3), so the reasoning of a random archive, which never
// picks </think>, would leave every call 29 steps: too few for one call in the
// letters of the synthetic vocabulary. Here the tied embedding's </think> row
// is `factor` times the row of the piece that archive's reasoning writes most
// for the test's own request, so that </think> outscores that piece wherever
// the piece would have come next.
import { denseValues } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import { Model } from '../../js/model.js';

/** The piece the greedy reasoning for `query` over `tools` writes most
 *  often, on a bare session fed the turn as the agent renders it. */
function favouritePiece(model, tools, query) {
  const id = (piece) => model.pieceId(piece);
  const rendered = model.tokenize(`<|im_start|>user\n<tools>${JSON.stringify(tools)}</tools>\n${query}<|im_end|>\n<|im_start|>assistant\n`);
  const session = model.session({ exact: true, sinks: 2 + rendered.indexOf(id('</tools>')) });
  const banned = [4, 8, 9, 12, 13, ...['<think>', '</think>', '<tool_call>', '</tool_call>', '</s>', '<|im_end|>'].map(id)];
  const counts = new Map();
  try {
    let logits = session.feed([id('<s>'), ...rendered, ...model.tokenize('<think>')])[0];
    for (let step = 0; step < 40; step++) {
      for (const b of banned) logits[b] = -Infinity;
      const next = logits.indexOf(Math.max(...logits));
      counts.set(next, (counts.get(next) ?? 0) + 1);
      logits = session.feed([next])[0];
    }
  } finally {
    session.free();
  }
  return [...counts].sort((a, b) => b[1] - a[1])[0][0];
}

/** writeCact3(options) with the </think> row raised over the favourite
 *  piece of the reasoning for `query` over `tools`; a Model. */
export async function shortReasoningModel(options, tools, query, factor = 2) {
  const first = await Model.fromBytes(writeCact3(options), { wasm: 'needle3' });
  const piece = favouritePiece(first, tools, query);
  const think = first.pieceId('</think>');
  first.free();
  const weights = (name, shape) => {
    if (name !== 'embedding') return options.weights?.(name, shape);
    // The embedding is the archive's first tensor (index 0 seeds its values).
    const values = Float32Array.from(denseValues({ ...options, weights: undefined }, name, shape, 0));
    const width = shape[1];
    for (let i = 0; i < width; i++) values[think * width + i] = factor * values[piece * width + i];
    return values;
  };
  return Model.fromBytes(writeCact3({ ...options, weights }), { wasm: 'needle3' });
}
