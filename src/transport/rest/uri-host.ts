// RFC 3986's host and optional port, as a Host header (RFC 9110 section 7.2) or an absolute-form target's authority
// carries them: an IP literal in brackets, or a reg-name (IPv4 addresses among them) of unreserved characters,
// sub-delims and percent-encodings; no user information. Brackets are not checked for IPv6's own form. The
// virtualization API writes this value into every href it answers with (docs/vcd.md), so nothing else may pass.
const HOST_AND_PORT = /^(?:\[[0-9A-Za-z._~!$&'()*+,;=:%-]+\]|(?:[0-9A-Za-z._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?$/;

export function isHostAndPort(value: string): boolean {
  return HOST_AND_PORT.test(value);
}
