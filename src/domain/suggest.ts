/**
 * "Did you mean …?" for a template name that matches nothing. Names are case-sensitive, so the
 * commonest mistake (`User_Created` for `user_created`) is a case difference, tried first; after
 * that the nearest name by edit distance, if it is near enough to be a typo rather than another
 * name altogether.
 */
export function closestName(name: string, candidates: readonly string[]): string | null {
  const folded = name.toLowerCase();
  const sameLetters = candidates.find((candidate) => candidate.toLowerCase() === folded);
  if (sameLetters !== undefined) return sameLetters;
  // A third of the name's length: `user_creatd` finds `user_created`, `invoice` finds nothing.
  const limit = Math.max(1, Math.floor(name.length / 3));
  let best: string | null = null;
  let bestDistance = limit + 1;
  for (const candidate of candidates) {
    if (Math.abs(candidate.length - name.length) > limit) continue;
    const distance = editDistance(folded, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance with one row of memory; names are at most a few hundred characters. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length]!;
}
