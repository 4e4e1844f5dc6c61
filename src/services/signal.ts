/**
 * Tells this process's listeners that something happened that they act on at once: mail or a
 * webhook delivery was queued here, and a claim loop (or role `all`'s delivery process, told over
 * IPC) should look now rather than at its next poll. Fired after the commit that queued the work,
 * so a look it starts finds the rows.
 */
export class Signal {
  readonly #listeners: (() => void)[] = [];

  on(listener: () => void): void {
    this.#listeners.push(listener);
  }

  fire(): void {
    for (const listener of this.#listeners) listener();
  }
}
