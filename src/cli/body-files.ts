import { createReadStream } from 'node:fs';
import { Option, type Command } from 'commander';
import { errors, HeraldError } from '../domain/errors.js';

/** More than any template or layout part may be (512 Ki characters of HTML, 4 bytes each at most). */
const MAX_FILE_BYTES = 2 * 1024 * 1024;

type Part = 'text' | 'html';

/**
 * `--text-file PATH` and `--html-file PATH` beside `--text` and `--html`: a body too long for the
 * command line (the shell's limit is about 128 KiB), or kept in a file. `-` reads standard input.
 */
export function withBodyFiles(command: Command, parts: readonly Part[]): Command {
  for (const part of parts)
    command.addOption(
      new Option(
        `--${part}-file <path>`,
        `read the ${part === 'html' ? 'HTML' : 'text'} body from a file (- for stdin)`,
      ).conflicts(part),
    );
  return command;
}

/**
 * A body from a file or stdin, read as a stream with its size bounded (a pipe or `<(…)` has no
 * size to look at first), as UTF-8 without the byte order mark some editors put first.
 */
async function readBody(file: string, option: string): Promise<string> {
  const where = file === '-' ? 'standard input' : file;
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for await (const chunk of file === '-' ? process.stdin : createReadStream(file)) {
      bytes += (chunk as Buffer).length;
      if (bytes > MAX_FILE_BYTES) throw errors.invalidInput(`${option}: ${where} is larger than 2 MiB`);
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (error instanceof HeraldError || typeof code !== 'string') throw error;
    throw errors.invalidInput(`${option}: cannot read ${where} (${code})`);
  }
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/^\uFEFF/, '');
}

/** The options with each `--PART-file` read into its part, as if the body had been given inline. */
export async function readBodyFiles<
  O extends { text?: string; html?: string; textFile?: string; htmlFile?: string },
>(options: O): Promise<O> {
  if (options.textFile === '-' && options.htmlFile === '-')
    throw errors.invalidInput('Only one of --text-file and --html-file can read standard input');
  const read = { ...options };
  if (options.textFile !== undefined) read.text = await readBody(options.textFile, '--text-file');
  if (options.htmlFile !== undefined) read.html = await readBody(options.htmlFile, '--html-file');
  return read;
}
