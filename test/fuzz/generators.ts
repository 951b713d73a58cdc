import type { DescService } from "@bufbuild/protobuf";
import { getOption } from "@bufbuild/protobuf";
import { http as httpRule } from "../../gen/google/api/annotations_pb.js";
import { apiServices } from "../../src/routes.js";

// Random inputs for every surface, from the services' descriptors: each gRPC path, each REST route. A seeded
// generator, so that a failing run can be replayed with its seed.

export class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0 || 1;
  }
  // xorshift32: small, fast and reproducible; nothing here needs more.
  next(): number {
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x >>> 0;
    return this.state / 0x100000000;
  }
  int(max: number): number {
    return Math.floor(this.next() * max);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  bytes(n: number): Buffer {
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i++) out[i] = this.int(256);
    return out;
  }
  // Sizes mostly small, sometimes large: what finds both parser edge cases and cost problems.
  size(): number {
    return this.pick([0, 1, 2, 5, 16, 100, 1000, 4096, 65536, 300_000]);
  }
  text(n: number): string {
    const alphabet = ["a", "Z", "0", "-", "_", ".", "/", "%", "\u0000", "\u00e9", "\u{1f511}", '"', "\\", " ", "{", "}", ":", ",", "\n"];
    let s = "";
    for (let i = 0; i < n; i++) s += this.pick(alphabet);
    return s;
  }
}

export const grpcPaths: string[] = apiServices.flatMap((s: DescService) => s.methods.map((m) => `/${s.typeName}/${m.name}`));

// REST routes as [HTTP method, path template] from each method's google.api.http rule.
export const restRoutes: [string, string][] = apiServices.flatMap((s) =>
  s.methods.flatMap((m): [string, string][] => {
    const rule = getOption(m, httpRule);
    const p = rule.pattern;
    return p.case === undefined || p.case === "custom" ? [] : [[p.case.toUpperCase(), p.value]];
  }),
);

// A gRPC or gRPC-web request body: a valid envelope around random bytes, or a broken envelope.
export function grpcBody(r: Random): Buffer {
  const payload = r.bytes(r.size());
  const envelope = Buffer.alloc(5);
  envelope.writeUInt32BE(payload.length, 1);
  switch (r.int(5)) {
    case 0:
      envelope[0] = r.int(256); // flags: compressed without an encoding, or nonsense
      break;
    case 1:
      envelope.writeUInt32BE(r.int(0x100000000), 1); // a length that lies
      break;
    case 2:
      return r.bytes(r.int(8)); // not even an envelope
    default:
      break;
  }
  return Buffer.concat([envelope, payload]);
}

// A JSON-ish body: valid JSON with random fields and values, or JSON cut short or corrupted.
export function jsonBody(r: Random): string {
  const fields = ["parentId", "keyId", "keyVersionId", "plaintext", "ciphertext", "additionalAuthenticatedData", "name", "labels", "updateMask", "key", "page", "clusterId", "nodePoolName", "nodeConfig", "scalePolicy", "timeout", r.text(6)];
  const value = (depth: number): unknown => {
    switch (r.int(depth > 2 ? 5 : 7)) {
      case 0:
        return r.text(r.int(40));
      case 1:
        return r.int(2) === 0 ? r.int(1_000_000) - 500_000 : r.next() * 1e300;
      case 2:
        return r.int(2) === 0;
      case 3:
        return null;
      case 4:
        return Buffer.from(r.bytes(r.int(64))).toString("base64");
      case 5:
        return Array.from({ length: r.int(depth > 0 ? 5 : 200) }, () => value(depth + 1));
      default:
        return Object.fromEntries(Array.from({ length: r.int(6) }, () => [r.pick(fields), value(depth + 1)]));
    }
  };
  const text = JSON.stringify(Object.fromEntries(Array.from({ length: r.int(6) }, () => [r.pick(fields), value(0)])));
  switch (r.int(6)) {
    case 0:
      return text.slice(0, r.int(text.length + 1));
    case 1:
      return text.replace(/[:,]/, r.text(1));
    default:
      return text;
  }
}

// A path for a REST route: its variables filled with random segments, now and then something else entirely.
export function restPath(r: Random, template: string): string {
  if (r.int(10) === 0) return `/${encodeURIComponent(r.text(r.int(30)))}`;
  return template.replace(/\{[^}]+\}/g, () => {
    switch (r.int(4)) {
      case 0:
        return encodeURIComponent(r.text(r.int(20)));
      case 1:
        return String(r.int(10));
      case 2:
        return "%" + r.text(2);
      default:
        return "x".repeat(r.int(2) === 0 ? 3 : 3000);
    }
  });
}

export function queryString(r: Random): string {
  const names = ["parentId", "page.limit", "page.offset", "clusterId", "keyId", r.text(5)];
  const parts = Array.from({ length: r.int(5) }, () => `${encodeURIComponent(r.pick(names))}=${encodeURIComponent(r.text(r.int(20)))}`);
  return parts.length === 0 ? "" : `?${parts.join("&")}`;
}
