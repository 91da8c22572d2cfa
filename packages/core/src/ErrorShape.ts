import { z } from 'zod';
import {
  BackpressureError,
  CancelledError,
  type CancelReason,
  ClosedError,
  type ErrorCode,
  InvalidArgumentError,
  isTroupeError,
  ToolTimeoutError,
  TroupeError,
  WorkerCrashedError,
} from './TroupeError.js';

/**
 * The checked shape an error takes to cross a thread: structured clone keeps
 * only `message`, `name` and `stack` of an `Error`, so class identity, `code`
 * and class fields travel here explicitly.
 */
export interface ErrorShape {
  readonly name: string;
  readonly message: string;
  readonly code?: string | undefined;
  readonly stack?: string | undefined;
  readonly data?: Record<string, unknown> | undefined;
  readonly cause?: ErrorShape | undefined;
}

/** zod schema of {@link ErrorShape}; used where a shape arrives from another thread. */
export const ErrorShape: z.ZodType<ErrorShape> = z.lazy(() =>
  z.object({
    name: z.string(),
    message: z.string(),
    code: z.string().optional(),
    stack: z.string().optional(),
    data: z.record(z.string(), z.unknown()).optional(),
    cause: ErrorShape.optional(),
  }),
);

const MAX_CAUSE_DEPTH = 4;

/** Encode any thrown value as an {@link ErrorShape}. Never throws. */
export function encodeError(error: unknown, depth = 0): ErrorShape {
  if (error instanceof Error) {
    const shape: {
      name: string;
      message: string;
      code?: string;
      stack?: string;
      data?: Record<string, unknown>;
      cause?: ErrorShape;
    } = { name: error.name, message: error.message };
    if (error.stack !== undefined) shape.stack = error.stack;
    if (isTroupeError(error)) {
      shape.code = error.code;
      const data = error.toData();
      if (data !== undefined) shape.data = data;
    } else if (typeof (error as { code?: unknown }).code === 'string') {
      shape.code = (error as unknown as { code: string }).code;
    }
    if (error.cause !== undefined && depth < MAX_CAUSE_DEPTH) shape.cause = encodeError(error.cause, depth + 1);
    return shape;
  }
  let message: string;
  try {
    message = typeof error === 'string' ? error : (JSON.stringify(error) ?? String(error));
  } catch {
    message = String(error);
  }
  return { name: 'Error', message };
}

type Rebuild = (shape: ErrorShape) => Error;

const num = (v: unknown, fallback: number): number => (typeof v === 'number' ? v : fallback);

const REBUILD: Record<string, Rebuild> = {
  TroupeError: (s) => new TroupeError(s.message, { code: s.code as ErrorCode }),
  InvalidArgumentError: (s) => new InvalidArgumentError(s.message, { code: s.code as ErrorCode }),
  CancelledError: (s) => new CancelledError((s.data?.reason as CancelReason | undefined) ?? 'user', s.message),
  ToolTimeoutError: (s) =>
    new ToolTimeoutError(String(s.data?.toolName ?? 'unknown'), num(s.data?.timeoutMs, 0), s.data?.forced === true),
  ClosedError: (s) => new ClosedError(s.message),
  WorkerCrashedError: (s) =>
    new WorkerCrashedError(s.message, typeof s.data?.exitCode === 'number' ? s.data.exitCode : null),
  BackpressureError: (s) => new BackpressureError(s.message, num(s.data?.limit, 0)),
  // @troupe/openai's error (core cannot import it): a TroupeError that keeps its name,
  // code and fields (status, attempts, retryAfterMs, serverCode), and passes them on at the next hop.
  ModelError: (s) => {
    const error = new TroupeError(s.message, { code: s.code as ErrorCode });
    // Own keys as data: a `__proto__` key (a shape from another thread may carry one)
    // would set the error's prototype through Object.assign.
    const data: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(s.data ?? {})) if (key !== '__proto__') data[key] = value;
    Object.assign(error, data);
    Object.defineProperty(error, 'name', { value: 'ModelError' });
    Object.defineProperty(error, 'toData', { value: () => data });
    return error;
  },
};

/**
 * Rebuild an error from its shape as the same class when it is one of
 * Troupe's, otherwise as a plain `Error` with the original name, message,
 * code and stack.
 */
export function decodeError(shape: ErrorShape): Error {
  // Own entries only: a name such as "constructor" or "toString" (a shape from another
  // thread names what it likes) would find Object.prototype's methods.
  const rebuild = Object.hasOwn(REBUILD, shape.name) ? REBUILD[shape.name] : undefined;
  let error: Error;
  if (rebuild !== undefined && (shape.name === 'TroupeError' || shape.code !== undefined || shape.data !== undefined)) {
    error = rebuild(shape);
    // The rebuilt message must be the original, even where the constructor composes one.
    if (error.message !== shape.message) Object.defineProperty(error, 'message', { value: shape.message });
  } else {
    error = new Error(shape.message);
    error.name = shape.name;
    if (shape.code !== undefined) Object.defineProperty(error, 'code', { value: shape.code, enumerable: true });
  }
  if (shape.stack !== undefined) Object.defineProperty(error, 'stack', { value: shape.stack, configurable: true });
  if (shape.cause !== undefined) Object.defineProperty(error, 'cause', { value: decodeError(shape.cause) });
  return error;
}
