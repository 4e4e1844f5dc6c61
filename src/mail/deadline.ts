/**
 * The end of one SMTP transaction's time, told to whatever waits on it. An AbortController would
 * do the same, but its signal is an EventTarget: creating one and listening to it twice costs
 * about 5 µs, several per cent of a worker delivering thousands of messages a second. This is a
 * flag and a list.
 */
export class Deadline {
  private listeners: (() => void)[] = [];
  private passed = false;
  /**
   * Whether the relay had greeted this transaction's connection when it last changed (set by
   * RelayPool): what a transaction cut off at the deadline is judged on.
   */
  greeted = false;
  /**
   * Whether the relay had taken that connection (for implicit TLS, finished the handshake) and sent
   * not a byte on it: a relay that never spoke.
   */
  silent = false;
  /**
   * Whether that connection was still waiting for the relay's address to take it (no TCP
   * connection yet): nothing answered there.
   */
  unanswered = false;
  /**
   * Whether the transaction's whole message had been sent, so that only the relay's answer to it
   * was missing: it may have been delivered.
   */
  sentWhole = false;

  /** Whether the deadline has passed. */
  get aborted(): boolean {
    return this.passed;
  }

  /** Calls `listener` once when the deadline passes; returns a function that stops listening. */
  onAbort(listener: () => void): () => void {
    this.listeners.push(listener);
    return () => {
      const index = this.listeners.indexOf(listener);
      if (index !== -1) this.listeners.splice(index, 1);
    };
  }

  abort(): void {
    if (this.passed) return;
    this.passed = true;
    for (const listener of this.listeners.splice(0)) listener();
  }
}
