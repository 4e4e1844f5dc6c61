import { Messages } from '../domain/errors.js';
import { RENDER_FAILED } from '../domain/template/budget.js';
import { publicStatus, type NotificationState } from '../domain/notification-state.js';

/**
 * Formatting helpers handed to the views as `it.h`. They return plain text; the views escape it
 * with `<%= %>` like every other value. Times are shown in UTC, the zone the filters use too.
 */

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const pad = (n: number) => String(n).padStart(2, '0');

function time(ms: number | null | undefined): string {
  if (ms == null) return '—';
  const d = new Date(ms);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
}

function iso(ms: number | null | undefined): string {
  return ms == null ? '' : new Date(ms).toISOString();
}

/** `YYYY-MM-DDTHH:MM` in UTC, the value of a datetime-local input. */
function inputTime(ms: number | null | undefined): string {
  return ms == null ? '' : new Date(ms).toISOString().slice(0, 16);
}

function ago(ms: number | null | undefined, now = Date.now()): string {
  if (ms == null) return 'never';
  const seconds = Math.max(0, Math.round((now - ms) / 1000));
  if (seconds < 45) return 'just now';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 36) return `${hours} h ago`;
  const days = Math.round(hours / 24);
  return days < 60 ? `${days} days ago` : time(ms).slice(0, 10);
}

/**
 * When a relay that is down is probed next, as the banner's clause: a time that has passed means a
 * probe is due or under way (its worker moves the time on when the probe ends).
 */
function nextProbe(at: number | null, now = Date.now()): string {
  if (at === null) return '';
  return at > now ? `, next at ${time(at)}` : ', the next one due now';
}

/** `text` as one word of a POSIX shell command, for examples people paste into a terminal. */
function shellWord(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** The JSON body of the send example on a project's key page, naming `template`. */
function sendExample(template: string): string {
  return `{"template": ${JSON.stringify(template)}, "to": "jane@example.org", "data": {"user_name": "Jane"}}`;
}

function day(ms: number): string {
  const d = new Date(ms);
  return `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;
}

function hour(ms: number): string {
  return `${pad(new Date(ms).getUTCHours())}:00`;
}

function num(n: number): string {
  return n.toLocaleString('en-US');
}

/** A size in bytes as people read it: `812 B`, `14.2 KiB`, `9.8 MiB`. */
function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

function percent(part: number, whole: number): number {
  return whole <= 0 ? 0 : Math.min(100, Math.round((part / whole) * 100));
}

function periodLabel(period: string): string {
  return period === 'hour' ? 'this hour' : period === 'day' ? 'today' : 'this month';
}

/** A query string of the non-empty values, e.g. `?project=2&status=sent`, or ''. */
function query(params: Readonly<Record<string, string | number | null | undefined>>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params))
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}

/**
 * A message's badge: its public status, but `canceled` (grey) for one canceled (by its sender or an
 * operator), which the API reports as failed with `Canceled` and nobody should read as a delivery
 * failure.
 */
function badge(n: { state: NotificationState; error_message: string | null }): {
  cls: string;
  label: string;
} {
  const status = publicStatus(n.state);
  if (status === 'failed' && n.error_message === Messages.canceled)
    return { cls: 'neutral', label: 'canceled' };
  return { cls: status, label: status };
}

/** Whether the message failed because its template could not be rendered with its data. */
function renderFailed(n: { state: NotificationState; error_message: string | null }): boolean {
  return n.state === 'failed' && (n.error_message ?? '').startsWith(`${RENDER_FAILED}:`);
}

/** Whether the message was captured (rendered and kept, not sent): not a failure in capture mode. */
function captured(n: { state: NotificationState; transport: string | null }): boolean {
  return n.transport === 'capture' && publicStatus(n.state) === 'sent';
}

export const helpers = {
  badge,
  renderFailed,
  captured,
  time,
  iso,
  inputTime,
  ago,
  nextProbe,
  shellWord,
  sendExample,
  day,
  hour,
  num,
  bytes,
  percent,
  status: publicStatus,
  periodLabel,
  query,
  enc: encodeURIComponent,
};

export type Helpers = typeof helpers;
