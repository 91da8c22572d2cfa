import { z } from 'zod';

/**
 * A question a suspended tool asks a person (`ToolResult.pending(request)`). `kind` is
 * free-form (`input`, `authorization`, `approval`, ...); `expiresAt` is an
 * absolute time in the `Clock` base after which the answer is refused and the
 * tool gets an error result instead.
 *
 * Parse what arrives from outside (an HTTP body) with `Request.parse`; a tool
 * writes one with `ToolResult.pending({ kind, prompt })`, which mints the id.
 *
 * @example
 * ```ts
 * const confirm = defineTool({
 *   name: 'confirm_refund',
 *   description: 'Ask a person to confirm a refund',
 *   parameters: z.object({ amount: z.number() }),
 *   execute: ({ amount }, ctx) =>
 *     ctx.answer?.ok === true ? 'refunded' : ToolResult.pending({ kind: 'approval', prompt: `Refund ${amount}?` }),
 * })
 * const request: Request = Request.parse({ id: 'req_1', kind: 'input', prompt: 'Which account?' })
 * ```
 */
export const Request = z.object({
  id: z.string().min(1),
  kind: z.string().min(1),
  prompt: z.string(),
  data: z.unknown().optional(),
  expiresAt: z.number().finite().optional(),
});
/** See the {@link Request} schema. */
export type Request = z.infer<typeof Request>;

/**
 * The host's answer to a {@link Request}: `ok: false` declines (the tool
 * sees an error result), `data` carries the value asked for.
 *
 * Its `id` is the request's id. Hand it to `supervisor.answer(requestId, answer)`.
 *
 * @example
 * ```ts
 * const yes: Answer = Answer.parse({ id: 'req_1', ok: true, data: { account: 'savings' } })
 * const no: Answer = { id: 'req_1', ok: false, reason: 'not authorised' }
 * ```
 */
export const Answer = z.object({
  id: z.string().min(1),
  ok: z.boolean(),
  data: z.unknown().optional(),
  reason: z.string().optional(),
});
/** See the {@link Answer} schema. */
export type Answer = z.infer<typeof Answer>;
