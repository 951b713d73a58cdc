import { ScalarType, create } from "@bufbuild/protobuf";
import type { DescField, DescMessage, DescMethod, Message } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../../gen/compute/auth/v2/auth_pb.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { apiServices } from "../../src/routes.js";
import { adminAuth } from "../support/credentials.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { wireCall } from "../support/wire-call.js";
import { writeTestCatalog } from "./compute-helpers.js";
import { adminCall, buildMethodWorld, nameOf } from "./every-method-world.js";
import type { MethodWorld } from "./every-method-world.js";

// A NUL character (U+0000) in any string field of any method, from the descriptors: PostgreSQL's text cannot hold
// one, and an id "x%00y" or a description "a\u0000b" was INTERNAL (HTTP 500) on it where SQLite answered 404 or
// stored it. On both stores now: an id with a NUL is one no resource has (NOT_FOUND, or an empty list), stored
// text with one is refused (INVALID_ARGUMENT), and nothing is changed. CI runs this file on both stores.

let server: TestServer;
let catalogDir: ReturnType<typeof tempDir>;
let world: MethodWorld;

beforeAll(async () => {
  catalogDir = tempDir();
  server = await startServer({ env: { CATALOG_FILE: writeTestCatalog(catalogDir.path) } });
  world = await buildMethodWorld(server, "nul-ns");
  // The world's UpdateCryptoKey once, so that the calls below that change another field than its mask's change nothing.
  await adminCall(server, KeyManagerService.method.updateCryptoKey, world.requestFor(KeyManagerService.method.updateCryptoKey));
});
afterAll(async () => {
  await server?.stop();
  catalogDir?.remove();
});

// Every singular string field of the request, and of the messages in it two levels down, as a chain of fields.
function stringFields(desc: DescMessage, prefix: DescField[] = []): DescField[][] {
  const out: DescField[][] = [];
  for (const f of desc.fields) {
    if (f.fieldKind === "scalar" && f.scalar === ScalarType.STRING) out.push([...prefix, f]);
    if (f.fieldKind === "message" && prefix.length < 2 && !f.message.typeName.startsWith("google.protobuf.")) out.push(...stringFields(f.message, [...prefix, f]));
  }
  return out;
}

// The method's usual request, with a NUL and a letter after the value of the field the chain names.
function withNul(m: DescMethod, chain: DescField[]): Message {
  const request = world.requestFor(m) as unknown as Record<string, unknown>;
  let target = request;
  for (const f of chain.slice(0, -1)) {
    target[f.localName] ??= create(f.message!);
    target = target[f.localName] as Record<string, unknown>;
  }
  const leaf = chain[chain.length - 1]!.localName;
  target[leaf] = `${(target[leaf] as string) || "x"}\u0000z`;
  return request as unknown as Message;
}

const cases = apiServices
  .flatMap((s) => s.methods)
  .flatMap((m) => stringFields(m.input).map((chain) => [`${nameOf(m)} ${chain.map((f) => f.localName).join(".")}`, m, chain] as const));

describe("a NUL in a string field", () => {
  it("is in some field of most methods", () => {
    expect(cases.length).toBeGreaterThan(40);
  });

  it.each(cases)("%s: never INTERNAL, over gRPC and REST", async (_name, m, chain) => {
    const key = KeyManagerService.method.getCryptoKey;
    const before = await adminCall(server, key, { keyId: world.values.key_id });
    for (const protocol of ["grpc", "rest"] as const) {
      const answer = await wireCall(server.url, protocol, m, withNul(m, chain) as never, adminAuth(server.url));
      const seen = `${protocol}: ${answer.code} ${answer.message}`;
      expect(answer.http, seen).toBeLessThan(500);
      expect([2, 13], seen).not.toContain(answer.code);
      // Text that would be stored is refused.
      if (chain[chain.length - 1]!.name === "description") expect(answer.code, seen).toBe(3);
    }
    expect(await adminCall(server, key, { keyId: world.values.key_id })).toEqual(before);
  });
});

describe("a NUL in the client id of service_auth", () => {
  it("is a client id no account has: 401 over REST and the XML surface's sessions, on both stores", async () => {
    const rest = await wireCall(server.url, "rest", AuthService.method.serviceAuth, create(AuthService.method.serviceAuth.input, { clientId: "sa-\u0000x", clientSecret: "cpcs.sa-x.y" }));
    expect([rest.http, rest.code]).toEqual([401, 16]);
    const basic = Buffer.from("sa-\u0000x:secret").toString("base64");
    const xml = await fetch(`${server.url}/api/sessions`, { method: "POST", headers: { authorization: `Basic ${basic}`, accept: "application/*+xml;version=38.0" } });
    expect(xml.status).toBe(401);
  });
});
