/** What each scenario measures, the context they share, and the goals the figures are held to. */
import type { HeraldCli } from './herald-process.js';
import type { Settings } from './settings.js';
import type { WrkResult } from './wrk.js';

export const GOALS = {
  acceptSqlite: 0.5,
  acceptPostgres: 0.4,
  delivery: 0.4,
  growth: 0.9,
  batch: 0.5,
  slowRelay: 0.9,
  peakRssMb: 250,
  /** accept→sent at half the delivery rate, a load the worker keeps up with. */
  sustainedLatency: { p50Ms: 30, p99Ms: 100 },
} as const;

export interface Context {
  settings: Settings;
  repoRoot: string;
  /** Temporary directory of this run: data directories, logs, wrk scripts. */
  workDir: string;
  /** Undefined when Herald cannot be run yet; `heraldMissing` says why. */
  herald: HeraldCli | undefined;
  heraldMissing: string | undefined;
  secretKey: string;
  postgres: { baseUrl: string } | { skip: string };
}

/** Something a scenario could not measure; the rest of its figures still count. */
export interface Problem {
  phase: string;
  message: string;
}

export interface AcceptResult {
  bare?: WrkResult;
  sqlite?: WrkResult;
  postgres?: WrkResult;
  postgresSkipped?: string;
  rssMb: { sqlite?: number; postgres?: number };
}

/** Figure 8: sends that each carry one file, against the bare server reading the same body. */
export interface FilesResult {
  fileBytes: number;
  bare?: WrkResult;
  sqlite?: WrkResult;
  postgres?: WrkResult;
  postgresSkipped?: string;
}

export interface EndToEndResult {
  /** Why this rate: "half the SQLite accept rate", or half the delivery rate. */
  basis: string;
  /** A load the worker keeps up with (half the delivery rate): the latency goal applies. */
  sustained: boolean;
  /** One process of role `all`, or an API process and a worker process beside it. */
  processes: 'all' | 'api+worker';
  rate: number;
  durationS: number;
  offered: number;
  accepted: number;
  rejected: number;
  /** Sample of accepted notifications whose status was read, and how many of them were sent. */
  sampled: number;
  sent: number;
  failed: number;
  acceptToSent: { p50Ms: number; p99Ms: number };
  dueToSent: { p50Ms: number; p99Ms: number };
  dueToResponse: { p50Ms: number; p99Ms: number };
}

export interface DeliveryResult {
  count: number;
  sessions: number;
  /** Seconds the sink waits before answering each DATA command; none for a local relay. */
  relayDelayS?: number;
  /** Average size of a Herald message as the sink received it, and smtp-source's -l for the same size. */
  heraldMessageBytes?: number;
  sourcePayloadBytes: number;
  sourceRate?: number;
  sourceSeconds?: number;
  sourceCommand?: string;
  heraldRate?: number;
  heraldSeconds?: number;
  /** Seconds from spawning the worker until the last message arrived (includes its start-up). */
  heraldSecondsFromSpawn?: number;
  delivered?: number;
  failed?: number;
  timedOut?: boolean;
  fillRate?: number;
  rssMb: { fill?: number; worker?: number };
}

export interface GrowthResult {
  stored: number;
  seedSeconds?: number;
  emptyAccept?: WrkResult;
  emptyLookup?: WrkResult;
  storedAccept?: WrkResult;
  storedLookup?: WrkResult;
}

/** One timed run of batches: Herald's client, or the bare SQLite inserts. */
export interface BatchRun {
  batches: number;
  /** batches × batch size: notifications accepted (Herald) or rows inserted (baseline). */
  notifications: number;
  seconds: number;
  /** notifications / seconds */
  rate: number;
  /** Per batch: request to 202 (Herald), or one INSERT with its commit (baseline). */
  p50Ms: number;
  p99Ms: number;
}

export interface BatchResult {
  size: number;
  connections: number;
  herald?: BatchRun;
  heraldWarmup?: BatchRun;
  baseline?: BatchRun;
  baselineWarmup?: BatchRun;
  /** How many batches the baseline inserted: the same as Herald accepted, or for the same time. */
  baselineBasis?: string;
  rssMb?: number;
}

export interface BenchResults {
  startedAt: Date;
  finishedAt?: Date;
  command: string;
  settings: Settings;
  /** Load averages (1, 5, 15 min) before the first measurement and after the last. */
  loadAtStart: number[];
  loadAtEnd?: number[];
  /** Wall-clock seconds of each phase, to keep runs within their time budget. */
  phaseSeconds: Record<string, number>;
  heraldMissing: string | undefined;
  accept?: AcceptResult;
  endToEnd?: EndToEndResult[];
  delivery?: DeliveryResult;
  /** Delivery through a relay that takes a second per message (figure 7). */
  slowRelay?: DeliveryResult;
  growth?: GrowthResult;
  batch?: BatchResult;
  /** Accept with a file (figure 8). */
  files?: FilesResult;
  problems: Problem[];
}
