// errors.js: the package's one error type. Every failure the API reports is
// a NeedleError: `code` is an engine status (STATUS) or one of the string
// codes of index.d.ts; a signal that stopped the work gives name
// 'AbortError' and code STATUS.ABORTED wherever it was caught.

/** An error raised by needle-wasm: `code` says which kind (index.d.ts NeedleErrorCode). */
export class NeedleError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'NeedleError';
    this.code = code;
  }
}

/** Engine status codes (NEEDLE_E_* of src/needle.h). */
export const STATUS = Object.freeze({
  OK: 0, FORMAT: 1, NOMEM: 2, ARGUMENT: 3, INCOMPLETE: 4, TOKENIZER: 5, CONTEXT: 6, SCHEMA: 7,
  ABORTED: 8, UNSUPPORTED: 9,
});

/** The error of work a signal stopped: `what` stopped, and the reason the caller gave, if any. */
export function abortError(what, signal) {
  const reason = signal?.reason;
  if (reason instanceof NeedleError && reason.name === 'AbortError') return reason;
  const said = reason?.message ?? (typeof reason === 'string' ? reason : '');
  const error = new NeedleError(`${what} was aborted${said && !/aborted/i.test(said) ? `: ${said}` : ''}`, STATUS.ABORTED);
  error.name = 'AbortError';
  return error;
}
