/** Command-line options of `npm run bench` and the sizes of a full and a --quick run. */
import { parseArgs } from 'node:util';

export const PHASES = ['accept', 'e2e', 'delivery', 'growth', 'batch', 'slow-relay', 'files'] as const;
export type Phase = (typeof PHASES)[number];

export interface Settings {
  quick: boolean;
  phases: Phase[];
  build: boolean;
  postgres: boolean;
  keep: boolean;
  /** The checkout whose Herald is measured: this one, or another (`--herald DIR`). */
  heraldRoot?: string;
  /** Where each `herald serve` process writes its V8 CPU profile (`--cpu-prof DIR`). */
  cpuProfileDir?: string;
  /** wrk and the batch client: warm-up (not recorded) and measured seconds of every run. */
  warmupS: number;
  durationS: number;
  threads: number;
  connections: number;
  /** Delivery: notifications drained by the worker, and smtp-source's parallel sessions. */
  deliveryCount: number;
  smtpSessions: number;
  /** Slow relay: notifications sent through a relay that takes a second per message. */
  slowRelayCount: number;
  /** End to end: seconds of paced load at half the measured accept rate, and of draining after it. */
  endToEndS: number;
  endToEndDrainS: number;
  /** Upper bound for any queue to drain before a figure is reported as timed out. */
  drainTimeoutS: number;
  /** Growth: notifications stored before the second measurement. */
  storedCount: number;
  /** Batch: sends per batch (the endpoint's maximum), client connections, and at most this many
   * batches in each of the warm-up and the measured run, whatever their duration. */
  batchSize: number;
  batchConnections: number;
  batchMaxBatches: number;
}

export const USAGE = `Usage: npm run bench -- [options]

  --quick              short run (5 s wrk and batch runs, 2,000 deliveries, 600 through a slow relay,
                       100,000 stored): about 3 minutes
  --phases LIST        comma-separated subset of: ${PHASES.join(',')} (default: all)
  --no-build           use the existing dist/ instead of running npm run build first
  --no-pg              skip PostgreSQL even when it is reachable
  --duration S         seconds of each measured wrk or batch run (default 30, quick 5)
  --sessions N         smtp-source parallel sessions (default 8)
  --keep               keep the temporary data directories and logs
  --herald DIR         measure the Herald built in another checkout (DIR) with this suite, for a
                       before and after measured the same way
  --cpu-prof DIR       write a V8 CPU profile of each herald serve process to DIR (slows it a little)
  -h, --help           this text

Environment: HERALD_BENCH_PG_URL=postgres://user@127.0.0.1:5432/db picks the PostgreSQL server
(otherwise 127.0.0.1:5432 as user postgres, when it answers).`;

export function parseSettings(argv: string[]): Settings | 'help' {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      phases: { type: 'string' },
      'no-build': { type: 'boolean', default: false },
      'no-pg': { type: 'boolean', default: false },
      duration: { type: 'string' },
      sessions: { type: 'string' },
      keep: { type: 'boolean', default: false },
      herald: { type: 'string' },
      'cpu-prof': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return 'help';
  const quick = values.quick;
  const phases = (values.phases ?? PHASES.join(',')).split(',').map((p) => p.trim());
  for (const phase of phases) {
    if (!(PHASES as readonly string[]).includes(phase))
      throw new Error(`unknown phase "${phase}" (${PHASES.join(', ')})`);
  }
  const positive = (text: string | undefined, fallback: number, name: string) => {
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} wants a positive integer`);
    return value;
  };
  return {
    quick,
    phases: phases as Phase[],
    build: !values['no-build'],
    postgres: !values['no-pg'],
    keep: values.keep,
    heraldRoot: values.herald,
    cpuProfileDir: values['cpu-prof'],
    warmupS: quick ? 1 : 5,
    durationS: positive(values.duration, quick ? 5 : 30, 'duration'),
    threads: 2,
    connections: 64,
    deliveryCount: quick ? 2_000 : 20_000,
    smtpSessions: positive(values.sessions, 8, 'sessions'),
    slowRelayCount: quick ? 600 : 1_200,
    endToEndS: quick ? 4 : 20,
    endToEndDrainS: quick ? 45 : 120,
    drainTimeoutS: quick ? 60 : 300,
    storedCount: quick ? 100_000 : 1_000_000,
    batchSize: 500,
    batchConnections: 4,
    batchMaxBatches: quick ? 1_000 : 6_000,
  };
}
