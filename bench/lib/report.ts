/**
 * The end of a run: a table on stdout, and bench/results/latest.md with the figures, goals,
 * details, problems and machine facts, next to the chart bench/results/latest.svg it links to.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { renderChart } from './chart.js';
import { chartItems, figureRows, type Row } from './figures.js';
import { busyWarning, type Machine } from './machine.js';
import type { BatchRun, BenchResults, DeliveryResult } from './results.js';
import type { Settings } from './settings.js';
import { formatMs, formatNumber } from './stats.js';
import type { WrkResult } from './wrk.js';

function metText(row: Row): string {
  if (row.met === undefined) return row.goal === '–' ? '–' : 'not measured';
  return row.met ? 'met' : 'NOT MET';
}

export function consoleTable(results: BenchResults): string {
  const header = ['Figure', 'Herald', 'Baseline', 'Ratio', 'Goal', 'Met'];
  const rows = figureRows(results).map((r) => [r.figure, r.herald, r.baseline, r.ratio, r.goal, metText(r)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

function wrkTable(entries: [string, WrkResult | undefined][]): string[] {
  const lines = [
    '| Target | req/s | p50 | p99 | requests | non-2xx | socket errors |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const [name, r] of entries) {
    if (r === undefined) continue;
    lines.push(
      `| ${name} | ${formatNumber(r.rps)} | ${formatMs(r.p50Ms)} | ${formatMs(r.p99Ms)} | ${formatNumber(r.requests)} | ${r.non2xx} | ${r.socketErrors} |`,
    );
  }
  return lines;
}

function batchTable(entries: [string, BatchRun | undefined, string][]): string[] {
  const lines = [
    '| Run | per second | batches | rows | seconds | p50 per batch | p99 per batch |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const [name, r, unit] of entries) {
    if (r === undefined) continue;
    lines.push(
      `| ${name} | ${formatNumber(r.rate)} ${unit} | ${formatNumber(r.batches)} | ${formatNumber(r.notifications)} | ${formatNumber(r.seconds, 2)} | ${formatMs(r.p50Ms)} | ${formatMs(r.p99Ms)} |`,
    );
  }
  return lines;
}

/** How a delivery figure was measured: what was sent where, message sizes, times and final states. */
function deliveryDetails(title: string, delivery: DeliveryResult, s: Settings, sink: string): string[] {
  const out = [title, ''];
  out.push(
    `${formatNumber(delivery.count)} notifications queued through \`serve --role api\`${delivery.fillRate === undefined ? '' : ` (${formatNumber(delivery.fillRate)} req/s with ${s.connections} keep-alive connections)`}, then drained by \`serve --role worker\` into ${sink}. Baseline: \`${delivery.sourceCommand ?? 'smtp-source'}\` into a sink of its own of the same kind. Rates are counted at the sink, from the first to the last message.`,
    '',
  );
  out.push(
    `- Message size: Herald ${delivery.heraldMessageBytes === undefined ? 'unknown' : `${delivery.heraldMessageBytes} bytes`}; smtp-source payload \`-l ${delivery.sourcePayloadBytes}\` (its own header lines bring it to the same size).`,
  );
  if (delivery.heraldSeconds !== undefined) {
    out.push(
      `- Herald: ${formatNumber(delivery.heraldSeconds, 2)} s first to last message; ${formatNumber(delivery.heraldSecondsFromSpawn ?? 0, 2)} s from spawning the worker (includes its start-up).`,
    );
    out.push(
      `- Final states: ${delivery.delivered ?? '?'} sent, ${delivery.failed ?? '?'} failed${delivery.timedOut === true ? '; timed out before all arrived' : ''}.`,
    );
  }
  if (delivery.sourceSeconds !== undefined)
    out.push(`- smtp-source: ${formatNumber(delivery.sourceSeconds, 2)} s first to last message.`);
  out.push('');
  return out;
}

function details(results: BenchResults): string[] {
  const { settings: s, accept, delivery, endToEnd, growth, batch } = results;
  const out: string[] = ['## Details', ''];
  const wrkLine = `\`wrk -t${s.threads} -c${s.connections} -d${s.durationS}s --latency\` with a Lua script for the POST body and headers, after a ${s.warmupS} s warm-up run that is not counted`;
  if (accept !== undefined) {
    out.push('### 1. Accept throughput', '');
    out.push(
      `${wrkLine}. Herald runs as \`serve --role api\` (no worker competing for the CPU); the baseline is a bare \`node:http\` server in its own process that reads the body, \`JSON.parse\`s it and answers 202 with a body of the same shape.`,
      '',
    );
    out.push(
      ...wrkTable([
        ['bare node:http', accept.bare],
        ['Herald, SQLite', accept.sqlite],
        ['Herald, PostgreSQL', accept.postgres],
      ]),
      '',
    );
    if (accept.postgresSkipped !== undefined) out.push(`${accept.postgresSkipped}.`, '');
  }
  if (delivery !== undefined)
    out.push(...deliveryDetails('### 2. Delivery throughput', delivery, s, 'smtp-sink'));
  if (results.files !== undefined) {
    const files = results.files;
    out.push('### 8. Accept with a file', '');
    out.push(
      `${wrkLine}, each POST a send with one file of ${files.fileBytes / 1024} KiB of random bytes (a ${Math.round((files.fileBytes * 4) / 3 / 1024)} KiB body). Herald runs as \`serve --role api\`; the baseline is the bare \`node:http\` server of figure 1 reading and parsing the same bodies. Figure 1 is the same path without a file.`,
      '',
      ...wrkTable([
        ['bare node:http', files.bare],
        ['Herald, SQLite', files.sqlite],
        ['Herald, PostgreSQL', files.postgres],
      ]),
      '',
    );
    if (files.postgresSkipped !== undefined) out.push(`${files.postgresSkipped}.`, '');
  }
  if (endToEnd !== undefined && endToEnd.length > 0) {
    out.push('### 3. End to end', '');
    for (const e of endToEnd) {
      out.push(
        `Herald ${e.processes === 'all' ? '`serve --role all`' : '`serve --role api` and `serve --role worker` (two processes)'} delivering into \`smtp-sink\`, under an open-loop load of ${formatNumber(e.rate)} req/s (${e.basis}) for ${e.durationS} s, after a ${s.warmupS} s warm-up at the same rate that is not counted: ${formatNumber(e.offered)} sends, ${formatNumber(e.accepted)} accepted, ${formatNumber(e.rejected)} not accepted. Status read for ${formatNumber(e.sampled)} of them (evenly spread): ${formatNumber(e.sent)} sent, ${e.failed} failed.`,
        '',
        '| Latency | p50 | p99 |',
        '|---|---:|---:|',
        `| accept→sent (status \`sent_at − created_at\`) | ${formatMs(e.acceptToSent.p50Ms)} | ${formatMs(e.acceptToSent.p99Ms)} |`,
        `| due→sent (from the scheduled send time, includes client-side queueing) | ${formatMs(e.dueToSent.p50Ms)} | ${formatMs(e.dueToSent.p99Ms)} |`,
        `| due→202 response | ${formatMs(e.dueToResponse.p50Ms)} | ${formatMs(e.dueToResponse.p99Ms)} |`,
        '',
      );
      if (delivery?.heraldRate !== undefined && delivery.heraldRate < e.rate) {
        out.push(
          `This rate is above the worker's measured delivery rate (${formatNumber(delivery.heraldRate)} msgs/s, figure 2), so the queue grew during the run and these latencies are mostly time spent waiting in that backlog.`,
          '',
        );
      }
      if (e.sent < e.sampled) {
        out.push(
          `${formatNumber(e.sampled - e.sent)} of the sampled notifications were not sent within ${s.endToEndDrainS} s after the load; they count as never sent in the percentiles.`,
          '',
        );
      }
    }
  }
  if (growth !== undefined) {
    out.push('### 4. Growth (SQLite)', '');
    out.push(
      `${formatNumber(growth.stored)} notifications in state \`sent\` written into \`herald.db\` with one \`INSERT … SELECT\` over a recursive CTE${growth.seedSeconds === undefined ? '' : ` in ${growth.seedSeconds.toFixed(1)} s`}, then the same wrk runs as on an empty database. Lookups are \`GET /api/v1/notifications/{request_id}\` of random stored notifications (1,000 created through the API on the empty database).`,
      '',
      ...wrkTable([
        ['lookup, empty', growth.emptyLookup],
        [`lookup, ${formatNumber(growth.stored)} stored`, growth.storedLookup],
        ['accept, empty', growth.emptyAccept],
        [`accept, ${formatNumber(growth.stored)} stored`, growth.storedAccept],
      ]),
      '',
    );
  }
  const rss: [string, number | undefined][] = [
    ['accept, SQLite (role api)', accept?.rssMb.sqlite],
    ['accept, PostgreSQL (role api)', accept?.rssMb.postgres],
    ['delivery, queueing (role api)', delivery?.rssMb.fill],
    ['delivery, draining (role worker)', delivery?.rssMb.worker],
  ];
  if (rss.some(([, v]) => v !== undefined)) {
    out.push(
      '### 5. Memory',
      '',
      'Peak resident set (`VmHWM` from `/proc/PID/status`) of each Herald process:',
      '',
    );
    for (const [name, value] of rss)
      if (value !== undefined) out.push(`- ${name}: ${formatNumber(value, 1)} MB`);
    out.push('');
  }
  if (batch !== undefined) {
    out.push('### 6. Batch accept (SQLite)', '');
    out.push(
      `\`POST /api/v1/notifications/batch\` with ${batch.size} sends per batch from ${batch.connections} keep-alive connections, each with one batch in flight, to \`serve --role api\` on SQLite (\`synchronous=FULL\`): a ${s.warmupS} s warm-up that is not counted, then ${s.durationS} s (at most ${formatNumber(s.batchMaxBatches)} batches each). Only 202 answers listing every send as queued count; any other answer stops the phase. Baseline: a bare better-sqlite3 file with the pragmas of Herald's server connection (WAL, \`synchronous=FULL\`, \`foreign_keys\`, \`secure_delete\`, \`wal_autocheckpoint=20000\`; Herald checkpoints from a background thread as well, the baseline only inline) and a \`notifications\` table shaped like Herald's (\`001_initial\`: the same columns and indexes), the same sends inserted as rows (a time-ordered UUID \`request_id\`, as Herald issues them, template, recipient, JSON data, timestamps) with one prepared ${batch.size}-row INSERT and one transaction per batch${batch.baselineBasis === undefined ? '' : `; measured over ${batch.baselineBasis}`}.`,
      '',
      ...batchTable([
        ['Herald, warm-up', batch.heraldWarmup, 'notifications/s'],
        ['Herald', batch.herald, 'notifications/s'],
        ['bare SQLite, warm-up', batch.baselineWarmup, 'rows/s'],
        ['bare SQLite', batch.baseline, 'rows/s'],
      ]),
      '',
    );
    if (batch.rssMb !== undefined)
      out.push(`Peak RSS of Herald (role api) in this phase: ${formatNumber(batch.rssMb, 1)} MB.`, '');
  }
  if (results.slowRelay !== undefined)
    out.push(
      ...deliveryDetails(
        '### 7. Delivery through a slow relay',
        results.slowRelay,
        s,
        `\`smtp-sink -w ${results.slowRelay.relayDelayS ?? '?'}\` (every DATA command answered after ${results.slowRelay.relayDelayS ?? '?'} s), Herald with its default delivery settings`,
      ),
    );
  return out;
}

function loadText(load: number[] | undefined): string {
  return load === undefined ? 'unknown' : load.map((l) => l.toFixed(2)).join(', ');
}

export function markdown(results: BenchResults, machine: Machine): string {
  const rows = figureRows(results);
  const busy = busyWarning(results.loadAtStart, machine.nproc);
  const date = results.startedAt
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');
  const lines = [
    `# Herald benchmark${results.settings.quick ? ' (quick run)' : ''}`,
    '',
    `Run on ${date} with \`${results.command}\`. Every load stays on 127.0.0.1.`,
    '',
    ...(busy === undefined ? [] : [`> **Warning:** ${busy}.`, '']),
    '![Herald against its baselines](latest.svg)',
    '',
    '## Figures and goals',
    '',
    '| Figure | Herald | Baseline | Herald / baseline | Goal | Met |',
    '|---|---|---|---:|---|---|',
    ...rows.map(
      (r) => `| ${r.figure} | ${r.herald} | ${r.baseline} | ${r.ratio} | ${r.goal} | ${metText(r)} |`,
    ),
    '',
    ...details(results),
  ];
  if (results.heraldMissing !== undefined || results.problems.length > 0) {
    lines.push('## Problems', '');
    if (results.heraldMissing !== undefined)
      lines.push(`- Herald could not be run: ${results.heraldMissing.replace(/\n/g, ' ')}`);
    for (const p of results.problems) lines.push(`- ${p.phase}: ${p.message.replace(/\n/g, ' ')}`);
    lines.push('');
  }
  const seconds =
    results.finishedAt === undefined
      ? undefined
      : (results.finishedAt.getTime() - results.startedAt.getTime()) / 1000;
  lines.push(
    '## Machine',
    '',
    `- \`nproc\`: ${machine.nproc}; memory: ${machine.memoryGiB.toFixed(1)} GiB; CPU: ${machine.cpu}`,
    `- ${machine.os}, Linux ${machine.kernel}; Node ${machine.node}; ${machine.wrk}`,
    `- Load average (1, 5, 15 min) before the run: ${loadText(results.loadAtStart)}; after it: ${loadText(results.loadAtEnd)}`,
    `- Command: \`${results.command}\`${seconds === undefined ? '' : `, ${formatNumber(seconds)} s in all`} (${Object.entries(
      results.phaseSeconds,
    )
      .map(([name, t]) => `${name} ${formatNumber(t)} s`)
      .join(', ')})`,
    `- Date: ${date}`,
    '',
  );
  return lines.join('\n');
}

export async function writeReport(results: BenchResults, machine: Machine, dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const title = `Herald benchmark${results.settings.quick ? ' (quick run)' : ''}`;
  const subtitle = `${results.startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC · ${machine.nproc} CPUs · Node ${machine.node} · ${results.command}`;
  await writeFile(join(dir, 'latest.svg'), renderChart(chartItems(results), title, subtitle));
  const md = join(dir, 'latest.md');
  await writeFile(md, markdown(results, machine));
  await writeFile(join(dir, 'latest.json'), `${JSON.stringify({ ...results, machine }, null, 2)}\n`);
  return md;
}
