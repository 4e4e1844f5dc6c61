/** One line of a line-by-line comparison: kept, removed (only in the old text) or added. */
export interface DiffLine {
  readonly kind: 'same' | 'removed' | 'added';
  readonly text: string;
}

/** Above this many line pairs the comparison shows the whole old text removed and the new added. */
const MAX_CELLS = 4_000_000;

/** The lines of `before` and `after` compared by their longest common subsequence. */
export function diffLines(before: string, after: string): DiffLine[] {
  const a = before === '' ? [] : before.split('\n');
  const b = after === '' ? [] : after.split('\n');
  if (a.length * b.length > MAX_CELLS) {
    return [
      ...a.map((text) => ({ kind: 'removed' as const, text })),
      ...b.map((text) => ({ kind: 'added' as const, text })),
    ];
  }
  // lengths[i][j]: the common subsequence of a[i..] and b[j..], in a flat array.
  const width = b.length + 1;
  const lengths = new Uint32Array((a.length + 1) * width);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lengths[i * width + j] =
        a[i] === b[j]
          ? (lengths[(i + 1) * width + j + 1] as number) + 1
          : Math.max(lengths[(i + 1) * width + j] as number, lengths[i * width + j + 1] as number);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push({ kind: 'same', text: a[i++] as string });
      j++;
    } else if (
      j < b.length &&
      (i === a.length || (lengths[i * width + j + 1] as number) >= (lengths[(i + 1) * width + j] as number))
    ) {
      out.push({ kind: 'added', text: b[j++] as string });
    } else {
      out.push({ kind: 'removed', text: a[i++] as string });
    }
  }
  return out;
}
