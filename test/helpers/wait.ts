/**
 * Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. An error
 * `check` throws ends the wait at once (a process that exited will never become ready). `what`
 * names the condition in the timeout's message; as a function it is asked only then, so the
 * message can carry what was seen last (a process's output).
 */
export async function waitUntil<T>(
  check: () => Promise<T | undefined> | T | undefined,
  {
    timeoutMs = 15_000,
    intervalMs = 25,
    what = 'condition',
  }: { timeoutMs?: number; intervalMs?: number; what?: string | (() => string) } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Resolves once the clock has moved past `time`, so that a write after it has a later stamp. */
export async function passMillisecond(time: number): Promise<void> {
  while (Date.now() <= time) await new Promise((resolve) => setTimeout(resolve, 1));
}
