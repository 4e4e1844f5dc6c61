/**
 * Tells this process's listeners that something happened that they act on at once: mail or a
 * webhook delivery was queued here, and a claim loop (or role `all`'s delivery process, told over
 * IPC, or other processes' workers, told by the store) should look now rather than at its next
 * poll. Fired after the commit that queued the work, so a look it starts finds the rows; the work
 * is committed by then, so a listener that fails is reported and never fails the caller.
 */
export class Signal {
  readonly #listeners: (() => void)[] = [];

  constructor(
    private readonly onError: (error: unknown) => void = (error) =>
      console.error('a listener of queued work failed', error),
  ) {}

  on(listener: () => void): void {
    this.#listeners.push(listener);
  }

  fire(): void {
    for (const listener of this.#listeners) {
      try {
        listener();
      } catch (error) {
        this.onError(error);
      }
    }
  }
}
