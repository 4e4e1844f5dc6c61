/** A host as it stands in a URL: an IPv6 literal goes in brackets. */
export function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
