/**
 * One updating status line on stderr: phase, elapsed time, and a count supplied by the phase.
 * On a terminal the line is redrawn in place; otherwise (CI logs, pipes) a plain line is printed
 * when a phase starts and every PLAIN_EVERY_MS, so logs stay short but show that work goes on.
 */
const TICK_MS = 200;
const PLAIN_EVERY_MS = 10_000;

type Detail = () => string;

class Progress {
  private label = '';
  private detail: Detail = () => '';
  private startedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private lastPlain = 0;
  private readonly tty = process.stderr.isTTY === true;

  /** Starts a phase; `detail` is called on every redraw, so it must be cheap. */
  start(label: string, detail: Detail = () => ''): void {
    this.stop();
    this.label = label;
    this.detail = detail;
    this.startedAt = performance.now();
    this.lastPlain = 0;
    this.render();
    this.timer = setInterval(() => this.render(), TICK_MS);
    this.timer.unref();
  }

  /** Ends the current phase and clears the line. */
  stop(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
    if (this.tty) process.stderr.write('\r\x1b[K');
  }

  /** Prints a message on its own line without breaking the status line. */
  log(message: string): void {
    if (this.tty && this.timer !== undefined) process.stderr.write('\r\x1b[K');
    process.stderr.write(`${message}\n`);
    if (this.timer !== undefined) this.render();
  }

  private render(): void {
    const elapsed = (performance.now() - this.startedAt) / 1000;
    const detail = this.detail();
    const line = `${this.label}  ${elapsed.toFixed(1)}s${detail === '' ? '' : `  ${detail}`}`;
    if (this.tty) {
      const width = process.stderr.columns ?? 120;
      process.stderr.write(`\r\x1b[K${line.slice(0, Math.max(20, width - 1))}`);
      return;
    }
    const now = performance.now();
    if (this.lastPlain === 0 || now - this.lastPlain >= PLAIN_EVERY_MS) {
      this.lastPlain = now;
      process.stderr.write(`${line}\n`);
    }
  }
}

export const progress = new Progress();
