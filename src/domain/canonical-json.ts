import { hash } from 'node:crypto';

/**
 * The body as JSON with object keys sorted, so one body with its keys in another order is the
 * same request. Written without recursion: a body nested 100,000 levels deep in a field Herald
 * ignores is still within the body limit, and must not exhaust the stack.
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  // Either a value still to write, or literal text (a separator or a closing bracket).
  const stack: ({ value: unknown } | string)[] = [{ value }];
  while (stack.length > 0) {
    const next = stack.pop()!;
    if (typeof next === 'string') {
      out.push(next);
      continue;
    }
    const current = next.value;
    if (Array.isArray(current)) {
      stack.push(']');
      for (let i = current.length - 1; i >= 0; i--) {
        stack.push({ value: current[i] });
        if (i > 0) stack.push(',');
      }
      out.push('[');
    } else if (typeof current === 'object' && current !== null) {
      // In the order JSON.stringify gives an object built with its keys inserted sorted (integer
      // keys first), which is how fingerprints were always computed: stored keys stay valid.
      const keys = Object.keys(
        Object.fromEntries(
          Object.keys(current)
            .sort()
            .map((k) => [k, true]),
        ),
      );
      stack.push('}');
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push({ value: (current as Record<string, unknown>)[keys[i]!] });
        stack.push(`${i > 0 ? ',' : ''}${JSON.stringify(keys[i])}:`);
      }
      out.push('{');
    } else {
      out.push(JSON.stringify(current) ?? 'null');
    }
  }
  return out.join('');
}

/**
 * The length in bytes of the value as JSON, which the order of keys does not change. The engine's
 * own JSON.stringify gives it many times faster than canonicalJson; a value nested too deep for it
 * (its recursion runs out of stack) is measured by canonicalJson instead.
 */
export function jsonByteLength(value: unknown): number {
  let text: string;
  try {
    text = JSON.stringify(value) ?? 'null';
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    text = canonicalJson(value);
  }
  return Buffer.byteLength(text);
}

/** The fingerprint of a request body an Idempotency-Key is bound to: SHA-256 of its canonical JSON. */
export function bodyFingerprint(value: unknown): string {
  return hash('sha256', canonicalJson(value), 'hex');
}
