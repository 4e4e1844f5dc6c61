import { describe, expect, it } from 'vitest';
import { Deadline } from '../../src/mail/deadline.js';

describe('Deadline', () => {
  it('tells each listener once when it passes, and only those still listening', () => {
    const deadline = new Deadline();
    const heard: string[] = [];
    deadline.onAbort(() => heard.push('a'));
    const stop = deadline.onAbort(() => heard.push('b'));
    deadline.onAbort(() => heard.push('c'));
    stop();
    expect(deadline.aborted).toBe(false);
    deadline.abort();
    deadline.abort();
    expect(deadline.aborted).toBe(true);
    expect(heard).toEqual(['a', 'c']);
  });

  it('lets a listener stop listening twice without removing another', () => {
    const deadline = new Deadline();
    const heard: string[] = [];
    const stop = deadline.onAbort(() => heard.push('a'));
    deadline.onAbort(() => heard.push('b'));
    stop();
    stop();
    deadline.abort();
    expect(heard).toEqual(['b']);
  });
});
