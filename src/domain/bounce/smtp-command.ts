/**
 * The SMTP command a server refused, as the reports name it. It matters: "User unknown" in reply
 * to RCPT TO is about the address; the same words after DATA come from a content filter.
 */
export type SmtpCommand = 'CONN' | 'EHLO' | 'MAIL' | 'RCPT' | 'DATA';

/**
 * How each MTA says which command failed, on normalised (lowercased, single-spaced) text. The first
 * mention wins: reports name the failing command before they quote the reply.
 */
const MENTIONS: readonly (readonly [RegExp, (word: string) => SmtpCommand | null])[] = [
  // Postfix: "(in reply to RCPT TO command)", "(in reply to end of DATA command)"
  [/in reply to (rcpt to|mail from|end of data|data|helo|ehlo|message text)\b/, wordToCommand],
  // Exim: "SMTP error from remote mail server after RCPT TO:<…>", "after end of data", "after MAIL FROM:"
  [
    /\bafter (rcpt to|rcpt|mail from|mail|end of data|data|helo|ehlo|initial connection|connect|conn|pipelined data)\b/,
    wordToCommand,
  ],
  // DragonFly: "did not like our RCPT TO:", "… our final DATA:"
  [/did not like our (rcpt to|mail from|final data|data|helo|ehlo)\b/, wordToCommand],
  // qmail: "most progress was RCPT TO response"
  [/most progress was (rcpt to|mail from|data|helo|ehlo)\b/, wordToCommand],
  // sendmail transcripts ">>> RCPT To:<…>"; InterScan "Sent <<< RCPT TO:<…>"
  [/(?:>>>|sent <<<) (rcpt to|mail from|data|helo|ehlo)\b/, wordToCommand],
  // Yahoo "[RCPT_TO]", an MTA's "SMTP:RCPT host …", "(DATA)" after "refused to accept your message"
  [/\[(rcpt_to|mail_from|data)\]/, wordToCommand],
  [/\bsmtp:(rcpt|mail|data)\b/, wordToCommand],
  // qmail-remote: "192.0.2.1 does not like recipient.", "… does not like sender.", "… failed on DATA command."
  [/does not like (recipient|sender)\b/, (word) => (word === 'recipient' ? 'RCPT' : 'MAIL')],
  [/failed on (data) command/, wordToCommand],
  // mFilter: "-------SMTP command DATA"
  [/smtp command:? (rcpt|mail|data)\b/, wordToCommand],
  [/refused to accept your message \((data|rcpt to|mail from)\)/, wordToCommand],
  // Postfix and OpenSMTPD connection stages
  [/while (?:performing the )?(helo|ehlo) handshake/, wordToCommand],
  [/(?:initial server greeting|connect to \S+ ?: )/, () => 'CONN'],
];

function wordToCommand(word: string): SmtpCommand | null {
  const w = word.replace(/_/g, ' ');
  if (w.startsWith('rcpt')) return 'RCPT';
  if (w.startsWith('mail')) return 'MAIL';
  if (w.includes('data') || w === 'message text') return 'DATA';
  if (w === 'helo' || w === 'ehlo') return 'EHLO';
  if (w.includes('conn')) return 'CONN';
  return null;
}

/** The command named in a normalised report or reply, or null. */
export function smtpCommandIn(text: string): SmtpCommand | null {
  let best: { at: number; command: SmtpCommand } | null = null;
  for (const [pattern, toCommand] of MENTIONS) {
    const match = pattern.exec(text);
    if (match === null || (best !== null && match.index >= best.at)) continue;
    const command = toCommand(match[1] ?? '');
    if (command !== null) best = { at: match.index, command };
  }
  return best?.command ?? null;
}
