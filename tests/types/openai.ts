// The facade's types (js/index.d.ts) against the `openai` package's: an app's
// OpenAI request types are taken as they are, and the answers, chunks and
// messages of the facade are OpenAI's types. Type-checked by
// tests/js/openai-types.test.js (tsc --noEmit), never run.
import type OpenAI from 'openai';
import { openai, type ChatCompletion, type ChatCompletionChunk, type ChatCompletionParams } from '../../js/index.js';

export async function check(): Promise<void> {
  const client = await openai();
  const tools: OpenAI.ChatCompletionTool[] = [{
    type: 'function',
    function: { name: 'set_timer', description: 'Start a timer.', parameters: { type: 'object', properties: { minutes: { type: 'integer' } } } },
  }];
  // OpenAI's request types, from an app written against the cloud, go in unchanged.
  const request: OpenAI.ChatCompletionCreateParamsNonStreaming = {
    model: 'demo', messages: [{ role: 'system', content: 'date: 2026-07-21' }, { role: 'user', content: 'a timer for 10 minutes' }],
    tools, tool_choice: 'auto', temperature: 0, seed: 1, max_tokens: 128,
  };
  const answer: ChatCompletion = await client.chat.completions.create(request);
  // The answer is OpenAI's ChatCompletion, and its message goes back into OpenAI's messages.
  const theirs: OpenAI.ChatCompletion = answer;
  const message: OpenAI.ChatCompletionMessage = theirs.choices[0].message;
  const messages: OpenAI.ChatCompletionMessageParam[] = [...request.messages, answer.choices[0].message];
  for (const call of message.tool_calls ?? []) {
    if (call.type === 'function') messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ ok: true, name: call.function.name }) });
  }
  const next: ChatCompletion = await client.chat.completions.create({ ...request, messages });
  // The reasoning, and the warnings of the demo model given tools it was not trained on.
  const reasoning: string | null = next.choices[0].message.reasoning_content;
  const warnings: string[] | undefined = next.warnings;
  void reasoning, warnings;
  // OpenAI's json_schema response format, from an app written against the cloud, goes in unchanged.
  const extraction: OpenAI.ChatCompletionCreateParamsNonStreaming = {
    model: 'demo', messages: [{ role: 'user', content: 'the weather in Paris' }],
    response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: { type: 'object', properties: { city: { type: 'string' } } }, strict: true } },
  };
  const fields: OpenAI.ChatCompletion = await client.chat.completions.create(extraction);
  void fields;
  // Streaming: OpenAI's streaming params in, OpenAI's chunks out.
  const streaming: OpenAI.ChatCompletionCreateParamsStreaming = { ...request, stream: true, stream_options: { include_usage: true } };
  for await (const chunk of await client.chat.completions.create(streaming)) {
    const ours: ChatCompletionChunk = chunk;
    const asTheirs: OpenAI.ChatCompletionChunk = ours;
    void asTheirs.choices[0]?.delta.tool_calls?.[0]?.function?.arguments;
    void ours.choices[0]?.delta.reasoning_content;
  }
  // The facade's own params type, written by hand, is an OpenAI request too.
  const params: ChatCompletionParams = { messages: [{ role: 'user', content: 'hello' }], tool_choice: { type: 'function', function: { name: 'set_timer' } }, tools };
  const general: OpenAI.ChatCompletion | AsyncIterable<OpenAI.ChatCompletionChunk> = await client.chat.completions.create(params);
  void general;
  // @ts-expect-error: a stream is not a whole answer
  const wrong: ChatCompletion = await client.chat.completions.create(streaming);
  void wrong;
  await client.free();
}
