// The transport conformance suite, against the default transport: worker threads of this process.
import { localTransport } from '@troupe/supervisor';
import { runTransportConformance } from '@troupe/supervisor/testing';

runTransportConformance('local (2 threads)', () => localTransport({ threads: 2, graceMs: 250 }), { graceMs: 250 });
