import { describe, expect, it } from 'vitest';
import { terminalSafe } from '../../src/cli/output.js';

describe('CLI text for a terminal', () => {
  it('shows control characters as escapes, so stored text cannot drive the terminal', () => {
    const hostile = '\u001b]0;PWNED\u0007\u001b[2J\u001b[31mred\r\u009bX';
    const safe = terminalSafe(hostile);
    expect(safe).toBe('\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mred\\x0d\\x9bX');
    for (const char of safe) {
      const code = char.charCodeAt(0);
      expect(code === 10 || code === 9 || (code >= 0x20 && code < 0x7f) || code > 0x9f).toBe(true);
    }
  });

  it('keeps newlines, tabs and every printable character', () => {
    const text = 'Subject: Grüße 👋\n\tline two — “quoted”';
    expect(terminalSafe(text)).toBe(text);
  });
});
