import { describe, expect, it } from 'vitest';
import { createLogger, Trouble } from '../../src/logger.js';

/** A task retried on a timer logs its trouble once, its repeats at debug, and its end once. */

function logged() {
  const lines: { level: number; msg: string; problem?: string; queue?: string; repeats?: number }[] = [];
  const logger = createLogger('debug', { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { lines, logger };
}
const WARN = 40;
const DEBUG = 20;
const INFO = 30;
const ERROR = 50;

describe('Trouble', () => {
  it('logs a failure once at its level, repeats at debug, and the end once at info', () => {
    const { lines, logger } = logged();
    const trouble = new Trouble(logger, 'heartbeat', 'warn', { queue: 'notifications' });
    trouble.succeeded();
    expect(lines).toEqual([]);
    for (let i = 0; i < 5; i++) trouble.failed(new Error('database or disk is full'));
    expect(lines.map((line) => [line.level, line.msg])).toEqual([
      [WARN, 'heartbeat failed; retrying'],
      ...Array.from({ length: 4 }, () => [DEBUG, 'heartbeat failed; retrying (still failing)']),
    ]);
    expect(lines[1]).toMatchObject({ problem: 'database or disk is full', queue: 'notifications' });
    trouble.succeeded();
    trouble.succeeded();
    expect(lines.slice(5).map((line) => [line.level, line.msg])).toEqual([[INFO, 'heartbeat works again']]);
  });

  it('logs again at its level when the trouble changes', () => {
    const { lines, logger } = logged();
    const trouble = new Trouble(logger, 'claiming', 'error');
    trouble.failed(new Error('database or disk is full'), 'retrying at the next poll');
    trouble.failed(new Error('database is locked'), 'retrying at the next poll');
    expect(lines.map((line) => [line.level, line.msg])).toEqual([
      [ERROR, 'claiming failed; retrying at the next poll'],
      [ERROR, 'claiming failed; retrying at the next poll'],
    ]);
  });

  it('tells troubles apart by their code, or their words without numbers', () => {
    const { lines, logger } = logged();
    const trouble = new Trouble(logger, 'renewing leases');
    const full = (file: string) =>
      Object.assign(new Error(`could not extend file "base/16384/${file}"`), { code: '53100' });
    trouble.failed(full('16450.1'));
    trouble.failed(full('16502'));
    trouble.failed(new Error('connect ECONNREFUSED 127.0.0.1:5432'));
    trouble.failed(new Error('connect ECONNREFUSED 127.0.0.1:5433'));
    expect(lines.map((line) => line.level)).toEqual([WARN, DEBUG, WARN, DEBUG]);
  });

  it('logs lasting trouble again at its level every five minutes, with how often it repeated', () => {
    const { lines, logger } = logged();
    let now = 0;
    const trouble = new Trouble(logger, 'heartbeat', 'warn', {}, () => now);
    for (; now <= 5 * 60_000; now += 1_000) trouble.failed(new Error('database or disk is full'));
    const warnings = lines.filter((line) => line.level === WARN);
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toMatchObject({ repeats: 299 });
  });
});
