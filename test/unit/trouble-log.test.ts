import { describe, expect, it } from 'vitest';
import { createLogger, Trouble } from '../../src/logger.js';

/** A task retried on a timer logs its trouble once, its repeats at debug, and its end once. */

function logged() {
  const lines: { level: number; msg: string; problem?: string; queue?: string }[] = [];
  const logger = createLogger('debug', { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { lines, logger };
}
const WARN = 40;
const DEBUG = 20;
const INFO = 30;

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
      [50, 'claiming failed; retrying at the next poll'],
      [50, 'claiming failed; retrying at the next poll'],
    ]);
  });
});
