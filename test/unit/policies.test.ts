import { describe, expect, it } from 'vitest';
import { checkQuotaLimit, parseQuotaLimit, quotaState, quotaWindow } from '../../src/domain/quota.js';
import { backoffDelay, deliveryBackoff, webhookBackoff } from '../../src/domain/backoff.js';
import { parseSendRequest } from '../../src/domain/send-request.js';
import { classifySmtpError, oneReply } from '../../src/mail/smtp-failures.js';
import { describeSmtpTarget, parseSmtpUrl } from '../../src/mail/smtp-target.js';

describe('quota limits', () => {
  it.each([
    ['0', 0],
    ['10000', 10_000],
    ['1000000000', 1_000_000_000],
    ['unlimited', null],
    ['1000000001', undefined],
    ['-1', undefined],
    ['1.5', undefined],
    ['', undefined],
    ['10 ', undefined],
  ] as const)('parses %j as %j', (raw, limit) => {
    expect(parseQuotaLimit(raw)).toBe(limit);
  });

  it('refuses a limit no project can have, whoever passes it', () => {
    expect(checkQuotaLimit(null)).toBeNull();
    expect(checkQuotaLimit(5)).toBe(5);
    for (const bad of [-1, 0.5, 1_000_000_001, Number.NaN, Infinity])
      expect(() => checkQuotaLimit(bad)).toThrow(
        'Quota must be a whole number up to 1000000000, or unlimited',
      );
  });
});

describe('quota windows', () => {
  const at = Date.UTC(2026, 1, 28, 23, 59, 30);
  it('are fixed UTC calendar windows', () => {
    expect(quotaWindow('hour', at)).toEqual({
      start: Date.UTC(2026, 1, 28, 23),
      end: Date.UTC(2026, 2, 1, 0),
    });
    expect(quotaWindow('day', at)).toEqual({ start: Date.UTC(2026, 1, 28), end: Date.UTC(2026, 2, 1) });
    expect(quotaWindow('month', at)).toEqual({ start: Date.UTC(2026, 1, 1), end: Date.UTC(2026, 2, 1) });
    expect(quotaWindow('month', Date.UTC(2026, 11, 31, 12))).toEqual({
      start: Date.UTC(2026, 11, 1),
      end: Date.UTC(2027, 0, 1),
    });
  });
  it('report what is left and when it resets (Unix seconds)', () => {
    const window = quotaWindow('day', at);
    expect(quotaState(20, 5, window)).toEqual({
      limit: 20,
      used: 5,
      remaining: 15,
      reset: window.end / 1000,
    });
    // A limit lowered below what was used: the count stays true, and nothing is left.
    expect(quotaState(20, 25, window)).toMatchObject({ used: 25, remaining: 0 });
  });
});

describe('retry delay', () => {
  it('doubles from the base for mail, with equal jitter in [delay/2, delay]', () => {
    const mail = deliveryBackoff(1000);
    expect(backoffDelay(1, mail, () => 0)).toBe(500);
    expect(backoffDelay(1, mail, () => 1)).toBe(1000);
    expect(backoffDelay(3, mail, () => 1)).toBe(4000);
    expect(backoffDelay(3, mail, () => 0)).toBe(2000);
    expect(backoffDelay(40, mail, () => 1)).toBe(6 * 3_600_000);
  });

  it('only lengthens a webhook delay, by up to a fifth, so the documented schedule is a lower bound', () => {
    const hooks = webhookBackoff(10_000);
    expect(backoffDelay(1, hooks, () => 0)).toBe(10_000);
    expect(backoffDelay(1, hooks, () => 1)).toBe(12_000);
    expect(backoffDelay(4, hooks, () => 0)).toBe(80_000);
    expect(backoffDelay(40, hooks, () => 0)).toBe(6 * 3_600_000);
    expect(backoffDelay(40, hooks, () => 1)).toBe(25_920_000);
  });
});

describe('SMTP failure classification', () => {
  it('treats 5xx as permanent and 4xx and network errors as transient', () => {
    expect(
      classifySmtpError({
        responseCode: 550,
        response: '550 5.1.1 <x@y>: Recipient address rejected',
        command: 'RCPT TO',
      }),
    ).toEqual({
      kind: 'permanent',
      message: 'SMTP 550 5.1.1 <x@y>: Recipient address rejected',
      smtpCode: 550,
      // Which command the reply answered decides whether it is about the recipient.
      command: 'RCPT TO',
    });
    expect(classifySmtpError({ responseCode: 550, response: '550 5.1.1 sender' }).command).toBeNull();
    // A reply is stored as one line, without the control characters PostgreSQL's text refuses.
    expect(
      classifySmtpError({ responseCode: 550, response: '550 no\u0000 such\r\n\u0001user' }).message,
    ).toBe('SMTP 550 no such user');
    expect(classifySmtpError({ responseCode: 421, response: '421 4.7.0 Try later' }).kind).toBe('transient');
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ESOCKET' });
    expect(classifySmtpError(refused)).toMatchObject({ kind: 'transient', smtpCode: null });
    const envelope = Object.assign(new Error('No recipients defined'), { code: 'EENVELOPE' });
    expect(classifySmtpError(envelope).kind).toBe('permanent');
  });

  it('words a multi-line reply once: its code and status, then the text of each line', () => {
    const rejected = Object.assign(new Error('Message failed'), {
      code: 'EMESSAGE',
      command: 'DATA',
      responseCode: 550,
      response:
        '550-5.7.1 Message rejected\n550-5.7.1 because of policy\n550 5.7.1 see https://mx.example/why',
    });
    expect(classifySmtpError(rejected)).toMatchObject({
      kind: 'permanent',
      message: 'SMTP 550 5.7.1 Message rejected because of policy see https://mx.example/why',
      smtpCode: 550,
    });
    const plain = { responseCode: 451, response: '451-Try again\n451 later', command: 'RCPT TO' };
    expect(classifySmtpError(plain).message).toBe('SMTP 451 Try again later');
    // Lines that are not all reply lines are kept as they came.
    expect(oneReply('550 one\nnot a reply line')).toBe('550 one\nnot a reply line');
  });

  it("reads a relay's refusal of Herald's login, or its demand for one, as settings to fix: transient", () => {
    const refused = Object.assign(new Error('Invalid login'), {
      code: 'EAUTH',
      command: 'AUTH PLAIN',
      responseCode: 535,
      response: '535 5.7.8 Authentication credentials invalid',
    });
    expect(classifySmtpError(refused)).toEqual({
      kind: 'transient',
      message:
        "SMTP 535 5.7.8 Authentication credentials invalid (the relay refused Herald's login: check the SMTP user and password)",
      smtpCode: 535,
      command: 'AUTH PLAIN',
    });
    // A 530 at MAIL FROM without a login given: a login, or TLS first (RFC 3207), is wanted.
    const wanted = Object.assign(new Error('Mail command failed'), {
      code: 'EENVELOPE',
      command: 'MAIL FROM',
      responseCode: 530,
      response: '530 5.7.0 Must issue a STARTTLS command first',
    });
    expect(classifySmtpError(wanted)).toMatchObject({
      kind: 'transient',
      message: expect.stringMatching(
        /\(the relay wants a login, or TLS, first: check the SMTP user, password and security\)$/,
      ),
    });
    // Any other 5xx at MAIL FROM stays final.
    expect(
      classifySmtpError({ ...wanted, responseCode: 550, response: '550 5.7.1 Sender rejected' }).kind,
    ).toBe('permanent');
  });
});

describe('SMTP URLs', () => {
  it('parse credentials, security and default ports', () => {
    expect(parseSmtpUrl('smtps://us%40er:p%3Ass@mail.example')).toEqual({
      host: 'mail.example',
      port: 465,
      security: 'tls',
      username: 'us@er',
      password: 'p:ss',
    });
    expect(parseSmtpUrl('smtp://relay.example:2525?security=none')).toMatchObject({
      port: 2525,
      security: 'none',
    });
    expect(parseSmtpUrl('smtp://relay.example')).toMatchObject({
      port: 587,
      security: 'auto',
      username: null,
    });
    expect(() => parseSmtpUrl('http://relay.example')).toThrow(/smtp/);
    expect(() => parseSmtpUrl('smtp://relay.example?security=maybe')).toThrow(/security/);
    // A mistyped option is refused, not left to leave `auto` in force.
    for (const url of ['smtp://relay.example?tls=none', 'smtp://relay.example?Security=none&security=none'])
      expect(() => parseSmtpUrl(url)).toThrow(/^SMTP URL option '(tls|Security)' is not known/);
    // A password with an unescaped `?` ends the URL's authority there: the rest is not repeated.
    expect(() => parseSmtpUrl('smtp://mailer:2024?Summer@smtp.example.com')).toThrow(
      /^SMTP URL option is not known: the only one is security/,
    );
    expect(() => parseSmtpUrl('smtp://relay.example?security=none&security=tls')).toThrow(
      'SMTP URL gives security more than once',
    );
    // A password with an unescaped `/` or `#` would leave its first part as the host: refused, unrepeated.
    for (const url of [
      'smtp://mailer:2024/Summer@smtp.example.com',
      'smtp://mailer:2024#Summer@smtp.example.com',
      'smtp://relay.example:587/path',
    ])
      expect(() => parseSmtpUrl(url), url).toThrow(
        /^SMTP URL has a path or a #, which a relay has no use for: in a user name or password write \/ as %2F and # as %23$/,
      );
    expect(parseSmtpUrl('smtp://relay.example:2525/')).toMatchObject({ host: 'relay.example', port: 2525 });
    expect(parseSmtpUrl('smtp://mailer:2024%2FSummer@smtp.example.com')).toMatchObject({
      host: 'smtp.example.com',
      password: '2024/Summer',
    });
    // A % that starts no escape is the URL's mistake, said as such, not a URIError.
    expect(() => parseSmtpUrl('smtp://u%:secret@relay.example')).toThrow(
      'SMTP URL user name has a % that starts no %XX escape: write a % as %25',
    );
  });

  it('describe a target as a URL again, with an IPv6 host in brackets and no password', () => {
    expect(describeSmtpTarget(parseSmtpUrl('smtp://u:secret@[::1]:2525'))).toBe(
      'smtp://u@[::1]:2525 (security=auto)',
    );
    expect(describeSmtpTarget(parseSmtpUrl('smtps://relay.example'))).toBe(
      'smtps://relay.example:465 (security=tls)',
    );
  });
});

describe('send request validation', () => {
  it('takes placeholder objects up to 32 levels deep, and no NUL, lone surrogate or infinity anywhere', () => {
    const nested = (levels: number) => {
      let value: Record<string, unknown> = { leaf: 'x' };
      for (let i = 1; i < levels; i++) value = { a: value };
      return value;
    };
    expect(parseSendRequest({ template: 't', data: nested(32) }).data).toEqual(nested(32));
    expect(() => parseSendRequest({ template: 't', data: nested(33) })).toThrow(
      "Invalid 'data' (nested deeper than 32 levels)",
    );
    expect(() => parseSendRequest({ template: 't', variables: { list: [[{ a: 'b\u0000' }]] } })).toThrow(
      "Invalid 'variables' (contains a NUL character)",
    );
    expect(() => parseSendRequest({ template: 'a\u0000' })).toThrow("Missing or invalid 'template'");
    expect(() => parseSendRequest({ template: 't', data: { a: { '\udfff': 'x' } } })).toThrow(
      "Invalid 'data' (contains a lone surrogate, which is not Unicode text)",
    );
    expect(() => parseSendRequest({ template: 't', data: { big: -Infinity } })).toThrow(
      "Invalid 'data' (contains a number past ±1.8e308, which JSON cannot keep)",
    );
    // A pair of surrogates is one character (an emoji), and 1.7e308 is a number JSON keeps.
    expect(parseSendRequest({ template: 't', data: { e: '\ud83d\ude00', n: 1.7e308 } }).data).toEqual({
      e: '😀',
      n: 1.7e308,
    });
  });

  it('checks template, then type, then to', () => {
    expect(() => parseSendRequest({ type: 'sms', to: 'bad' })).toThrow("Missing or invalid 'template'");
    expect(() => parseSendRequest({ template: 't', type: 'sms', to: 'bad' })).toThrow(
      "Only 'email' type is supported",
    );
    expect(() => parseSendRequest({ template: 't', to: 'bad' })).toThrow(
      "Missing or invalid 'to' (recipient email)",
    );
  });
  it('merges variables and data, data winning', () => {
    expect(parseSendRequest({ template: 't', variables: { a: '1', b: '2' }, data: { b: '3' } }).data).toEqual(
      {
        a: '1',
        b: '3',
      },
    );
  });
});

describe('relay replies kept for people', () => {
  it('are cut to a bounded length, whatever the relay sends', () => {
    const failure = classifySmtpError({
      responseCode: 550,
      response: `550 5.1.1 ${'A'.repeat(200_000)}`,
      message: 'rejected',
    });
    expect(failure.kind).toBe('permanent');
    expect(failure.message.length).toBeLessThanOrEqual(1010);
    expect(failure.message).toMatch(/^SMTP 550 5\.1\.1 A+… \(cut\)$/);
  });
});
