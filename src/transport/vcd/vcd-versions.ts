// The virtualization API's version negotiation (CONTRACT section 7): every call names the API version it speaks in
// Accept, as `application/*;version=38.0` or `application/*+xml;version=38.0` (any application media type with a
// version parameter is read), and the server answers in that version or refuses with 406.

// The first supported version among the media ranges of Accept, or null.
export function negotiateVersion(accept: string | undefined, supported: readonly string[]): string | null {
  if (accept === undefined) return null;
  for (const range of accept.split(",")) {
    const [type, ...params] = range.split(";").map((part) => part.trim());
    if (type === undefined || !type.toLowerCase().startsWith("application/")) continue;
    for (const param of params) {
      const eq = param.indexOf("=");
      if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== "version") continue;
      const version = param.slice(eq + 1).trim().replace(/^"|"$/g, "");
      if (supported.includes(version)) return version;
    }
  }
  return null;
}
