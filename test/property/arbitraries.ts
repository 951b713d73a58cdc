import { gzipSync, brotliCompressSync } from "node:zlib";
import { ScalarType, create, getOption, toBinary, toJsonString } from "@bufbuild/protobuf";
import type { DescEnum, DescField, DescMessage, DescMethod, DescService, Message } from "@bufbuild/protobuf";
import fc from "fast-check";
import { http as httpRule } from "../../gen/google/api/annotations_pb.js";
import { apiServices, infrastructureServices } from "../../src/routes.js";

// fast-check arbitraries for what a caller can put on the wire, shared by the property tests (test/property/) and
// the long runs of `npm run fuzz -- --properties`. Every arbitrary yields a plain "plan" (strings, numbers, small
// byte arrays, message field values) that fast-check can print and shrink; the `build*` functions turn a plan into
// the bytes and headers that are sent. Methods, routes and request fields come from the generated descriptors.

// ---------------------------------------------------------------------------------------------------------------
// What the server serves, from the descriptors.

export interface UnaryMethod {
  path: string;
  method: DescMethod;
}

// Every unary method of every service the server registers (the product's and gRPC's own health service).
export const unaryMethods: UnaryMethod[] = [...apiServices, ...infrastructureServices].flatMap((s: DescService) =>
  s.methods.filter((m) => m.methodKind === "unary").map((m) => ({ path: `/${s.typeName}/${m.name}`, method: m })),
);

export interface RestRoute {
  httpMethod: string;
  template: string;
  method: DescMethod;
}

// The REST routes as their google.api.http rules declare them (additional bindings included).
export const restRoutes: RestRoute[] = apiServices.flatMap((s) =>
  s.methods.flatMap((m) => {
    const rule = getOption(m, httpRule);
    return [rule, ...rule.additionalBindings].flatMap((r): RestRoute[] => {
      const p = r.pattern;
      if (p.case === undefined) return [];
      if (p.case === "custom") return [{ httpMethod: p.value.kind, template: p.value.path, method: m }];
      return [{ httpMethod: p.case.toUpperCase(), template: p.value, method: m }];
    });
  }),
);

// Absent most of the time (one case in `odds`), else a value of `arb`: for the mutations that break a request, so
// that most requests still get far enough to meet the next check.
export function rarely<T>(arb: fc.Arbitrary<T>, odds = 5): fc.Arbitrary<T | undefined> {
  return fc.oneof({ arbitrary: fc.constant(undefined), weight: odds - 1 }, { arbitrary: arb, weight: 1 });
}

// ---------------------------------------------------------------------------------------------------------------
// Request messages with random field values.

// Strings that mean something to the services (namespaces, ids, resource names, numbers as text) beside random
// ones: random text alone almost never gets past the first validation. `known` adds ids of resources that exist.
function stringArb(known: readonly string[]): fc.Arbitrary<string> {
  const meaningful = ["", "prop", "ns-1", "a", "1", "0", "-1", "keys/x", "x".repeat(64), "x".repeat(300), "GOOGLE_SYMMETRIC_ENCRYPTION", "AES_256_GCM", "small", ...known];
  return fc.oneof(
    { arbitrary: fc.constantFrom(...meaningful), weight: 4 },
    { arbitrary: fc.string({ maxLength: 24 }), weight: 3 },
    { arbitrary: fc.string({ unit: "binary", maxLength: 12 }), weight: 1 },
  );
}

const INT32 = fc.oneof(fc.integer({ min: -3, max: 1000 }), fc.integer(), fc.constantFrom(2 ** 31 - 1, -(2 ** 31)));
const UINT32 = fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.constantFrom(0xffffffff));
const INT64 = fc.oneof(fc.bigInt({ min: -3n, max: 100_000n }), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }));
const UINT64 = fc.oneof(fc.bigInt({ min: 0n, max: 100_000n }), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }));

function scalarArb(type: ScalarType, known: readonly string[]): fc.Arbitrary<unknown> {
  switch (type) {
    case ScalarType.STRING:
      return stringArb(known);
    case ScalarType.BYTES:
      return fc.oneof(
        { arbitrary: fc.uint8Array({ maxLength: 48 }), weight: 8 },
        // Past the 64 KiB plaintext limit, built on the wire from its length alone.
        { arbitrary: fc.constantFrom(65_536, 65_537).map((n) => new Uint8Array(n)), weight: 1 },
      );
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.DOUBLE:
      return fc.double();
    case ScalarType.FLOAT:
      return fc.float();
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return INT32;
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return UINT32;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return INT64;
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return UINT64;
  }
}

function enumArb(desc: DescEnum): fc.Arbitrary<number> {
  // Declared values, and numbers no value has (proto3 keeps them as they are).
  return fc.oneof({ arbitrary: fc.constantFrom(...desc.values.map((v) => v.number)), weight: 4 }, { arbitrary: fc.integer({ min: -2, max: 300 }), weight: 1 });
}

function mapKeyArb(type: ScalarType, known: readonly string[]): fc.Arbitrary<string> {
  if (type === ScalarType.STRING) return stringArb(known);
  if (type === ScalarType.BOOL) return fc.constantFrom("true", "false");
  return fc.integer({ min: -5, max: 1000 }).map(String);
}

function singleValueArb(field: DescField, known: readonly string[], depth: number): fc.Arbitrary<unknown> | undefined {
  switch (field.fieldKind) {
    case "scalar":
      return scalarArb(field.scalar, known);
    case "enum":
      return enumArb(field.enum);
    case "message":
      return depth > 0 ? messageInitArb(field.message, known, depth - 1) : undefined;
    case "list": {
      const item =
        field.listKind === "scalar" ? scalarArb(field.scalar, known) : field.listKind === "enum" ? enumArb(field.enum) : depth > 0 ? messageInitArb(field.message, known, depth - 1) : undefined;
      return item === undefined ? undefined : fc.array(item, { maxLength: 6 });
    }
    case "map": {
      const value =
        field.mapKind === "scalar" ? scalarArb(field.scalar, known) : field.mapKind === "enum" ? enumArb(field.enum) : depth > 0 ? messageInitArb(field.message, known, depth - 1) : undefined;
      return value === undefined ? undefined : fc.dictionary(mapKeyArb(field.mapKey, known), value, { maxKeys: 6 });
    }
  }
}

// The init object of a message (as `create` takes it): each field present or not, one case of each oneof.
export function messageInitArb(desc: DescMessage, known: readonly string[] = [], depth = 2): fc.Arbitrary<Record<string, unknown>> {
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const field of desc.fields) {
    if (field.oneof !== undefined) continue;
    const arb = singleValueArb(field, known, depth);
    if (arb !== undefined) model[field.localName] = arb;
  }
  for (const oneof of desc.oneofs) {
    const cases = oneof.fields.flatMap((f) => {
      const arb = singleValueArb(f, known, depth);
      return arb === undefined ? [] : [arb.map((value) => ({ case: f.localName, value }))];
    });
    if (cases.length > 0) model[oneof.localName] = fc.oneof(...cases);
  }
  return fc.record(model, { requiredKeys: [] });
}

export function messageArb(desc: DescMessage, known: readonly string[] = []): fc.Arbitrary<Message> {
  return messageInitArb(desc, known).map((init) => create(desc, init as never));
}

// The proto-JSON text of a message; some random values have no JSON form (a field mask path that does not
// convert), and those are sent as an empty object.
export function messageJson(desc: DescMessage, message: Message): string {
  try {
    return toJsonString(desc, message);
  } catch {
    return "{}";
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Header values.

// What Node's HTTP/2 client lets through: tab, visible ASCII, space, and obs-text (0x80-0xff).
const headerChar = fc.oneof(
  { arbitrary: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), weight: 10 },
  { arbitrary: fc.constantFrom(" ", "\t"), weight: 1 },
  { arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)), weight: 1 },
);
export const headerValueArb: fc.Arbitrary<string> = fc.string({ unit: headerChar, maxLength: 40 });

// A header that is absent, one of the values given, or garbage.
function headerArb(values: readonly string[]): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 4 },
    { arbitrary: fc.constantFrom(...values), weight: 3 },
    { arbitrary: headerValueArb, weight: 1 },
  );
}

export type HeaderPlan = Record<string, string | undefined>;

const timeouts = ["1S", "100m", "30000m", "0n", "1n", "5u", "99999999H", "123456789S", "1.5S", "-1S", "5", "S", ""];
const connectTimeouts = ["1000", "1", "0", "30000", "9999999999", "12345678901", "-1", "1.5", "abc", ""];
const encodings = ["identity", "gzip", "br", "deflate", "snappy", "GZIP", "gzip, br"];
const requestIds = ["req-1", "a".repeat(128), "a".repeat(129), "id with space", "ünïcode", "../../etc", "x\ty"];

// Stands for the admin's "Bearer <token>" in a plan: the properties put the token of the server they call in its
// place when they send (properties.ts), so that a plan stays printable and replays against any server.
export const ADMIN_AUTHORIZATION = "<admin token>";

// Credentials: mostly the admin's token alone, so that what comes after authentication (the access check, the
// handlers, the decoding the Connect path does after its interceptor) is reached; sometimes none, and sometimes
// credentials that do not authenticate (a token the server never issued, an empty or malformed one, an API key
// without its workspace, also next to the admin's token), which must get UNAUTHENTICATED and nothing worse.
export const credentialsArb: fc.Arbitrary<HeaderPlan> = fc.oneof(
  { arbitrary: fc.constant({ authorization: ADMIN_AUTHORIZATION }), weight: 8 },
  { arbitrary: fc.constant({}), weight: 1 },
  {
    arbitrary: fc.record({
      authorization: headerArb([ADMIN_AUTHORIZATION, "Bearer t", "Bearer ", "bearer x y", "Basic Zm9vOmJhcg=="]),
      "x-api-key": headerArb(["k"]),
    }),
    weight: 2,
  },
);

// Headers every protocol reads: the request id, credentials, and the timeouts (the deadline stage reads either).
export const commonHeadersArb: fc.Arbitrary<HeaderPlan> = fc
  .tuple(fc.record({ "x-request-id": headerArb(requestIds) }), credentialsArb)
  .map(([a, b]) => ({ ...a, ...b }));

export const grpcHeadersArb: fc.Arbitrary<HeaderPlan> = fc
  .tuple(
    commonHeadersArb,
    fc.record({
      "grpc-timeout": headerArb(timeouts),
      "grpc-encoding": headerArb(encodings),
      "grpc-accept-encoding": headerArb(["gzip", "identity", "br,gzip"]),
      te: fc.option(fc.constant("trailers"), { nil: undefined }),
    }),
  )
  .map(([a, b]) => ({ ...a, ...b }));

export const connectHeadersArb: fc.Arbitrary<HeaderPlan> = fc
  .tuple(
    commonHeadersArb,
    fc.record({
      "connect-protocol-version": headerArb(["1", "2", "0"]),
      "connect-timeout-ms": headerArb(connectTimeouts),
      "content-encoding": headerArb(encodings),
      "accept-encoding": headerArb(["gzip", "identity", "br"]),
    }),
  )
  .map(([a, b]) => ({ ...a, ...b }));

// ---------------------------------------------------------------------------------------------------------------
// gRPC and gRPC-web envelopes.

// One envelope: a flag byte, a declared length (the payload's own unless `lengthDelta` says otherwise), a payload.
export interface FramePlan {
  flag: number;
  payload: Uint8Array;
  // Added to the true length (it lies), or a fixed declared length.
  length: { delta: number } | { declared: number } | undefined;
}

// The body of a gRPC or gRPC-web request: frames, then `cut` bytes removed from the end or `trailing` appended.
export interface EnvelopePlan {
  frames: FramePlan[];
  cut?: number | undefined;
  trailing?: Uint8Array | undefined;
  // The payload of every frame compressed with this before framing (the flag is the plan's own).
  compress?: "gzip" | "br" | undefined;
}

function payloadArb(method: DescMethod, known: readonly string[]): fc.Arbitrary<Uint8Array> {
  return fc.oneof(
    { arbitrary: messageArb(method.input, known).map((m) => toBinary(method.input, m)), weight: 4 },
    { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 3 },
    // A message of another method's type: valid protobuf, wrong fields.
    { arbitrary: fc.constantFrom(...unaryMethods).chain((m) => messageArb(m.method.input, known).map((msg) => toBinary(m.method.input, msg))), weight: 1 },
  );
}

function frameArb(method: DescMethod, known: readonly string[]): fc.Arbitrary<FramePlan> {
  return fc.record({
    flag: fc.oneof({ arbitrary: fc.constant(0), weight: 8 }, { arbitrary: fc.constantFrom(1, 0x80, 0x81, 2), weight: 1 }, { arbitrary: fc.integer({ min: 0, max: 255 }), weight: 1 }),
    payload: payloadArb(method, known),
    length: rarely(
      fc.oneof(
        fc.integer({ min: -8, max: 8 }).map((delta) => ({ delta })),
        fc.constantFrom(0, 4 * 1024 * 1024, 4 * 1024 * 1024 + 1, 0x7fffffff, 0xffffffff).map((declared) => ({ declared })),
      ),
      6,
    ),
  });
}

export function envelopeArb(method: DescMethod, known: readonly string[] = []): fc.Arbitrary<EnvelopePlan> {
  return fc.record({
    frames: fc.oneof({ arbitrary: fc.array(frameArb(method, known), { minLength: 1, maxLength: 1 }), weight: 6 }, { arbitrary: fc.array(frameArb(method, known), { maxLength: 3 }), weight: 2 }),
    cut: rarely(fc.integer({ min: 1, max: 12 }), 8),
    trailing: rarely(fc.uint8Array({ minLength: 1, maxLength: 8 }), 8),
    compress: rarely(fc.constantFrom("gzip" as const, "br" as const), 6),
  });
}

export function buildEnvelope(plan: EnvelopePlan): Buffer {
  const parts = plan.frames.map((f) => {
    const payload = plan.compress === "gzip" ? gzipSync(f.payload) : plan.compress === "br" ? brotliCompressSync(f.payload) : Buffer.from(f.payload);
    const head = Buffer.alloc(5);
    head[0] = f.flag;
    const declared = f.length === undefined ? payload.length : "declared" in f.length ? f.length.declared : Math.max(0, payload.length + f.length.delta);
    head.writeUInt32BE(declared >>> 0, 1);
    return Buffer.concat([head, payload]);
  });
  let body = Buffer.concat(parts);
  if (plan.cut !== undefined) body = body.subarray(0, Math.max(0, body.length - plan.cut));
  if (plan.trailing !== undefined) body = Buffer.concat([body, plan.trailing]);
  return body;
}

// A gRPC call: which method, its body, its headers, and its content type.
export interface GrpcPlan {
  target: UnaryMethod;
  envelope: EnvelopePlan;
  contentType: string;
  headers: HeaderPlan;
}

export const grpcContentTypes = ["application/grpc", "application/grpc+proto", "application/grpc+json"];

export function grpcPlanArb(known: readonly string[] = [], contentTypes: readonly string[] = grpcContentTypes, headers = grpcHeadersArb): fc.Arbitrary<GrpcPlan> {
  return fc
    .constantFrom(...unaryMethods)
    .chain((target) =>
      fc.record({
        target: fc.constant(target),
        envelope: envelopeArb(target.method, known),
        contentType: fc.constantFrom(...contentTypes),
        headers,
      }),
    );
}

// The same call with a well-formed envelope around a valid message of the method's request type, as the admin:
// what gets past decoding and authentication into the handlers (random field values, never INTERNAL).
export function validGrpcPlanArb(known: readonly string[] = []): fc.Arbitrary<GrpcPlan> {
  return fc.constantFrom(...unaryMethods).chain((target) =>
    fc.record({
      target: fc.constant(target),
      envelope: messageArb(target.method.input, known).map((m): EnvelopePlan => ({ frames: [{ flag: 0, payload: toBinary(target.method.input, m), length: undefined }] })),
      contentType: fc.constant("application/grpc"),
      headers: fc.record({ "x-request-id": headerArb(requestIds), authorization: fc.constant(ADMIN_AUTHORIZATION) }),
    }),
  );
}

// gRPC-web: the same envelopes, in the binary form or the text form (base64).
export const grpcWebContentTypes = [
  "application/grpc-web",
  "application/grpc-web+proto",
  "application/grpc-web+json",
  "application/grpc-web-text",
  "application/grpc-web-text+proto",
];

// How a text-form request writes its envelopes: in base64 whole, in base64 a padded segment per frame, or not in
// base64 at all (the binary form's bytes under the text form's content type).
export type TextEncoding = "base64" | "segments" | "raw";

export type GrpcWebPlan = GrpcPlan & { http2: boolean; xGrpcWeb: boolean; text: TextEncoding };

export function grpcWebPlanArb(known: readonly string[] = []): fc.Arbitrary<GrpcWebPlan> {
  return fc.record({
    plan: grpcPlanArb(known, grpcWebContentTypes),
    http2: fc.boolean(),
    xGrpcWeb: fc.boolean(),
    text: fc.constantFrom<TextEncoding>("base64", "base64", "segments", "raw"),
  }).map(({ plan, http2, xGrpcWeb, text }) => ({ ...plan, http2, xGrpcWeb, text }));
}

// The body of a gRPC-web plan: its envelopes as they are, or in the text form's encoding.
export function buildGrpcWebBody(plan: GrpcWebPlan): Buffer {
  if (!plan.contentType.startsWith("application/grpc-web-text")) return buildEnvelope(plan.envelope);
  if (plan.text === "raw") return buildEnvelope(plan.envelope);
  if (plan.text === "base64") return Buffer.from(buildEnvelope(plan.envelope).toString("base64"), "latin1");
  return Buffer.from(plan.envelope.frames.map((f) => buildEnvelope({ ...plan.envelope, frames: [f] }).toString("base64")).join(""), "latin1");
}

// ---------------------------------------------------------------------------------------------------------------
// Connect unary.

export const connectUnaryContentTypes = ["application/proto", "application/json", "application/json; charset=utf-8"];
// Types Connect does not serve for a unary method, to be refused with 415.
const connectOtherContentTypes = ["application/connect+proto", "application/connect+json", "application/x-protobuf", "text/plain", "application/json; charset=latin1"];

export type BodyPlan =
  | { kind: "message"; json: boolean; init: Record<string, unknown> }
  | { kind: "bytes"; bytes: Uint8Array }
  | { kind: "text"; text: string }
  | { kind: "json"; value: unknown }
  | { kind: "truncated"; json: boolean; init: Record<string, unknown>; keep: number }
  | { kind: "compressed"; with: "gzip" | "br"; json: boolean; init: Record<string, unknown> }
  | { kind: "large"; byte: number; length: number };

// A body for a method: its request message (binary or JSON, whole, cut short or compressed), or anything else.
export function bodyArb(desc: DescMessage, known: readonly string[] = []): fc.Arbitrary<BodyPlan> {
  const init = messageInitArb(desc, known);
  return fc.oneof(
    { arbitrary: fc.record({ kind: fc.constant("message" as const), json: fc.boolean(), init }), weight: 5 },
    { arbitrary: fc.record({ kind: fc.constant("bytes" as const), bytes: fc.uint8Array({ maxLength: 64 }) }), weight: 2 },
    { arbitrary: fc.record({ kind: fc.constant("text" as const), text: fc.string({ unit: "binary", maxLength: 40 }) }), weight: 1 },
    { arbitrary: fc.record({ kind: fc.constant("json" as const), value: fc.jsonValue({ maxDepth: 3 }) }), weight: 2 },
    { arbitrary: fc.record({ kind: fc.constant("truncated" as const), json: fc.boolean(), init, keep: fc.nat({ max: 40 }) }), weight: 1 },
    { arbitrary: fc.record({ kind: fc.constant("compressed" as const), with: fc.constantFrom("gzip" as const, "br" as const), json: fc.boolean(), init }), weight: 1 },
    // Around the 4 MiB limit, and a little more than a kilobyte.
    { arbitrary: fc.record({ kind: fc.constant("large" as const), byte: fc.constantFrom(0x00, 0x0a, 0x7b, 0xff), length: fc.constantFrom(1500, 4 * 1024 * 1024 + 1) }), weight: 1 },
  );
}

export function buildBody(desc: DescMessage, plan: BodyPlan): Buffer {
  const encode = (json: boolean, init: Record<string, unknown>): Buffer => {
    const message = create(desc, init as never);
    return json ? Buffer.from(messageJson(desc, message)) : Buffer.from(toBinary(desc, message));
  };
  switch (plan.kind) {
    case "message":
      return encode(plan.json, plan.init);
    case "bytes":
      return Buffer.from(plan.bytes);
    case "text":
      return Buffer.from(plan.text);
    case "json":
      return Buffer.from(JSON.stringify(plan.value) ?? "null");
    case "truncated": {
      const whole = encode(plan.json, plan.init);
      return whole.subarray(0, Math.min(plan.keep, Math.max(0, whole.length - 1)));
    }
    case "compressed": {
      const whole = encode(plan.json, plan.init);
      return plan.with === "gzip" ? gzipSync(whole) : brotliCompressSync(whole);
    }
    case "large":
      return Buffer.alloc(plan.length, plan.byte);
  }
}

export interface ConnectPlan {
  target: UnaryMethod;
  httpMethod: string;
  contentType: string;
  body: BodyPlan;
  headers: HeaderPlan;
  http2: boolean;
}

export function connectPlanArb(known: readonly string[] = []): fc.Arbitrary<ConnectPlan> {
  return fc.constantFrom(...unaryMethods).chain((target) =>
    fc.record({
      target: fc.constant(target),
      httpMethod: fc.oneof({ arbitrary: fc.constant("POST"), weight: 12 }, { arbitrary: fc.constantFrom("GET", "PUT"), weight: 1 }),
      contentType: fc.oneof({ arbitrary: fc.constantFrom(...connectUnaryContentTypes), weight: 8 }, { arbitrary: fc.constantFrom(...connectOtherContentTypes), weight: 1 }),
      body: bodyArb(target.method.input, known),
      headers: connectHeadersArb,
      http2: fc.boolean(),
    }),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// REST.

// One segment in place of a template variable, or of a literal: something plausible, or something hostile.
const segmentArb: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom("k1", "prop", "1", "0", "-1", "1e3", "9999999999999999999999", "true", "", ".", "..", "%2F", "a%2Fb", "%00", "%zz", "%", "%C0%AF", "%E2%82", "a:wait", ":", "a;b", "a,b"), weight: 3 },
  { arbitrary: fc.string({ maxLength: 16 }).map(encodeURIComponent), weight: 3 },
  { arbitrary: fc.string({ unit: "binary", maxLength: 8 }), weight: 1 },
  { arbitrary: fc.constantFrom(300, 3000, 7000).map((n) => `<x*${n}>`), weight: 1 },
);

// Long runs of one letter are written `<x*N>` in a plan, so that a counterexample prints short.
export function expand(text: string): string {
  return text.replace(/<x\*(\d+)>/g, (_, n: string) => "x".repeat(Number(n)));
}

export interface PathPlan {
  template: string;
  // Replacements for the template's variables, in order (missing ones get "v").
  values: string[];
  // Then, optionally: a suffix (a verb, a trailing slash, more segments), a prefix, letter case changed.
  suffix: string | undefined;
  prefix: string | undefined;
  upper: boolean | undefined;
}

export function buildPath(plan: PathPlan): string {
  let i = 0;
  let path = plan.template.replace(/\{[^}]+\}/g, () => expand(plan.values[i++] ?? "v"));
  if (plan.upper === true) path = path.toUpperCase();
  return (plan.prefix ?? "") + path + (plan.suffix ?? "");
}

function pathPlanArb(template: fc.Arbitrary<string>): fc.Arbitrary<PathPlan> {
  return fc.record({
    template,
    values: fc.array(segmentArb, { maxLength: 3 }),
    suffix: rarely(fc.constantFrom("/", "//", ":wait", ":disable", ":", "/x", "/versions", "/%2e%2e", "?", "#frag", "/../keys")),
    prefix: rarely(fc.constantFrom("/", "//", "/v1/..", "/./"), 8),
    upper: rarely(fc.constant(true), 10),
  });
}
const otherTemplates = fc.oneof({ arbitrary: fc.constantFrom(...restRoutes.map((r) => r.template)), weight: 9 }, { arbitrary: fc.constantFrom("/", "/v1", "/v2/keys", "/cluster/v1", "/healthz"), weight: 1 });

export interface QueryPlan {
  pairs: [string, string][];
  // Sent as given (after `?`) instead of encoded pair by pair.
  raw: string | undefined;
}

export function buildQuery(plan: QueryPlan): string {
  if (plan.raw !== undefined) return `?${plan.raw}`;
  if (plan.pairs.length === 0) return "";
  return `?${plan.pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(expand(v))}`).join("&")}`;
}

const queryNames = ["parentId", "keyId", "keyVersionId", "page.limit", "page.offset", "page", "page.limit.x", "serviceInstanceId", "nodePoolId", "taskId", "key.labels", "labels", "updateMask", "timeout", "parent_id", "$alt", "fields"];
const queryPlanArb: fc.Arbitrary<QueryPlan> = fc.record({
  pairs: fc.array(
      fc.tuple(
        fc.oneof({ arbitrary: fc.constantFrom(...queryNames), weight: 4 }, { arbitrary: fc.string({ maxLength: 10 }), weight: 1 }),
        fc.oneof({ arbitrary: fc.constantFrom("", "1", "-1", "0", "10", "1e400", "NaN", "true", "null", "prop", "<x*5000>", "[1,2]", "{}"), weight: 3 }, { arbitrary: fc.string({ unit: "binary", maxLength: 16 }), weight: 1 }),
      ),
      { maxLength: 5 },
    ),
  raw: rarely(fc.constantFrom("&&&", "=", "a=%zz", "page.limit=1&page.limit=2", "%", "a=b=c", "parentId", "parentId=%F0%9F", "+++=+++"), 8),
});

// Methods Node's HTTP/1.1 parser knows (any other is refused by the parser itself, before the server sees it);
// over HTTP/2 any token goes.
const h1Methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "PROPFIND", "MKCOL", "COPY", "SEARCH", "PURGE"];

export interface RestPlan {
  // The route the plan started from (an index into restRoutes): its request type is the body's.
  route: number;
  http2: boolean;
  httpMethod: string;
  path: PathPlan;
  query: QueryPlan;
  body: BodyPlan | undefined;
  contentType: string | undefined;
  contentEncoding: string | undefined;
  credentials: HeaderPlan;
}

const restContentTypes = ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "text/plain", "application/x-www-form-urlencoded", "application/proto", "", "json"];

export function restPlanArb(known: readonly string[] = []): fc.Arbitrary<RestPlan> {
  return fc.nat({ max: restRoutes.length - 1 }).chain((index) => {
    const route = restRoutes[index]!;
    return fc.record({
      route: fc.constant(index),
      http2: fc.boolean(),
      // The route's own method most of the time; then any.
      httpMethod: fc.oneof({ arbitrary: fc.constant(route.httpMethod), weight: 6 }, { arbitrary: fc.constantFrom(...h1Methods), weight: 2 }, { arbitrary: fc.stringMatching(/^[A-Za-z]{1,8}$/), weight: 1 }),
      path: fc.oneof({ arbitrary: pathPlanArb(fc.constant(route.template)), weight: 4 }, { arbitrary: pathPlanArb(otherTemplates), weight: 1 }),
      query: queryPlanArb,
      body: fc.oneof({ arbitrary: fc.constant(undefined), weight: 1 }, { arbitrary: bodyArb(route.method.input, known), weight: 2 }),
      contentType: fc.oneof({ arbitrary: fc.constant("application/json"), weight: 6 }, { arbitrary: fc.constant(undefined), weight: 1 }, { arbitrary: fc.constantFrom(...restContentTypes), weight: 1 }),
      contentEncoding: rarely(fc.constantFrom("identity", "gzip", "br", "x-unknown", ""), 8),
      credentials: credentialsArb,
    });
  });
}

// The REST body of a plan: the message's JSON, not its binary form, unless the plan says otherwise.
export function buildRestBody(plan: RestPlan): Buffer {
  if (plan.body === undefined) return Buffer.alloc(0);
  return buildBody(restRoutes[plan.route]!.method.input, plan.body);
}

// Methods an HTTP/1.1 client can send: the plan's if the parser knows it, else POST.
export function h1Method(method: string): string {
  return h1Methods.includes(method) ? method : "POST";
}
