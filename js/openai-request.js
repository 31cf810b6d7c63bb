// openai-request.js: an OpenAI chat.completions request, checked and put in
// the agent's terms (agent.js): which agent (system facts, tool declarations,
// whether a call is required), the turns of the conversation, and the
// sampling options. No engine here, so it runs and fails before any work.
//
// response_format { type: 'json_schema' } is an extraction (agent.js
// extract): the agent declares the schema as its one tool and must call it;
// the call's arguments are the answer. It reads one query, so it takes
// system and user messages only, and no tools.
//
// A conversation maps onto the agent's turns as
//   system/developer*  (user+ assistant | tool+ assistant)*  (user+ | tool+)
// user messages are a query, tool messages the results of the assistant's
// calls just before, an assistant message the model's own turn. Anything
// else is refused with a NeedleError (STATUS.ARGUMENT) whose `param` names
// the option or the JSON pointer of the message (`/messages/3`).

import { NeedleError, STATUS } from './errors.js';
import { checkInteger, checkKeys, checkNumber } from './options.js';
import { extractionTool } from './agent.js';
import { jsonText } from './json-text.js';

const PARAMS = ['model', 'messages', 'tools', 'tool_choice', 'response_format', 'temperature', 'top_p', 'seed', 'max_tokens',
  'max_completion_tokens', 'n', 'stream', 'stream_options', 'signal'];
const DEFAULT_MAX_TOKENS = 256; // the agent's default budget of a turn
// Every earlier assistant turn of a request is generated again: this bounds
// the work one request can ask for (and is far past Needle's conversations).
const MAX_MESSAGES = 256;

/** A refusal of the request: `param` names the option or message pointer. */
export function invalid(param, message) {
  const error = new NeedleError(param.startsWith('/') ? `${param}: ${message}` : `option ${param} ${message}`, STATUS.ARGUMENT);
  error.param = param;
  return error;
}

/** Runs an options.js check, naming the option in `param` when it fails. */
function checked(param, check) {
  try {
    return check();
  } catch (error) {
    error.param = param;
    throw error;
  }
}

/** jsonText's fail(): a refusal naming the JSON pointer of the value (`at`, then the pointer under it). */
function refusal(at) {
  return (pointer, problem) => (at + pointer ? invalid(at + pointer, problem) : new NeedleError(`the request ${problem}`, STATUS.ARGUMENT));
}

/** { value } of JSON text, or null when it is not JSON; a value nested too
 *  deep to be written back (jsonText) is refused, naming `at`. */
function parsedJson(text, at) {
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  jsonText(value, refusal(at));
  return { value };
}

/** null means "not given" in OpenAI's request types. */
const given = (value) => (value === null ? undefined : value);

/**
 * The plan of one request: { agent: { system, tools, requireCall }, turns,
 * final, extraction, sampling, maxNewTokens, stream, includeUsage, signal }.
 * turns are the exchanges before the last input ({ input, reply: { calls, at } });
 * an input is { kind: 'query' | 'tool_result', value, at }. extraction: the
 * answer is the call's arguments (response_format json_schema).
 */
export function planRequest(params) {
  if (!params || typeof params !== 'object' || Array.isArray(params)) throw invalid('messages', 'is missing: create() takes { messages, ... }');
  const unknown = Object.keys(params).find((key) => !PARAMS.includes(key));
  if (unknown) checked(unknown, () => checkKeys('chat.completions.create()', params, PARAMS));
  // Later steps write parts of the request as JSON: a BigInt, a cycle or deep nesting is refused here.
  jsonText({ ...params, signal: undefined }, refusal(''));
  const { system, turns, final } = conversationOf(params.messages);
  const choice = choiceOf(given(params.tool_choice), declarationsOf(given(params.tools)));
  const extraction = extractionOf(given(params.response_format));
  if (extraction) {
    if (choice.tools.length) throw invalid('response_format', 'cannot be combined with tools: a turn answers with calls or in the format, not either; leave tools out or set tool_choice "none"');
    if (turns.length) throw invalid(turns[0].reply.at, 'an assistant message with response_format json_schema, which reads one query (system and user messages), not a conversation');
  }
  return {
    agent: { system, ...(extraction ? { tools: [extraction], requireCall: true } : choice) },
    turns, final,
    extraction: !!extraction,
    sampling: samplingOf(params),
    maxNewTokens: maxTokensOf(params),
    ...streamOf(params),
    signal: signalOf(params.signal),
  };
}

/** OpenAI's { type: 'function', function: { name, description, parameters } } as the agent's declarations. */
function declarationsOf(tools = []) {
  if (!Array.isArray(tools)) throw invalid('tools', 'must be an array of { type: "function", function: { name, description, parameters } }');
  return tools.map((tool, i) => {
    const at = `/tools/${i}`;
    const fn = tool?.function;
    if (tool?.type !== 'function' || !fn || typeof fn !== 'object') throw invalid(at, 'must be { type: "function", function: { name, description, parameters } }');
    if (typeof fn.name !== 'string' || !fn.name) throw invalid(`${at}/function/name`, 'must be a non-empty string');
    if (given(fn.description) !== undefined && typeof fn.description !== 'string') throw invalid(`${at}/function/description`, 'must be a string');
    const parameters = given(fn.parameters) ?? { type: 'object', properties: {} }; // OpenAI: omitted means no arguments
    if (typeof parameters !== 'object' || Array.isArray(parameters)) throw invalid(`${at}/function/parameters`, 'must be a JSON Schema object');
    // `strict` needs nothing: every call the grammar lets through validates against its schema.
    // `triggers` (the makers' extension, acted on by Needle 3) goes on to the agent as given.
    return { name: fn.name, ...(fn.description ? { description: fn.description } : {}), parameters,
      ...(given(fn.triggers) !== undefined ? { triggers: fn.triggers } : {}) };
  });
}

/** tool_choice as the agent's tools and requireCall: the grammar is the agent's only switch. */
function choiceOf(choice = 'auto', tools) {
  if (choice === 'none' || (choice === 'auto' && !tools.length)) return { tools: [], requireCall: false }; // no tool, no call
  if (choice === 'auto') return { tools, requireCall: false };
  if (choice === 'required') {
    if (!tools.length) throw invalid('tool_choice', 'is "required" but no tools are declared');
    return { tools, requireCall: true };
  }
  const name = choice?.type === 'function' ? choice.function?.name : undefined;
  if (typeof name !== 'string') {
    throw invalid('tool_choice', `is ${JSON.stringify(choice)}: must be "auto", "none", "required" or { type: "function", function: { name } }`);
  }
  const tool = tools.find((t) => t.name === name);
  if (!tool) throw invalid('tool_choice', `names function "${name}", which tools does not declare`);
  return { tools: [tool], requireCall: true };
}

/** response_format: 'text' (the default) is the agent's answer; 'json_schema' an
 *  extraction, whose tool this returns; 'json_object' has no schema to fill. */
function extractionOf(format = { type: 'text' }) {
  if (!format || typeof format !== 'object' || Array.isArray(format)) throw invalid('response_format', 'must be { type: "text" } or { type: "json_schema", json_schema: { name, schema } }');
  checked('response_format', () => checkKeys('response_format', format, ['type', 'json_schema']));
  if (format.type === 'text') return undefined;
  if (format.type === 'json_object') {
    throw invalid('response_format', 'is { type: "json_object" }, which Needle cannot write: its grammar writes the properties a schema declares, and an object schema without properties admits only {}; give { type: "json_schema", json_schema: { name, schema } }');
  }
  if (format.type !== 'json_schema') throw invalid('response_format', `has type ${JSON.stringify(format.type)}: must be "text" or "json_schema"`);
  const spec = format.json_schema;
  if (!spec || typeof spec !== 'object' || Array.isArray(spec)) throw invalid('response_format', 'json_schema must be { name, schema, description?, strict? }');
  checked('response_format', () => checkKeys('response_format.json_schema', spec, ['name', 'description', 'schema', 'strict']));
  if (typeof spec.name !== 'string' || !spec.name) throw invalid('response_format', 'json_schema.name must be a non-empty string');
  if (given(spec.description) !== undefined && typeof spec.description !== 'string') throw invalid('response_format', 'json_schema.description must be a string');
  const schema = given(spec.schema);
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) throw invalid('response_format', 'json_schema.schema must be a JSON Schema object (the fields to fill)');
  // `strict` needs nothing: the grammar makes every answer validate against the schema.
  return extractionTool(schema, { name: spec.name, description: given(spec.description) });
}

function samplingOf(params) {
  return {
    temperature: checked('temperature', () => checkNumber('temperature', given(params.temperature), { min: 0, max: 2, fallback: 0 })),
    topP: checked('top_p', () => checkNumber('top_p', given(params.top_p), { min: 0, max: 1, minOpen: true, fallback: 1 })),
    seed: checked('seed', () => checkInteger('seed', given(params.seed), { min: 0, max: 0xffffffff, fallback: 0 })),
  };
}

function maxTokensOf(params) {
  const limit = { min: 1, max: 1 << 20 };
  const maxTokens = checked('max_tokens', () => checkInteger('max_tokens', given(params.max_tokens), limit));
  const maxCompletion = checked('max_completion_tokens', () => checkInteger('max_completion_tokens', given(params.max_completion_tokens), limit));
  if (maxTokens !== undefined && maxCompletion !== undefined && maxTokens !== maxCompletion) {
    throw invalid('max_completion_tokens', `is ${maxCompletion} but max_tokens is ${maxTokens}: give one of them`);
  }
  if (given(params.n) !== undefined && params.n !== 1) throw invalid('n', `is ${JSON.stringify(params.n)}: only 1 choice is generated`);
  return maxCompletion ?? maxTokens ?? DEFAULT_MAX_TOKENS;
}

function streamOf(params) {
  const stream = given(params.stream) ?? false;
  if (typeof stream !== 'boolean') throw invalid('stream', `is ${JSON.stringify(stream)}: must be true or false`);
  const options = given(params.stream_options);
  if (options === undefined) return { stream, includeUsage: false };
  if (!stream) throw invalid('stream_options', 'is only allowed with stream: true');
  if (typeof options !== 'object' || Array.isArray(options)) throw invalid('stream_options', 'must be an object { include_usage }');
  checked('stream_options', () => checkKeys('stream_options', options, ['include_usage']));
  const includeUsage = given(options.include_usage) ?? false;
  if (typeof includeUsage !== 'boolean') throw invalid('stream_options', 'include_usage must be true or false');
  return { stream, includeUsage };
}

function signalOf(signal) {
  if (signal === undefined || (typeof signal?.aborted === 'boolean' && typeof signal.addEventListener === 'function')) return signal;
  throw invalid('signal', 'must be an AbortSignal');
}

/** A message's text: a string, or text parts (the only kind the agent reads). */
function textOf(content, at) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalid(`${at}/content`, 'must be a string or an array of text parts');
  return content.map((part, j) => {
    if (part?.type !== 'text' || typeof part.text !== 'string') {
      throw invalid(`${at}/content/${j}`, `is a ${JSON.stringify(part?.type)} part: the agent reads text parts only`);
    }
    return part.text;
  }).join('');
}

/** A tool message's content as the value fed back: its JSON when it is JSON, else the text. */
function resultOf(message, at) {
  const text = textOf(message.content, at);
  const parsed = parsedJson(text, `${at}/content`);
  return parsed ? parsed.value : text;
}

/** An assistant message's tool calls as the agent's function_calls, with their ids. */
function callsOf(message, at) {
  const calls = given(message.tool_calls) ?? [];
  if (!Array.isArray(calls)) throw invalid(`${at}/tool_calls`, 'must be an array');
  return calls.map((call, j) => {
    const here = `${at}/tool_calls/${j}`;
    if (call?.type !== 'function' || typeof call.function?.name !== 'string') throw invalid(here, 'must be { id, type: "function", function: { name, arguments } }');
    const args = typeof call.function.arguments === 'string' ? parsedJson(call.function.arguments, `${here}/function/arguments`)?.value : null;
    if (!args || typeof args !== 'object' || Array.isArray(args)) throw invalid(`${here}/function/arguments`, 'must be a JSON object in a string');
    return { id: call.id, name: call.function.name, arguments: args };
  });
}

/**
 * messages as { system, turns, final }: see the grammar at the top. `input`
 * holds the user or tool messages read since the last assistant message
 * (more may join it); an assistant message closes it into an exchange.
 */
function conversationOf(messages) {
  if (!Array.isArray(messages) || !messages.length) throw invalid('messages', 'must be a non-empty array');
  if (messages.length > MAX_MESSAGES) {
    throw invalid('messages', `has ${messages.length} messages: at most ${MAX_MESSAGES} are taken (every earlier assistant turn is generated again)`);
  }
  const system = [];
  const turns = [];
  let input = null; // the input being read, not yet answered
  messages.forEach((message, i) => {
    const at = `/messages/${i}`;
    if (!message || typeof message !== 'object') throw invalid(at, 'must be a message object');
    const last = turns.at(-1);
    switch (message.role) {
      case 'system':
      case 'developer':
        if (input || turns.length) throw invalid(at, `a ${message.role} message after the conversation started: the agent's system facts are fixed before its first turn`);
        system.push(textOf(message.content, at));
        break;
      case 'user':
        if (input?.kind === 'tool_result') throw invalid(at, 'a user message right after tool results: the model answers the results first');
        if (input) input.value += `\n${textOf(message.content, at)}`; // consecutive user messages are one query
        else input = { kind: 'query', value: textOf(message.content, at), at };
        break;
      case 'tool': {
        const answered = input?.kind === 'tool_result' ? input : null;
        const calls = answered ? answered.calls : !input && last?.reply.calls;
        if (!calls?.length) throw invalid(at, 'a tool message without an assistant message with tool_calls before it');
        const index = calls.findIndex((call) => call.id === message.tool_call_id);
        if (index < 0) throw invalid(`${at}/tool_call_id`, `is ${JSON.stringify(message.tool_call_id)}, which is not the id of a tool call of the assistant message before`);
        input = answered ?? { kind: 'tool_result', results: [], calls, at, callsAt: last.reply.at };
        if (input.results[index] !== undefined) throw invalid(`${at}/tool_call_id`, `answers tool call ${JSON.stringify(message.tool_call_id)} a second time`);
        input.results[index] = { value: resultOf(message, at) };
        break;
      }
      case 'assistant':
        if (!input) throw invalid(at, `an assistant message with no user or tool message before it to answer`);
        turns.push({ input: finished(input), reply: { calls: callsOf(message, at), at } });
        input = null;
        break;
      default:
        throw invalid(`${at}/role`, `is ${JSON.stringify(message.role)}: must be "system", "developer", "user", "assistant" or "tool"`);
    }
  });
  if (!input) throw invalid(`/messages/${messages.length - 1}`, 'the last message is the assistant\'s: there is no user or tool message to answer');
  return { system: system.join('\n'), turns, final: finished(input) };
}

/** An input read to its end as { kind, value, at }: a run of tool messages is
 *  one tool-result turn, every call answered, the results in call order. */
function finished(input) {
  const { kind, value, at } = input;
  if (kind === 'query') return { kind, value, at };
  const missing = input.calls.findIndex((_, i) => input.results[i] === undefined);
  if (missing >= 0) {
    throw invalid(`${input.callsAt}/tool_calls/${missing}`, `tool call ${JSON.stringify(input.calls[missing].id)} has no tool message with its result`);
  }
  // One call feeds its result back, several the array of results (as Needle.run does).
  const values = input.results.map((r) => r.value);
  return { kind, value: values.length === 1 ? values[0] : values, at };
}
