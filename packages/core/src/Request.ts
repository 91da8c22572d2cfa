import { z } from 'zod';

/**
 * A question a suspended tool asks a person (toolnexus `Request`). `kind` is
 * free-form (`input`, `authorization`, `approval`, ...); `expiresAt` is an
 * absolute time in the `Clock` base after which the answer is refused and the
 * tool gets an error result instead.
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
 */
export const Answer = z.object({
  id: z.string().min(1),
  ok: z.boolean(),
  data: z.unknown().optional(),
  reason: z.string().optional(),
});
/** See the {@link Answer} schema. */
export type Answer = z.infer<typeof Answer>;
