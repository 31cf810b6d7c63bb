// Type declarations of the public API of needle-wasm (the package entry
// js/index.js, and the agent API of js/agent.js it re-exports). Written by
// hand next to the JS; tests/js/package.test.js type-checks a consumer
// against this file from the packed tarball.

// ---------------------------------------------------------------- errors

/** Engine status codes (NEEDLE_E_* of src/needle.h), the numeric NeedleError codes. */
export declare const STATUS: {
  readonly OK: 0;
  readonly FORMAT: 1;
  readonly NOMEM: 2;
  readonly ARGUMENT: 3;
  readonly INCOMPLETE: 4;
  readonly TOKENIZER: 5;
  readonly CONTEXT: 6;
  readonly SCHEMA: 7;
  readonly ABORTED: 8;
  /** A valid archive this version cannot run yet: a Needle 3 archive loads (inspect, tokenize) but does not run. */
  readonly UNSUPPORTED: 9;
};

export type StatusCode = (typeof STATUS)[keyof typeof STATUS];

/**
 * NeedleError.code: an engine status, or one of the loader, worker and agent codes.
 * STATUS.ARGUMENT is a bad argument, named in the message: an option out of range or misspelt,
 * tools that are no array, a system that is no string, a tool result (or declaration) JSON
 * cannot hold (a BigInt, a cycle, nesting past 256 levels, undefined; the message gives its
 * JSON pointer), ids that are not token ids (detokenize names the index and the value), a call
 * on a freed model or agent. STATUS.ABORTED comes with name 'AbortError': a signal stopped the
 * work, or free() of its agent or model did, in this thread or in a worker. The string codes:
 * - 'HTTP': the server answered with an error status (error.status holds it)
 * - 'NETWORK': the URL could not be fetched and no cached copy exists
 * - 'TRUNCATED' / 'LENGTH': the stream ended early / ran past the announced length
 * - 'READ': a file or Blob could not be read
 * - 'SOURCE': loadModel does not take a source of this type
 * - 'QUOTA': Cache Storage is full (reported in model.source.cacheError, not thrown)
 * - 'WORKER': the model's worker failed or exited
 * - 'ENGINE': the engine module (.wasm) could not be fetched or compiled, or the host cannot run it
 * - 'UNKNOWN_TOOL' / 'TOOL_FAILED': Needle.run met a call with no JS function / a tool that threw
 * - 'OFFLINE': loadNeedle2/3 found this device offline and no cached copy
 * - 'CORS': loadNeedle2/3's cross-origin download was refused by the browser (no CORS headers, or no answer)
 * - 'TIMEOUT': loadNeedle2/3's download stalled for idleTimeoutMs, or ran past timeoutMs
 * - 'INSECURE': loadNeedle2/3 in a page that is not a secure context, which has no crypto.subtle for the digest
 * - 'ENCODING': `needle-wasm fetch` got a compressed response (it asks for the bytes as stored)
 * - 'NOT_NEEDLE2' / 'NOT_NEEDLE3': the archive loadNeedle2/3 (or verifyNeedle2/3) got is another one (error.mismatch)
 */
export type NeedleErrorCode =
  | StatusCode
  | 'HTTP' | 'NETWORK' | 'TRUNCATED' | 'LENGTH' | 'READ' | 'SOURCE' | 'QUOTA'
  | 'WORKER' | 'ENGINE' | 'UNKNOWN_TOOL' | 'TOOL_FAILED'
  | 'OFFLINE' | 'CORS' | 'TIMEOUT' | 'INSECURE' | 'ENCODING' | 'NOT_NEEDLE2' | 'NOT_NEEDLE3';

/** Every error the package throws. name is 'AbortError' when a signal stopped the work. */
export declare class NeedleError extends Error {
  constructor(message: string, code?: NeedleErrorCode);
  code: NeedleErrorCode;
  /** HTTP status, for code 'HTTP'. */
  status?: number;
  /** For code 'NOT_NEEDLE2' / 'NOT_NEEDLE3': the first figure that differs from the model's. */
  mismatch?: ReleaseMismatch;
}

// ---------------------------------------------------------------- loading

/** The built-in demo model (dist/demo.cact): trained by this project on the 18 tools of dist/demo-tools.json; not Needle 2. */
export declare const DEMO_ARCHIVE_URL: URL;

/** The Cache Storage bucket that keeps archives fetched over http(s). */
export declare const ARCHIVE_CACHE: string;

/**
 * Where an archive comes from: a URL (string or URL; in Node also a file path
 * or file: URL), a Request, a Response, a byte stream, a Blob/File, or bytes.
 */
export type ModelSource =
  | string
  | URL
  | Request
  | Response
  | ReadableStream<Uint8Array>
  | Blob
  | ArrayBuffer
  | SharedArrayBuffer
  | ArrayBufferView;

export interface LoadProgress {
  /** Bytes read so far. */
  loaded: number;
  /** Bytes in all, when the source announces it. */
  total: number | undefined;
  /** True once the engine has validated the header and tensor directory. */
  checked: boolean;
}

/** What loadModel uses of a Cache Storage cache (a DOM `Cache` is one); declared here so the
 *  types compile without the dom lib. */
export interface ArchiveCacheStore {
  match(url: string): Promise<Response | undefined>;
  put(url: string, response: Response): Promise<void>;
}

/** A compiled engine module: WebAssembly.Module where the host's types declare it. */
export type EngineModule = typeof globalThis extends { WebAssembly: { Module: abstract new (...args: any[]) => infer M } }
  ? M : object;

export interface LoadOptions {
  /** Called after every chunk copied into wasm memory. */
  onProgress?: (progress: LoadProgress) => void;
  /** Aborts the load (NeedleError named 'AbortError', code STATUS.ABORTED). */
  signal?: AbortSignal;
  /** false: do not use Cache Storage; a Cache: use that one instead of ARCHIVE_CACHE. */
  cache?: false | ArchiveCacheStore;
  /** Byte length of a bare ReadableStream source, for progress and early checks. */
  total?: number;
  /**
   * The engine module: a variant name ('simd', 'nosimd', or 'relaxed' when built), the URL of a
   * module file, or a compiled module. Default: the best shipped variant this host validates.
   */
  wasm?: 'simd' | 'nosimd' | 'relaxed' | 'threads' | (string & {}) | URL | EngineModule;
  /**
   * Threads the engine computes on: 'auto' (default: up to the cores, where SharedArrayBuffer
   * and WebAssembly threads are available: Node, cross-origin-isolated pages) or a count (never
   * more than the cores). Model.threads tells what runs and, if fewer, why.
   */
  threads?: 'auto' | number;
  /** Run the model in a worker (default: true in browser pages, false elsewhere). */
  worker?: boolean;
  /** With worker: hand an ArrayBuffer source over to the worker instead of copying it. */
  transfer?: boolean;
  /** With worker: URL of worker.js, when a bundler or CSP needs it elsewhere. */
  workerUrl?: string | URL;
}

// ---------------------------------------------------------------- Needle 2 and Needle 3 (needle2.js, needle3.js)

/** Where Needle 2 lives: Hugging Face Cactus-Compute/needle2 at the pinned revision 32e9e3a…, needle2.cact. */
export declare const NEEDLE2_URL: string;
/** Where Needle 3 lives: Hugging Face Cactus-Compute/needle3 at the pinned revision b274efc…, needle3.cact. */
export declare const NEEDLE3_URL: string;

/** The figures a released archive is checked against: its bytes, then its shape. */
export interface ReleaseFigures {
  /** Bytes of the archive (Needle 2: 13,737,807; Needle 3: 35,335,380); also the download's cap. */
  size: number;
  /** SHA-256 of the archive at the pinned revision, 64 hex digits; null checks the shape only. */
  sha256: string | null;
  /** The archive's first u32 (Needle 2: 0x05E12A83; Needle 3: 0x05E12A84). */
  tag: number;
  /** Tensor records (405; 581). */
  tensors: number;
  /** CQ group size of every quantised tensor: 128. */
  group: number;
  /** The probe heads, exactly (Needle 2: 'contrastive', 'confidence'; Needle 3: 'confidence'). */
  heads: readonly string[];
  /** Header fields, as Inspection.geometry names them (vocabulary 8192, hidden 512, ...). */
  geometry: { readonly [field: string]: number | readonly number[] };
}
/** ReleaseFigures under its name in 0.1.0. */
export type Needle2Figures = ReleaseFigures;

/** The released Needle 2's figures (frozen). */
export declare const NEEDLE2_FIGURES: Readonly<ReleaseFigures>;
/** The released Needle 3's figures (frozen). */
export declare const NEEDLE3_FIGURES: Readonly<ReleaseFigures>;

/** What differs: what ('size', 'tag', 'sha256', 'tensor count', a geometry field, 'CQ group of <tensor>',
 *  '<kind> head'); stopped: true when more than the expected size arrived (actual: bytes when stopped). */
export interface ReleaseMismatch {
  what: string;
  actual: unknown;
  expected: unknown;
  stopped?: boolean;
}
/** ReleaseMismatch under its name in 0.1.0. */
export type Needle2Mismatch = ReleaseMismatch;

export interface ReleaseOptions extends Omit<LoadOptions, 'onProgress' | 'total' | 'transfer'> {
  /** Called as the archive arrives; total is the expected size. */
  onProgress?: (progress: { loaded: number; total: number }) => void;
  /** Another address of the model (a mirror; in Node also a file path). Default NEEDLE2_URL / NEEDLE3_URL. */
  url?: string | URL;
  /** Figures that replace the model's (shallowly), e.g. { size, sha256 } of another revision. */
  expect?: Partial<ReleaseFigures>;
  /** The whole download's limit in ms (default 600,000: 10 minutes); then code 'TIMEOUT'. */
  timeoutMs?: number;
  /** The longest wait for the next byte in ms (default 30,000); then code 'TIMEOUT'. */
  idleTimeoutMs?: number;
}
export type Needle2Options = ReleaseOptions;
export type Needle3Options = ReleaseOptions;

/**
 * Loads Needle 2 from Hugging Face (progress, Cache Storage so the next visit works offline, a
 * Web Worker in pages), checking the download's size (a hard cap), tag and SHA-256 before the
 * engine sees it, then its shape. Rejects with a NeedleError in plain words: 'OFFLINE', 'CORS',
 * 'NETWORK', 'HTTP' (status 404, 401/403 gated, 5xx), 'TIMEOUT', 'INSECURE' or 'NOT_NEEDLE2' (the
 * file is dropped from the cache), besides loadModel's codes.
 */
export declare function loadNeedle2(options?: ReleaseOptions): Promise<Model | WorkerModel>;
/** Loads Needle 3 as loadNeedle2 loads Needle 2; a wrong file is 'NOT_NEEDLE3'. */
export declare function loadNeedle3(options?: ReleaseOptions): Promise<Model | WorkerModel>;

/** Rejects with 'NOT_NEEDLE2' unless the loaded model has the shape expect describes (default Needle 2's). */
export declare function verifyNeedle2(model: Model | WorkerModel,
  options?: { expect?: Partial<ReleaseFigures>; label?: string }): Promise<void>;
/** Rejects with 'NOT_NEEDLE3' unless the loaded model has the shape expect describes (default Needle 3's). */
export declare function verifyNeedle3(model: Model | WorkerModel,
  options?: { expect?: Partial<ReleaseFigures>; label?: string }): Promise<void>;

/** What a loaded model reports about its source (model.source). */
export interface LoadReport {
  /** Archive size in bytes. */
  size: number;
  /** Short name of the source (URL, path, file name, 'bytes', ...). */
  label: string;
  /** True when a fetched URL was answered from Cache Storage (offline or 304). */
  fromCache: boolean;
  /** Set when the archive loaded but could not be cached (code 'QUOTA'). */
  cacheError?: NeedleError;
}

/** Loads an archive in the calling thread (also in a worker of your own). */
export declare function loadModelInThread(source?: ModelSource, options?: LoadOptions): Promise<Model>;

/**
 * Loads an archive; default source: DEMO_ARCHIVE_URL. In a browser page it
 * runs in a dedicated module Web Worker and resolves to a WorkerModel (every
 * method returns a promise); elsewhere, or with { worker: false }, to a Model.
 */
export declare function loadModel(source: ModelSource | undefined, options: LoadOptions & { worker: false }): Promise<Model>;
export declare function loadModel(source: ModelSource | undefined, options: LoadOptions & { worker: true }): Promise<WorkerModel>;
export declare function loadModel(source?: ModelSource, options?: LoadOptions): Promise<Model | WorkerModel>;

// ---------------------------------------------------------------- models

/** Ids of the special tokens. */
export interface SpecialIds {
  pad: number;
  eos: number;
  bos: number;
  unknown: number;
  imEnd: number;
}

export interface Geometry {
  tensorCount: number;
  codebookLength: number;
  kvWindow: number;
  kvBits: number;
  vocabulary: number;
  hidden: number;
  queryHeads: number;
  kvHeads: number;
  layers: number;
  headDimension: number;
  maximumSequence: number;
  hadamardDimension: number;
  lanes: number;
  engramSlots: number;
  engramSubDimension: number;
  engramTables: number;
  engramTaps: number;
  engramDilation: number;
  orderCount: number;
  siteCount: number;
  ropeTheta: number;
  orders: number[];
  sites: number[];
}

export interface TensorInfo {
  index: number;
  name: string;
  dtype: string;
  shape: number[];
  /** Bits per weight of a quantised tensor, 0 otherwise. */
  bits: number;
  /** Quantisation group size, 0 for unquantised tensors. */
  group: number;
  offset: number;
  bytes: number;
}

export interface Inspection {
  geometry: Geometry;
  tensors: TensorInfo[];
}

export interface SessionOptions {
  /** Sliding KV window in positions (0: the archive's). */
  window?: number;
  /** Attention-sink positions kept at the start of the window. */
  sinks?: number;
  /** Full-precision KV cache instead of the archive's quantised one. */
  exact?: boolean;
}

export interface LogitsOptions extends SessionOptions {
  /** Logits of every position instead of the last only. */
  all?: boolean;
}

export interface SamplingOptions {
  /** 0 (default) decodes greedily. */
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repetitionPenalty?: number;
  seed?: number;
}

export interface GenerateOptions extends SamplingOptions {
  /** Default 128. */
  maxTokens?: number;
  /** Prompt as plain text after BOS instead of the chat format of spec section 7. */
  raw?: boolean;
  /** Stops generation (NeedleError named 'AbortError', code STATUS.ABORTED). */
  signal?: AbortSignal;
  exact?: boolean;
}

/** One generated piece; token is -1 for text flushed at the end. */
export interface GeneratedPiece {
  token: number;
  text: string;
}

/** A model in this thread: every method is synchronous except generate. */
export declare class Model {
  static fromBytes(bytes: Uint8Array, options?: { wasm?: LoadOptions['wasm']; threads?: LoadOptions['threads'] }): Promise<Model>;
  readonly vocabulary: number;
  /** Threads the engine runs on, and why not more (null: as many as asked). */
  readonly threads: { count: number; reason: string | null };
  readonly ids: SpecialIds;
  /** Set by loadModel / loadModelInThread. */
  source?: LoadReport;
  /** One header field by name, e.g. 'layers' or 'orders[0]'. */
  geometry(field: string): number;
  inspect(): Inspection;
  pieceId(text: string): number;
  /** Token ids of text, without BOS. */
  tokenize(text: string): number[];
  detokenize(ids: ArrayLike<number>): string;
  session(options?: SessionOptions): Session;
  logits(ids: ArrayLike<number>, options?: LogitsOptions): Float32Array[];
  /** The contrastive head's 128-float unit vector of text (what tool retrieval compares); throws
   *  STATUS.ARGUMENT when the archive has no such head (the released Needle 3 has none). */
  embed(text: string, options?: { exact?: boolean }): Float32Array;
  /** Prompt ids in the chat format for one user query and no tools. */
  chatIds(prompt: string): number[];
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<GeneratedPiece, void, undefined>;
  /** Highest wasm memory size seen, in bytes. */
  readonly peakMemoryBytes: number;
  /** Frees the model; the promise settles once its engine's thread workers are gone. */
  free(): Promise<void>;
}

/** KV cache and scratch of one conversation. */
export declare class Session {
  constructor(model: Model, options?: SessionOptions);
  readonly position: number;
  /** Logits of the last fed position, or of every position with all. */
  feed(ids: ArrayLike<number>, options?: { all?: boolean }): Float32Array[];
  free(): void;
}

/**
 * A model living in its own worker (browser module Worker or Node
 * worker_threads): Model's methods, each returning a promise. Returned by
 * loadModel in pages or with { worker: true }; a type only, not an export.
 */
export interface WorkerModel {
  readonly vocabulary: number;
  readonly ids: SpecialIds;
  readonly source: LoadReport;
  /** Threads the engine in the worker runs on, and why not more (null: as many as asked). */
  readonly threads: { count: number; reason: string | null };
  /** wasm memory of the worker's engine as of its last reply, in bytes. */
  readonly memory: { bytes: number; peak: number };
  readonly peakMemoryBytes: number;
  inspect(): Promise<Inspection>;
  tokenize(text: string): Promise<number[]>;
  detokenize(ids: ArrayLike<number>): Promise<string>;
  logits(ids: ArrayLike<number>, options?: LogitsOptions): Promise<Float32Array[]>;
  embed(text: string, options?: { exact?: boolean }): Promise<Float32Array>;
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<GeneratedPiece, void, undefined>;
  /** Releases the model and ends its worker. */
  free(): Promise<void>;
  /** Ends the worker at once; pending calls fail. */
  terminate(): void;
  /** An agent in this model's worker (what Needle.create({ model: this }) returns). */
  createAgent(options?: Omit<NeedleOptions, 'model' | 'worker' | 'load'>): Promise<WorkerNeedle>;
}

// ---------------------------------------------------------------- agent

/** A JSON Schema (the subset of spec section 8 constrains generation). */
export type JsonSchema = { [keyword: string]: unknown };

export interface ToolDeclaration {
  name: string;
  description?: string;
  parameters: JsonSchema;
  /** Needle 3: regular expressions matched case-insensitively against a request; when one
   *  matches (and the request has no negation cue), the turn must call a matched tool. */
  triggers?: string[];
}

export interface FunctionCall {
  name: string;
  arguments: { [name: string]: unknown };
}

/** What every turn returns (spec section 8). */
export interface Envelope {
  /** 'respond' when a fed-back tool result drew no further call; an empty call list on a query is a refusal. */
  type: 'call' | 'respond';
  success: boolean;
  error: string | null;
  /** A STATUS code, or Needle 3's 'truncated': the token budget ran out before any call was closed. */
  error_code: number | 'truncated' | null;
  function_calls: FunctionCall[];
  /** Needle 3 only: the calls withheld because their confidence is under 0.1 (function_calls is then empty). */
  suppressed_calls?: FunctionCall[];
  /** Needle 3 only, when calls were made: the tool.field names of string arguments the turn's text does not
   *  contain, and whether that text holds a negating word (no, not, never, ...n't). */
  validation?: { ungrounded: string[]; negation: boolean };
  reasoning: string;
  /** Needle 2: min(confidence head, decode probability), the decode probability exp(mean log p) of the turn's
   *  sampled reasoning and call tokens; null when the archive has no confidence head. Needle 3: the makers'
   *  rule, never null: the smallest probability of a call token among the tokens the engine visits (with no
   *  call token, the geometric mean of the reasoning tokens' probabilities). */
  confidence: number | null;
  /** Needle 3 only: the confidence head's own score (the makers' engine never reads it). */
  confidence_head?: number;
  prefill_tps: number;
  decode_tps: number;
  peak_ram_mb: number;
  /** Present only when there is something to say: on the built-in demo model, one sentence when the agent
   *  declares a tool that is not one of the 18 it was trained on (another name, description or parameters). */
  warnings?: string[];
}

/** Needle.run's result: the last envelope and every tool call it ran. */
export interface RunResult extends Envelope {
  results: { name: string; arguments: { [name: string]: unknown }; result: unknown }[];
}

/** A JS function with its declaration attached by tool(). */
export type ToolFunction<A = any, R = unknown> = ((args: A) => R | Promise<R>) & { tool: ToolDeclaration };

/** Attaches a schema ({ name?, description?, parameters } or a bare JSON Schema) to fn. */
export declare function tool<A = any, R = unknown>(
  fn: (args: A) => R | Promise<R>,
  schema?: { name?: string; description?: string; parameters: JsonSchema; triggers?: string[] } | JsonSchema,
): ToolFunction<A, R>;

/** The inputs of Needle 3's call post-processor (postprocessCalls). */
export interface PostprocessInput {
  /** The declared tools: an array, or its JSON text (kept byte for byte). */
  tools: ToolDeclaration[] | unknown[] | string;
  /** The system text as the engine stores it (its `date:` fact and timestamps blanked). Default ''. */
  system?: string;
  /** The user turn's text. */
  request: string;
  /** The conversation so far, this request last. Default: system + '\n' + request. */
  conversation?: string;
  /** The call list the model wrote, as JSON text (an array is serialised). */
  calls: string | unknown[];
}

/** What the post-processor returns. */
export interface PostprocessResult {
  /** The calls as compact JSON text, exactly as the engine writes it (text that is
   *  not a non-empty JSON array comes back unchanged). */
  calls: string;
  /** A gate fired: the engine withholds the calls (suppressed_calls). */
  withhold: boolean;
  /** A cross-call gate fired (exclusion, negation, reported speech): withholds even a triggered call. */
  strong: boolean;
}

/**
 * Needle 3's deterministic call post-processor alone, with no model loaded: argument
 * repairs, the withholding gates, date resolution and the duplicate drop the makers'
 * engine runs after every call list (docs/needle3.md). Runs in dist/needle3.wasm
 * (options.wasm names another engine source: a variant, a URL or a module).
 * Bad input rejects with a NeedleError (STATUS.ARGUMENT, the member named).
 */
export declare function postprocessCalls(input: PostprocessInput,
  options?: { wasm?: string | URL | EngineModule }): Promise<PostprocessResult>;

export interface NeedleOptions extends SamplingOptions {
  /**
   * A Model (the agent runs in this thread), a WorkerModel (it runs in that
   * worker, sharing its memory), or a source to load (default: the demo
   * archive; the agent then owns the model and free() frees it too).
   */
  model?: Model | WorkerModel | ModelSource;
  /** With a source: load it in a worker (default: true in browser pages, false elsewhere). */
  worker?: boolean;
  /** With a source: loadModel's options (onProgress, signal, wasm, workerUrl, ...). */
  load?: Omit<LoadOptions, 'worker'>;
  /** Tool functions made with tool(), or bare declarations (run() cannot call those). */
  tools?: (ToolFunction | ToolDeclaration)[];
  /** System facts, by convention 'key: value; key: value'. */
  system?: string;
  /** Saved retrieval embeddings (from toolEmbeddings()): reused when the archive and tools are unchanged. */
  toolEmbeddings?: ToolEmbeddings | null;
  /** Exact f32 numerics instead of the default fast mode (int8 kernels and KV cache). */
  exact?: boolean;
  /** How call arguments hold integers a JS number cannot (beyond 2^53): a number as JSON.parse
   *  rounds it (default), a BigInt or its digits as a string (both keep every digit). */
  largeIntegers?: 'number' | 'bigint' | 'string';
  /** Every turn calls at least one tool: the grammar's call array cannot close empty. */
  requireCall?: boolean;
}

/** The contrastive-head embeddings of the declared tools (more than 5 tools). */
export interface ToolEmbeddings {
  /** 16 hex digits over the archive and the tools: saved embeddings stay valid while it matches. */
  fingerprint: string;
  dim: number;
  /** tools x dim values, tool-major. */
  vectors: Float32Array;
}

export interface TokenEvent {
  kind: 'reasoning' | 'call' | 'marker';
  text: string;
}

/** A turn's options. Sampling options given here restart the sampler for this turn from the
 *  agent's options overridden by them (the same seed samples the same turn whatever came
 *  before); the next turn without any restarts the agent's own. */
export interface CompleteOptions extends SamplingOptions {
  /** Default 256. */
  maxNewTokens?: number;
  /** Stops the turn within one step and undoes it: the promise rejects with a NeedleError
   *  named 'AbortError' (code STATUS.ABORTED). */
  signal?: AbortSignal;
  /** 'auto' (default): a string is a query, anything else a tool result. */
  kind?: 'auto' | 'query' | 'tool_result';
  onToken?: (event: TokenEvent) => void;
}

/**
 * The agent: text in, a schema-valid tool call out. A Needle runs in the
 * calling thread; create() returns a WorkerNeedle instead over a WorkerModel,
 * or over a source when worker is true (the default in browser pages).
 */
export declare class Needle {
  static create(options: NeedleOptions & { model: Model }): Promise<Needle>;
  static create(options: NeedleOptions & { model: WorkerModel }): Promise<WorkerNeedle>;
  static create(options: NeedleOptions & { model?: ModelSource; worker: false }): Promise<Needle>;
  static create(options: NeedleOptions & { model?: ModelSource; worker: true }): Promise<WorkerNeedle>;
  static create(options?: NeedleOptions): Promise<Needle | WorkerNeedle>;
  readonly model: Model;
  /** One turn: a query, or (after a call) a tool result. A turn the model could not finish
   *  (a context limit, say) resolves with success false and the error's message and code;
   *  an abort rejects (CompleteOptions.signal); a bad argument throws a NeedleError. */
  complete(text: unknown, options?: CompleteOptions): Promise<Envelope>;
  /** A query, then the JS tools it calls and their results fed back, until a response or maxTurns (default 4). */
  run(query: string, options?: CompleteOptions & { maxTurns?: number }): Promise<RunResult>;
  /** The arguments the model fills for schema from text (the grammar makes it call the tool). */
  extract(text: string, schema: JsonSchema, options?: ExtractOptions): Promise<{ [name: string]: unknown }>;
  /** The tool declarations rendered into the prompt now (at most 5 with retrieval). */
  renderedTools(): ToolDeclaration[];
  /** The tools' retrieval embeddings, or null with at most 5 tools or no contrastive head. */
  toolEmbeddings(): ToolEmbeddings | null;
  /** Whether create() reused the given toolEmbeddings. */
  readonly toolEmbeddingsReused: boolean;
  /** Tokens the last turn prefilled. */
  readonly prefillCount: number;
  /** Starts a new conversation with the same tools and system text. */
  reset(): void;
  /** Releases the agent (and its model when create() loaded it). */
  free(): void;
}

/** extract()'s options: a turn's, and the name and description of the tool it declares. */
export type ExtractOptions = CompleteOptions & { name?: string; description?: string };

/**
 * The agent in a model's worker, driven from the calling thread: Needle's
 * methods. run() executes the JS tool functions in the calling thread (the
 * worker returns each envelope, the results go back as the next turn);
 * onToken receives pieces as the worker produces them; a signal stops the
 * turn within one piece (the promise rejects with an AbortError).
 * prefillCount and renderedTools() answer from the last reply. A type only.
 */
export interface WorkerNeedle {
  readonly model: WorkerModel;
  complete(text: unknown, options?: CompleteOptions): Promise<Envelope>;
  run(query: string, options?: CompleteOptions & { maxTurns?: number }): Promise<RunResult>;
  extract(text: string, schema: JsonSchema, options?: ExtractOptions): Promise<{ [name: string]: unknown }>;
  renderedTools(): ToolDeclaration[];
  toolEmbeddings(): Promise<ToolEmbeddings | null>;
  readonly prefillCount: number;
  reset(): Promise<void>;
  /** Releases the agent in the worker (and the model and worker when create() loaded it). */
  free(): Promise<void>;
}

// ---------------------------------------------------------------- OpenAI shapes (openai.js)
// The request types are wide enough that OpenAI's own ChatCompletionCreateParams
// type-checks as ChatCompletionParams; what the agent cannot map (image parts,
// custom tools, unknown options) is refused at run time with a NeedleError whose
// `param` names the option or the message's JSON pointer ('/messages/3').

/** A message's content: text, or parts (only text parts can be mapped). */
export type ChatContent = string | { type: string; text?: string }[];

/** A tool call as an assistant message in the request carries it. */
export interface ChatToolCallParam {
  id: string;
  type: string;
  function?: { name: string; arguments: string };
}

/** One message: system and developer text are the agent's system facts, user
 *  text a query, tool content (JSON, or text) the result of an assistant's call. */
export interface ChatMessageParam {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | 'function';
  content?: ChatContent | null;
  /** An assistant message's reasoning, as answers carry it (not read: the turn is regenerated). */
  reasoning_content?: string | null;
  name?: string;
  tool_calls?: ChatToolCallParam[];
  tool_call_id?: string;
}

/** A tool in OpenAI's form; the agent declares { name, description, parameters }. */
export interface ChatToolParam {
  type: string;
  function?: { name: string; description?: string; parameters?: JsonSchema; strict?: boolean | null };
}

/** 'none': no tool is declared; 'required': at least one call; a named function: only it, called. */
export type ChatToolChoice = 'auto' | 'none' | 'required' | { type: string; function?: { name: string } };

/**
 * 'text' (default): the agent's answer. 'json_schema': an extraction (Needle.extract), the JSON
 * of the schema's fields as the content; it reads system and user messages only, and no tools
 * (tool_choice 'none' aside). 'json_object' is refused: the grammar writes declared properties only.
 */
export type ChatResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; description?: string; schema?: JsonSchema; strict?: boolean | null } };

export interface ChatCompletionParams {
  messages: ChatMessageParam[];
  /** Any name: answers carry the client's. */
  model?: string;
  tools?: ChatToolParam[] | null;
  tool_choice?: ChatToolChoice | null;
  response_format?: ChatResponseFormat | null;
  /** Default 0 (greedy, the agent's default; OpenAI's is 1), at most 2. */
  temperature?: number | null;
  top_p?: number | null;
  /** 0 to 2^32-1, default 0: the sampler restarts from it at every turn. */
  seed?: number | null;
  /** The turn's token budget, default 256 (max_completion_tokens is the same). */
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  /** Only 1. */
  n?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  /** Aborts the request (NeedleError named 'AbortError'). */
  signal?: AbortSignal;
}

export interface ChatToolCall {
  id: string;
  type: 'function';
  /** arguments: the JSON text the model wrote (it validates against the tool's parameters). */
  function: { name: string; arguments: string };
}

/** prompt_tokens: what the request prefilled (a tools block already cached is not counted again). */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export type ChatFinishReason = 'stop' | 'length' | 'tool_calls';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    /**
     * reasoning_content: the text the model writes before its calls (its reasoning), null when empty.
     * content: null when the turn calls; else the text it wrote (its reasoning, Needle writes no
     * other), or with response_format json_schema the JSON of the fields.
     */
    message: { role: 'assistant'; content: string | null; reasoning_content: string | null; refusal: null; tool_calls?: ChatToolCall[] };
    /** 'length': the turn used its whole budget (the grammar then closed the call at its shortest). */
    finish_reason: ChatFinishReason;
    logprobs: null;
  }[];
  usage: ChatUsage;
  /** The envelope's warnings (Envelope.warnings), when there are any. */
  warnings?: string[];
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  /** Empty in the usage chunk (stream_options.include_usage). */
  choices: {
    index: number;
    /** The first chunk has the role; reasoning streams as reasoning_content; a tool call's first delta
     *  has its index, id, type and name, later ones argument text; a turn that calls nothing sends its
     *  text as content once, before the finish_reason chunk (json_schema: the JSON as it is written). */
    delta: {
      role?: 'assistant';
      content?: string | null;
      reasoning_content?: string;
      tool_calls?: { index: number; id?: string; type?: 'function'; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason: ChatFinishReason | null;
    logprobs: null;
  }[];
  usage?: ChatUsage | null;
  /** On the finish_reason chunk: the envelope's warnings, when there are any. */
  warnings?: string[];
}

/** The chunks of a streamed answer; stopping the iteration early aborts the request. */
export interface ChatCompletionStream extends AsyncIterable<ChatCompletionChunk> {}

export interface ChatModelCard {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
}

export interface OpenAIOptions {
  /** A Model, a WorkerModel, or a source to load (default: the demo archive; free() then frees it). */
  model?: Model | WorkerModel | ModelSource;
  /** The model name answers and /v1/models carry (default: the archive's file name without .cact). */
  name?: string;
  /** With a source: load it in a worker (default: true in browser pages, false elsewhere). */
  worker?: boolean;
  /** With a source: loadModel's options. */
  load?: Omit<LoadOptions, 'worker'>;
  /** Agents kept, one per distinct system text, tools and tool_choice (default 4). */
  maxAgents?: number;
}

export interface OpenAIClient {
  readonly name: string;
  readonly model: Model | WorkerModel;
  readonly chat: {
    readonly completions: {
      create(params: ChatCompletionParams & { stream: true }): Promise<ChatCompletionStream>;
      create(params: ChatCompletionParams & { stream?: false | null }): Promise<ChatCompletion>;
      create(params: ChatCompletionParams): Promise<ChatCompletion | ChatCompletionStream>;
    };
  };
  readonly models: { list(): Promise<{ object: 'list'; data: ChatModelCard[] }> };
  /** Frees the agents, and the model when openai() loaded it. */
  free(): Promise<void>;
}

/**
 * OpenAI's chat.completions over the agent: tools, tool_calls, tool results
 * and streaming chunks in OpenAI's shapes, in this thread or over a worker model.
 */
export declare function openai(options?: OpenAIOptions): Promise<OpenAIClient>;
