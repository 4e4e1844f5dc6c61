/**
 * Drives wrk against 127.0.0.1 with a generated Lua script and reads its figures from a JSON
 * line printed by the script's done() hook (exact microsecond percentiles, not wrk's rounded text).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HOST } from './net.js';
import { spawnTracked } from './processes.js';

export interface WrkTarget {
  method: 'GET' | 'POST';
  /** A fixed path, or a prefix to which one of `pathSuffixes` / a number in 1..`pathRange` is appended. */
  path: string;
  pathSuffixes?: string[];
  pathRange?: number;
  body?: string;
  headers: Record<string, string>;
}

export interface WrkOptions {
  port: number;
  target: WrkTarget;
  durationS: number;
  threads?: number;
  connections?: number;
  workDir: string;
  name: string;
}

export interface WrkResult {
  requests: number;
  durationS: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses that were not 2xx/3xx (wrk's "Non-2xx or 3xx responses"). */
  non2xx: number;
  socketErrors: number;
  command: string;
}

/** Lua long brackets need no escaping as long as the text does not contain the closing bracket. */
function luaString(text: string): string {
  if (text.includes(']==]')) throw new Error('wrk script text may not contain ]==]');
  return `[==[${text}]==]`;
}

export function wrkScript(target: WrkTarget): string {
  const lines = [`wrk.method = ${luaString(target.method)}`];
  if (target.body !== undefined) lines.push(`wrk.body = ${luaString(target.body)}`);
  for (const [name, value] of Object.entries(target.headers)) {
    lines.push(`wrk.headers[ ${luaString(name)} ] = ${luaString(value)}`);
  }
  if (target.pathSuffixes !== undefined || target.pathRange !== undefined) {
    // Each wrk thread has its own Lua state: seed each one differently.
    lines.push(
      'local nextThread = 1',
      'function setup(thread) thread:set("threadNo", nextThread); nextThread = nextThread + 1 end',
      'function init(args) math.randomseed(os.time() * 100 + (threadNo or 0)) end',
    );
    if (target.pathSuffixes !== undefined) {
      lines.push(`local suffixes = {${target.pathSuffixes.map(luaString).join(',')}}`);
      lines.push(
        `request = function() return wrk.format(nil, ${luaString(target.path)} .. suffixes[math.random(#suffixes)]) end`,
      );
    } else {
      lines.push(
        `request = function() return wrk.format(nil, ${luaString(target.path)} .. math.random(${target.pathRange ?? 1})) end`,
      );
    }
  } else {
    lines.push(`wrk.path = ${luaString(target.path)}`);
  }
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format(\'WRK_JSON {"requests":%.0f,"duration_us":%.0f,"connect":%.0f,"read":%.0f,"write":%.0f,"status":%.0f,"timeout":%.0f,"p50_us":%.0f,"p99_us":%.0f}\\n\',',
    '    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,',
    '    latency:percentile(50), latency:percentile(99)))',
    'end',
  );
  return `${lines.join('\n')}\n`;
}

interface WrkJson {
  requests: number;
  duration_us: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
  p50_us: number;
  p99_us: number;
}

export async function runWrk(options: WrkOptions): Promise<WrkResult> {
  const threads = options.threads ?? 2;
  const connections = options.connections ?? 64;
  const scriptPath = join(options.workDir, `${options.name}.lua`);
  await writeFile(scriptPath, wrkScript(options.target));
  const args = [
    `-t${threads}`,
    `-c${connections}`,
    `-d${options.durationS}s`,
    '--timeout',
    '10s',
    '--latency',
    '-s',
    scriptPath,
    `http://${HOST}:${options.port}${options.target.path}`,
  ];
  const wrk = spawnTracked('wrk', 'wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  wrk.child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  wrk.child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  // wrk stops by itself after -d; the guard only matters if it hangs.
  const guard = setTimeout(() => void wrk.stop(2_000), (options.durationS + 30) * 1000);
  const exit = await wrk.exited;
  clearTimeout(guard);
  const line = output.split('\n').find((l) => l.startsWith('WRK_JSON '));
  if (exit.code !== 0 || line === undefined) {
    throw new Error(`wrk failed (exit ${exit.code ?? exit.signal}): ${output.trim().slice(-800)}`);
  }
  const json = JSON.parse(line.slice('WRK_JSON '.length)) as WrkJson;
  const durationS = json.duration_us / 1e6;
  return {
    requests: json.requests,
    durationS,
    rps: json.requests / durationS,
    p50Ms: json.p50_us / 1000,
    p99Ms: json.p99_us / 1000,
    non2xx: json.status,
    socketErrors: json.connect + json.read + json.write + json.timeout,
    command: `wrk ${args.slice(0, -3).join(' ')} <script> ${args.at(-1) ?? ''}`,
  };
}
