/**
 * @troupe/otel — OpenTelemetry traces of a Troupe supervisor: its events as
 * GenAI-convention spans, made on the supervisor thread, parented under the
 * host's active span.
 */

export { CONVENTIONS_VERSION, GenAi, GenAiOperation, TroupeAttr, TroupeEvent } from './Conventions.js';
export { type Instrumentation, type InstrumentOptions, instrument, TRACER_NAME } from './instrument.js';
