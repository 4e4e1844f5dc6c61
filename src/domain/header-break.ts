/**
 * Characters that would break a header line or smuggle a new one in: the C0 controls (CR and LF
 * among them), DEL, NEL and the Unicode line and paragraph separators. Addresses containing one are
 * refused; subjects, names and other header values have each of them replaced.
 */
const SET = '\\u0000-\\u001f\\u007f\\u0085\\u2028\\u2029';

/** Tests whether a string holds any header-breaking character. */
export const HEADER_BREAK = new RegExp(`[${SET}]`);
/** Every header-breaking character, one at a time (for `replace`). */
export const HEADER_BREAKS = new RegExp(`[${SET}]`, 'g');
/** Every run of header-breaking characters (for `replace`). */
export const HEADER_BREAK_RUNS = new RegExp(`[${SET}]+`, 'g');
