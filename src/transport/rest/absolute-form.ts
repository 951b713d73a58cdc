import { isHostAndPort } from "./uri-host.js";

// An absolute-form target's origin-form path (with its query) and authority; null when it is not an http or https
// URI with a host and no user information (RFC 9110 4.2.1 and 4.2.4: such a URI is invalid), or when its authority
// is not a host and port a Host header could carry (the authority takes the Host header's place).
export function absoluteForm(target: string): { path: string; authority: string } | null {
  const match = /^(https?):\/\/([^/?#]*)([^#]*)$/i.exec(target);
  if (match === null) return null;
  const authority = match[2]!;
  if (authority === "" || !isHostAndPort(authority)) return null;
  const rest = match[3]!;
  return { path: rest.startsWith("/") ? rest : `/${rest}`, authority };
}
