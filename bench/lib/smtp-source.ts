/** Postfix's smtp-source: the delivery baseline, a C client that only speaks SMTP. */
import { spawnTracked } from './processes.js';
import { HOST } from './net.js';

export const SMTP_SOURCE = '/usr/sbin/smtp-source';

export interface SourceOptions {
  port: number;
  messages: number;
  /** Parallel SMTP sessions; each session keeps its connection for the next message (-d). */
  sessions: number;
  /** Payload bytes (-l), not counting the few header lines smtp-source writes itself. */
  payloadBytes: number;
  timeoutMs: number;
}

export async function runSmtpSource(options: SourceOptions): Promise<string> {
  const args = [
    '-d',
    '-s',
    String(options.sessions),
    '-m',
    String(options.messages),
    '-l',
    String(options.payloadBytes),
    '-M',
    'bench.invalid',
    '-f',
    'bench@bench.invalid',
    '-t',
    'user@example.org',
    `${HOST}:${options.port}`,
  ];
  const source = spawnTracked('smtp-source', SMTP_SOURCE, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  source.child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const guard = setTimeout(() => void source.stop(1_000), options.timeoutMs);
  const exit = await source.exited;
  clearTimeout(guard);
  if (exit.code !== 0)
    throw new Error(`smtp-source failed (exit ${exit.code ?? exit.signal}): ${stderr.trim()}`);
  return `smtp-source ${args.join(' ')}`;
}
