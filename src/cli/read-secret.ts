/**
 * Reads a secret from stdin (`--password-stdin`), so it never appears in the process list or the
 * shell's history: everything until the end of input, without its last line end. At a terminal
 * it asks first, on stderr.
 */
export async function readSecret(what: string): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write(`${what} (then Enter and Ctrl-D): `);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}
