// The virtualization API's version negotiation (CONTRACT section 7): every call names the API version it speaks in
// Accept, as `application/*;version=38.0` or `application/*+xml;version=38.0` (any application media type with a
// version parameter is read), and the server answers in that version or refuses with 406.

// The first supported version among the media ranges of Accept, or null.
export function negotiateVersion(accept: string | undefined, supported: readonly string[]): string | null {
  if (accept === undefined) return null;
  for (const range of accept.split(",")) {
    const [type, ...params] = range.split(";").map((part) => part.trim());
    if (type === undefined || !type.toLowerCase().startsWith("application/")) continue;
    const versions: string[] = [];
    let acceptable = true;
    for (const param of params) {
      const eq = param.indexOf("=");
      if (eq < 0) continue;
      const name = param.slice(0, eq).trim().toLowerCase();
      const value = param.slice(eq + 1).trim().replace(/^"|"$/g, "");
      if (name === "version") versions.push(value);
      // A weight of 0 marks the range "not acceptable" (RFC 9110 12.4.2): it names no version to answer in.
      else if (name === "q") acceptable = !/^0(\.0{0,3})?$/.test(value);
    }
    const version = acceptable ? versions.find((v) => supported.includes(v)) : undefined;
    if (version !== undefined) return version;
  }
  return null;
}
