// Whether a request target (path and query) is the virtualization API's, served by the VCD adapter
// (vcd-handler.ts); the server's routing and the refusals of Node's HTTP parser both ask.
export function isVcdPath(target: string): boolean {
  return target === "/api" || target.startsWith("/api/") || target.startsWith("/api?");
}
