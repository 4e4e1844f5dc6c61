/**
 * How well Herald reads real bounces: `npm run bench:bounces -- [DIR] [EXPECTED.json]` runs every
 * message in DIR through Herald's reader and compares it with Sisimai's reading (EXPECTED.json).
 * Without arguments it uses the copy of Sisimai's corpus in test/fixtures/sisimai/. Prints a table
 * and, last, one JSON line with the figures. Figures, not pass/fail: the corpus test holds the goals.
 */
import { resolve } from 'node:path';
import { parseReport } from '../src/bounces/report.js';
import {
  CORPUS_DIR,
  CORPUS_EXPECTED,
  corpusFiles,
  loadExpected,
  readCorpusFile,
  readerVerdict,
  score,
  type ReaderVerdict,
  type Score,
} from '../test/fixtures/sisimai/score.js';

const GOALS = { recognised: 0.97, hard: 0.97, falseHard: 0.01 };

function percent(part: number, whole: number): string {
  return whole === 0 ? '–' : `${((100 * part) / whole).toFixed(1)} %`;
}

function table(result: Score, files: number, ms: number): string {
  const rows: [string, string, string][] = [
    [
      'bounces recognised (per recipient)',
      `${result.recognised} of ${result.bounces} (${percent(result.recognised, result.bounces)})`,
      `≥ ${GOALS.recognised * 100} %`,
    ],
    [
      'same category as Sisimai',
      result.sameCategory === null
        ? 'no categories'
        : `${result.sameCategory} of ${result.bounces} (${percent(result.sameCategory, result.bounces)})`,
      '',
    ],
    [
      'hard bounces that would be suppressed',
      `${result.hardAgreed} of ${result.hard} (${percent(result.hardAgreed, result.hard)})`,
      `≥ ${GOALS.hard * 100} %`,
    ],
    [
      'suppressed though Sisimai says not hard',
      `${result.falseHard} (${percent(result.falseHard, result.bounces)} of bounces)`,
      `≤ ${GOALS.falseHard * 100} % of bounces`,
    ],
    ['complaints recognised', `${result.complaintsRecognised} of ${result.complaints}`, 'all'],
    ['read as a report where Sisimai finds none', String(result.spurious), ''],
    ['time to read every message', `${ms.toFixed(0)} ms for ${files} messages`, ''],
  ];
  const widths = [0, 1].map((column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map(([a, b, c]) => `${a.padEnd(widths[0]!)}  ${b.padEnd(widths[1]!)}  ${c}`).join('\n');
}

async function main(): Promise<void> {
  const [dirArg, expectedArg] = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
  const dir = resolve(dirArg ?? CORPUS_DIR);
  const expected = loadExpected(resolve(expectedArg ?? CORPUS_EXPECTED));
  const files = corpusFiles(dir);
  const verdicts = new Map<string, ReaderVerdict>();
  let ms = 0;
  for (const file of files) {
    const raw = readCorpusFile(dir, file);
    const started = performance.now();
    const report = await parseReport(raw);
    ms += performance.now() - started;
    verdicts.set(file, readerVerdict(report));
  }
  const result = score(expected, verdicts);
  console.log(table(result, files.length, ms));
  if (process.argv.includes('--details')) {
    console.log('\nBy Herald category (Sisimai bounces in it: the same for Herald):');
    const categories = Object.entries(result.byCategory).sort((a, b) => b[1].expected - a[1].expected);
    for (const [category, { expected: count, agreed }] of categories)
      console.log(
        `  ${category.padEnd(16)} ${String(count).padStart(4)} ${String(agreed).padStart(4)}  ${percent(agreed, count)}`,
      );
    console.log('\nDisagreements (Sisimai reason → Herald category: count, files):');
    for (const c of result.confusions)
      console.log(`  ${c.reason} → ${c.got}: ${c.files.length}  ${c.files.join(' ')}`);
    console.log(`\nNot recognised (${result.missed.length}):\n  ${result.missed.join('\n  ')}`);
    console.log(`\nFalse hard (${result.falseHardFiles.length}):\n  ${result.falseHardFiles.join('\n  ')}`);
    console.log(
      `\nHard for Sisimai, kept soft (${result.hardMissedFiles.length}):\n  ${result.hardMissedFiles.join('\n  ')}`,
    );
  }
  const { byCategory: _byCategory, confusions: _confusions, missed: _missed, ...figures } = result;
  console.log(
    JSON.stringify({
      ...figures,
      falseHardFiles: undefined,
      hardMissedFiles: undefined,
      files: files.length,
      ms: Math.round(ms),
    }),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
