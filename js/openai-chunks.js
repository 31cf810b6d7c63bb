// openai-chunks.js: one agent turn as OpenAI's chat.completion.chunk objects,
// and chunks folded back into a chat.completion, so the streamed and the
// whole answer are one code path. The agent streams its reasoning and its
// call array as text pieces (agent.js onToken). The reasoning streams as
// `reasoning_content` (the field of servers that expose reasoning); a turn
// that calls nothing has no other text, so its reasoning is its content too,
// sent once at the end (whether a call follows is unknown until then). The
// call array is the compact [{"name":..,"arguments":{..}},..] the grammar
// allows (name first), so a small scanner cuts it into OpenAI's tool_calls
// deltas: each call's id and name once its name is written, then its
// arguments text as it arrives (the model's own text, so `arguments` keeps
// every digit it wrote). In an extraction (response_format json_schema) the
// first call's arguments text is the content instead, and no call is shown.
// Needle 3's engine post-processes the calls after the turn (it repairs,
// dedupes or withholds them: the envelope's function_calls), so for it the
// calls are sent at the end, from the envelope, as whole tool_calls.

/**
 * Cuts the call array's text into events as it streams in:
 * { index, name } when a call's name is complete, { index, arguments } for
 * each run of its arguments text. Depth 1 is the array, 2 a call object,
 * 3 and more its arguments value (always an object: parameters are object schemas).
 */
export class CallScanner {
  constructor() {
    this.depth = 0;
    this.index = -1;
    this.inString = false;
    this.escaped = false;
    this.expectKey = false; // at depth 2: the next string is a key
    this.key = '';
    this.raw = ''; // a string at depth 2 as written, quotes included
  }

  push(text) {
    const events = [];
    let args = '';
    const flush = () => {
      if (args) events.push({ index: this.index, arguments: args });
      args = '';
    };
    for (const c of text) {
      if (this.depth >= 3 || (this.depth === 2 && !this.inString && c === '{')) args += c;
      if (this.inString) {
        if (this.depth === 2) this.raw += c;
        if (this.escaped) this.escaped = false;
        else if (c === '\\') this.escaped = true;
        else if (c === '"') {
          this.inString = false;
          if (this.depth === 2) this.endString(events, flush);
        }
      } else if (c === '"') {
        this.inString = true;
        this.raw = c;
      } else if (c === '{' || c === '[') {
        if (this.depth === 1) {
          flush();
          this.index++;
          this.expectKey = true;
        }
        this.depth++;
      } else if (c === '}' || c === ']') {
        this.depth--;
      } else if (this.depth === 2) {
        if (c === ',') this.expectKey = true;
        else if (c === ':') this.expectKey = false;
      }
    }
    flush();
    return events;
  }

  endString(events, flush) {
    const value = JSON.parse(this.raw);
    if (this.expectKey) this.key = value;
    else if (this.key === 'name') {
      flush();
      events.push({ index: this.index, name: value });
    }
  }
}

/** A random id such as OpenAI's (`chatcmpl-…`, `call_…`). */
export function randomId(prefix, bytes = 12) {
  const data = crypto.getRandomValues(new Uint8Array(bytes));
  return prefix + Array.from(data, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * The chunks of one turn. start() is the role chunk, piece() turns an agent
 * piece into reasoning, content or tool_calls chunks, finish() gives the last
 * chunks (the text of a turn that called nothing, then finish_reason) and,
 * with includeUsage, the usage chunk. extraction: the first call's arguments are the content.
 */
export class TurnChunks {
  constructor({ model, includeUsage, maxNewTokens, extraction = false, callsAtEnd = false }) {
    this.head = { id: randomId('chatcmpl-'), object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model };
    this.includeUsage = includeUsage;
    this.maxNewTokens = maxNewTokens;
    this.extraction = extraction;
    this.callsAtEnd = callsAtEnd;
    this.reasoning = ''; // streamed so far: the content of a turn that calls nothing
    this.scanner = new CallScanner();
    this.calls = []; // index -> true once its id and name were sent
    this.waiting = []; // index -> arguments text that came before the name
    this.tokens = 1; // pieces streamed, and the token that ends the call array
  }

  chunk(delta, finishReason = null) {
    return {
      ...this.head,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(this.includeUsage ? { usage: null } : {}), // OpenAI sends usage: null until the usage chunk
    };
  }

  start() { return [this.chunk({ role: 'assistant', content: '' })]; }

  piece({ kind, text }) {
    if (kind === 'marker') return []; // "</think>\n<tool_call>": forced, not the model's words
    this.tokens++; // one sampled token per piece
    if (kind === 'reasoning') {
      this.reasoning += text;
      return [this.chunk({ reasoning_content: text })];
    }
    if (this.callsAtEnd) return [];
    const events = this.scanner.push(text);
    if (this.extraction) return events.filter((e) => e.index === 0 && e.arguments).map((e) => this.chunk({ content: e.arguments }));
    return events.flatMap((event) => this.callChunks(event));
  }

  callChunks({ index, name, arguments: text }) {
    if (name !== undefined) {
      this.calls[index] = true;
      const header = this.chunk({ tool_calls: [{ index, id: randomId('call_'), type: 'function', function: { name, arguments: '' } }] });
      const early = this.waiting[index];
      return early ? [header, ...this.callChunks({ index, arguments: early })] : [header];
    }
    if (!this.calls[index]) { // a name always comes first in the grammar's output; kept safe anyway
      this.waiting[index] = (this.waiting[index] ?? '') + text;
      return [];
    }
    this.waiting[index] = undefined;
    return [this.chunk({ tool_calls: [{ index, function: { arguments: text } }] })];
  }

  /** The envelope's calls as whole tool_calls chunks (callsAtEnd). */
  envelopeCalls(calls) {
    const texts = calls.map((c) => JSON.stringify(c.arguments));
    if (this.extraction) return texts.length ? [this.chunk({ content: texts[0] })] : [];
    return calls.flatMap(({ name }, index) =>
      this.callChunks({ index, name }).concat(this.callChunks({ index, arguments: texts[index] })));
  }

  /** The last chunks. promptTokens: what the request prefilled. completion_tokens
   *  counts the pieces streamed and the call's end token, a lower bound of the tokens
   *  generated (the envelope has no count); 'length' once it reaches the budget, where
   *  the grammar closed the call at its shortest. warnings: the envelope's (demo-model.js),
   *  a top-level field of the finish_reason chunk. calls: the envelope's function_calls. */
  finish({ promptTokens, warnings, calls: envelopeCalls }) {
    const sent = this.callsAtEnd ? this.envelopeCalls(envelopeCalls) : [];
    const completion = this.tokens;
    const calls = this.calls.length > 0;
    const reason = completion >= this.maxNewTokens ? 'length' : calls ? 'tool_calls' : 'stop';
    const usage = { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
    const text = !calls && !this.extraction && this.reasoning ? [this.chunk({ content: this.reasoning })] : [];
    const last = [...sent, ...text, { ...this.chunk({}, reason), ...(warnings?.length ? { warnings } : {}) }];
    return this.includeUsage ? [...last, { ...this.head, choices: [], usage }] : last;
  }
}

/** Chunks folded into the chat.completion they stream. */
export function foldChunks(chunks) {
  let content = '';
  let reasoning = '';
  let finishReason = null;
  let usage;
  let warnings;
  const calls = [];
  for (const chunk of chunks) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.warnings) warnings = chunk.warnings;
    for (const { delta, finish_reason: reason } of chunk.choices) {
      content += delta.content ?? '';
      reasoning += delta.reasoning_content ?? '';
      for (const { index, id, function: fn } of delta.tool_calls ?? []) {
        const call = (calls[index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (id) call.id = id;
        if (fn?.name) call.function.name = fn.name;
        call.function.arguments += fn?.arguments ?? '';
      }
      finishReason = reason ?? finishReason;
    }
  }
  const { id, created, model } = chunks[0];
  const message = {
    role: 'assistant', content: content || null, reasoning_content: reasoning || null, refusal: null,
    ...(calls.length ? { tool_calls: calls } : {}),
  };
  return {
    id, object: 'chat.completion', created, model,
    choices: [{ index: 0, message, finish_reason: finishReason, logprobs: null }],
    ...(usage ? { usage } : {}),
    ...(warnings ? { warnings } : {}),
  };
}
