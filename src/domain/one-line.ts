/**
 * Text another server wrote (an SMTP reply, a bounce report's diagnostic) as one line: every run
 * of white space and control characters becomes one space. NUL goes too: PostgreSQL's text
 * cannot hold it, so a reply or report carrying one would fail to be stored at all.
 */
export function oneLine(text: string): string {
  return text.replace(/[\s\p{Cc}]+/gu, ' ').trim();
}
