/**
 * A report that costs mailparser the better part of a second (docs/security.md, issue 27 finding
 * 4): under 1 MiB, sent to plain bounces@ (no token needed), with a part whose Content-Type has
 * 60,000 RFC 2231 parameters. The top-level header section is small, so bounding it does not help.
 */
export function hostileReport(domain: string): Buffer {
  const params = Array.from({ length: 60_000 }, (_, i) => `x*${i}*=a`).join(';\r\n ');
  return Buffer.from(
    [
      'From: MAILER-DAEMON@attacker.example',
      `To: bounces@${domain}`,
      'Subject: Undelivered Mail Returned to Sender',
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b"',
      '',
      '--b',
      `Content-Type: text/plain; ${params}`,
      '',
      'hello',
      '--b--',
      '',
    ].join('\r\n'),
  );
}
