import type { IncomingHttpHeaders } from "node:http";
import type { HeaderSource } from "../pipeline/call.js";

// Node's request headers (HTTP/1.1 and HTTP/2 alike) as the pipeline reads them: the first value of a name.
export class NodeHeaders implements HeaderSource {
  constructor(private readonly headers: IncomingHttpHeaders) {}

  get(name: string): string | undefined {
    const value = this.headers[name];
    return Array.isArray(value) ? value[0] : value;
  }
}
