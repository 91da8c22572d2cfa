// The worker side of the host-channel fuzz: posts generated messages of every
// shape on the port it was given, with known-good calls mixed in, and counts
// the replies it gets back.
import { MessageChannel, type MessagePort, parentPort, type TransferListItem, workerData } from 'node:worker_threads';
import { HostOp } from '@troupe/core/internal';
import { anyMessage, draw } from '../fixtures/agents/hostileShapes.js';

interface FuzzData {
  readonly port: MessagePort;
  readonly capability: string;
  readonly stale: string;
  readonly seed: number;
  readonly count: number;
}

/** What the worker tells the test once it has posted everything. */
export interface FuzzReport {
  readonly sent: number;
  /** Messages that could not be posted (not cloneable here): not counted in `sent`. */
  readonly unsendable: number;
  /** Messages a reply is owed for (an array with a positive integer seq). */
  readonly expectReplies: number;
  /** toolCallIds of well-formed approval calls that must be served. */
  readonly approvals: readonly string[];
  /** Markers of well-formed telemetry events that must be served. */
  readonly markers: readonly string[];
}

const data = workerData as FuzzData;
const port = data.port;
let replies = 0;
let expectReplies = 0;
let askedForReplies = false;
port.on('message', () => {
  replies++;
  maybeReport();
});

function maybeReport(): void {
  if (askedForReplies && replies >= expectReplies) {
    parentPort?.postMessage({ replies });
    askedForReplies = false;
  }
}

parentPort?.on('message', (m: unknown) => {
  if (m === 'replies?') {
    askedForReplies = true;
    maybeReport();
  }
});

const owesReply = (m: unknown): boolean => Array.isArray(m) && Number.isSafeInteger(m[1]) && (m[1] as number) > 0;

const messages = draw(anyMessage({ capability: data.capability, stale: data.stale }), data.count, data.seed);
const approvals: string[] = [];
const markers: string[] = [];
let sent = 0;
let unsendable = 0;
let seq = 10_000_000;

function post(m: unknown, transfer: readonly TransferListItem[] = []): void {
  try {
    port.postMessage(m, transfer);
  } catch {
    unsendable++;
    return;
  }
  sent++;
  if (owesReply(m)) expectReplies++;
}

for (let i = 0; i < messages.length; i++) {
  post(messages[i]);
  // Every tenth message, a call that must be served, so the fuzz shows the channel still works.
  if (i % 10 === 0) {
    const id = `valid-${i}`;
    approvals.push(id);
    post([HostOp.approve, ++seq, data.capability, { toolName: 'bait', toolCallId: id, arguments: { i } }]);
    markers.push(id);
    post([HostOp.events, 0, data.capability, [['t', 'agent.turn', { turn: i, marker: id }]]]);
  }
  // Every 100th, a well-formed held result and a well-formed checkpoint.
  if (i % 100 === 0) {
    post([HostOp.holding, 0, data.capability, ['done', 3, 1, null, null, 0, `held ${i}`, null]]);
    const state = { agentId: 'agent_fuzz', messages: [], metadata: {} };
    post([
      HostOp.checkpoint,
      ++seq,
      data.capability,
      { phase: 'before', state, calls: [{ id: `c${i}`, name: 'bait', idempotent: false }] },
    ]);
  }
  // Every 500th, things that are not data: a live MessagePort and a SharedArrayBuffer where data belongs.
  if (i % 500 === 0) {
    const { port1, port2 } = new MessageChannel();
    post(
      [
        HostOp.approve,
        ++seq,
        data.capability,
        { toolName: 'bait', toolCallId: `port-${i}`, arguments: { port: port2 } },
      ],
      [port2],
    );
    port1.close();
    post([HostOp.events, 0, data.capability, [['t', 'agent.turn', { shared: new SharedArrayBuffer(8) }]]]);
  }
}

const report: FuzzReport = { sent, unsendable, expectReplies, approvals, markers };
parentPort?.postMessage(report);
