import { describe, expect, test } from "vitest";
import { toJson } from "@bufbuild/protobuf";
import type { JsonValue } from "@bufbuild/protobuf";
import { buildRequestMessage } from "../../src/transport/rest/request-builder.js";
import { RouteTable } from "../../src/transport/rest/route-table.js";
import { BadRequest } from "../../src/transport/rest/rest-errors.js";
import { methodTableOf } from "../support/method-table.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { ItemService } from "./rest-fixture.js";

const table = new RouteTable(methodTableOf([KeyManagerService, ItemService]));

interface Call {
  method: string;
  path: string;
  query?: string;
  body?: string;
  contentType?: string;
  contentEncoding?: string;
  origin?: string;
}

const get = (path: string, query?: string): Call => ({ method: "GET", path, query });
const send = (method: string, path: string, body?: string, extra: Partial<Call> = {}): Call => ({ method, path, body, ...extra });

// The request message as canonical JSON, so expectations read like the wire.
function build(call: Call): JsonValue {
  const found = table.lookup(call.method, call.path);
  if (found.kind !== "found") throw new Error(`no route for ${call.method} ${call.path}`);
  const message = buildRequestMessage({
    route: found.route,
    pathValues: found.pathValues,
    query: new URLSearchParams(call.query ?? ""),
    body: new TextEncoder().encode(call.body ?? ""),
    contentType: call.contentType ?? (call.body === undefined ? undefined : "application/json"),
    contentEncoding: call.contentEncoding,
    origin: call.origin,
  });
  return toJson(found.route.method.input, message);
}

function rejection(call: Call): { reason: string; field: string | undefined; message: string } {
  try {
    build(call);
  } catch (e) {
    if (!(e instanceof BadRequest)) throw e;
    const detail = e.toDomainError("kms").detail;
    if (detail.code !== "invalid_argument") throw e;
    return { reason: detail.reason, field: detail.violations[0]?.field, message: detail.message };
  }
  throw new Error("expected a rejection");
}

function expectRejected(call: Call, reason: string, field: string): void {
  expect(rejection(call)).toMatchObject({ reason, field });
}

describe("path variables", () => {
  test("nested {key.id} with body *", () => {
    const body = '{"key":{"name":"n"},"updateMask":"name,description"}';
    expect(build(send("PATCH", "/v1/keys/k1", body))).toEqual({
      key: { id: "k1", name: "n" },
      updateMask: "name,description",
    });
  });

  test("non-string fields are converted by type; bad text names the field", () => {
    expect(build(get("/v1/keys/k%2F1/versions/3"))).toEqual({ keyId: "k/1", keyVersionId: 3 });
    expect(build(get("/v2/kinds/LARGE"))).toEqual({ kind: "LARGE" });
    expect(build(get("/v2/kinds/1"))).toEqual({ kind: "SMALL" });
    expectRejected(get("/v1/keys/k1/versions/abc"), "REQUEST_INVALID", "keyVersionId");
    expectRejected(get("/v2/kinds/HUGE"), "REQUEST_INVALID", "kind");
    expect(rejection(get("/v2/kinds/HUGE")).message).toContain("KIND_UNSPECIFIED, SMALL, LARGE");
  });

  test("a field in both path and body must agree", () => {
    expect(build(send("PATCH", "/v1/keys/k1", '{"key":{"id":"k1"}}'))).toEqual({ key: { id: "k1" } });
    expectRejected(send("PATCH", "/v1/keys/k1", '{"key":{"id":"k2"}}'), "FIELD_MISMATCH", "key.id");
    expectRejected(send("POST", "/v1/shelves/s/items/7:wait", '{"itemId":"8"}'), "FIELD_MISMATCH", "itemId");
    const same = '{"item_id":"7","timeout":"30s"}';
    expect(build(send("POST", "/v1/shelves/s/items/7:wait", same))).toEqual({ shelf: "s", itemId: 7, timeout: "30s" });
  });

  test("multi-segment variables", () => {
    expect(build(get("/v2/shelves/a/items/b"))).toEqual({ name: "shelves/a/items/b" });
  });
});

describe("query parameters", () => {
  test("dotted names, repeated parameters, enums, bools, 64-bit and well-known types", () => {
    const query = [
      "page_size=5",
      "filter.tags=a&filter.tags=b%20c",
      "filter.kind=LARGE",
      "filter.kinds=1&filter.kinds=LARGE",
      "filter.active=true",
      "filter.ttl=3600s",
      "filter.after=2024-01-31T12:00:00Z",
      "filter.mask=name,tags",
      "filter.minSize=9007199254740993",
      "filter.limit=7",
      "filter.blob=-_8",
    ].join("&");
    expect(build(get("/v1/shelves/s/items", query))).toEqual({
      shelf: "s",
      pageSize: 5,
      filter: {
        tags: ["a", "b c"],
        kind: "LARGE",
        kinds: ["SMALL", "LARGE"],
        active: true,
        ttl: "3600s",
        after: "2024-01-31T12:00:00Z",
        mask: "name,tags",
        minSize: "9007199254740993",
        limit: 7,
        blob: "+/8=",
      },
    });
  });

  test("KMS list paging", () => {
    expect(build(get("/v1/keys", "parentId=ns&page.limit=5&page.offset=10"))).toEqual({
      parentId: "ns",
      page: { limit: 5, offset: 10 },
    });
  });

  test("unknown, misplaced and repeated parameters", () => {
    expectRejected(get("/v1/keys", "bogus=1"), "UNKNOWN_FIELD", "bogus");
    expectRejected(get("/v1/keys", "page.bogus=1"), "UNKNOWN_FIELD", "page.bogus");
    expectRejected(get("/v1/keys", "parentId=a&parentId=b"), "REQUEST_INVALID", "parentId");
    expectRejected(get("/v1/keys", "parent_id=a&parentId=b"), "REQUEST_INVALID", "parentId");
    expectRejected(get("/v1/keys", "page=1"), "REQUEST_INVALID", "page");
    expectRejected(send("POST", "/v1/encrypt", "{}", { query: "keyId=k" }), "REQUEST_INVALID", "keyId");
    expectRejected(send("PATCH", "/v1/shelves/s/items/i", undefined, { query: "item.name=x" }), "REQUEST_INVALID", "item.name");
  });

  test("values that do not fit name the field", () => {
    expectRejected(get("/v1/keys", "page.limit=x"), "REQUEST_INVALID", "page.limit");
    expectRejected(get("/v1/shelves/s/items", "filter.active=maybe"), "REQUEST_INVALID", "filter.active");
    expectRejected(get("/v1/shelves/s/items", "filter.kinds=SMALL&filter.kinds=HUGE"), "REQUEST_INVALID", "filter.kinds[1]");
    expect(rejection(get("/v1/shelves/s/items", "filter.ttl=1h")).message).toContain('"3600s"');
  });

  test("a path field repeated in the query must agree", () => {
    expect(build(get("/v1/keys/k1", "keyId=k1"))).toEqual({ keyId: "k1" });
    expectRejected(get("/v1/keys/k1", "keyId=k2"), "FIELD_MISMATCH", "keyId");
  });
});

describe("JSON body", () => {
  test("proto names, numeric strings and URL-safe base64 follow proto-JSON", () => {
    const body = '{"key_id":"k","key_version_id":"1","plaintext":"-_8"}';
    expect(build(send("POST", "/v1/encrypt", body))).toEqual({ keyId: "k", keyVersionId: 1, plaintext: "+/8=" });
  });

  test("unknown fields are rejected with their JSON path", () => {
    expectRejected(send("POST", "/v1/encrypt", '{"bogus":1}'), "UNKNOWN_FIELD", "bogus");
    expectRejected(send("PATCH", "/v1/keys/k1", '{"key":{"bogus":1}}'), "UNKNOWN_FIELD", "key.bogus");
    expectRejected(send("PATCH", "/v1/keys/k1", '{"key":{"primary":{"nope":true}}}'), "UNKNOWN_FIELD", "key.primary.nope");
    expectRejected(send("PATCH", "/v1/shelves/s/items/i", '{"name":"n","bogus":1}'), "UNKNOWN_FIELD", "item.bogus");
    expectRejected(send("POST", "/v1/encrypt", '{"__proto__":{}}'), "UNKNOWN_FIELD", "__proto__");
  });

  test("values that do not fit name the innermost field", () => {
    expectRejected(send("POST", "/v1/encrypt", '{"keyVersionId":"x"}'), "REQUEST_INVALID", "keyVersionId");
    expectRejected(send("PATCH", "/v1/keys/k1", '{"key":{"labels":["a",5]}}'), "REQUEST_INVALID", "key.labels[1]");
    expectRejected(send("PATCH", "/v1/keys/k1", '{"key":{"rotationPeriod":"1d"}}'), "REQUEST_INVALID", "key.rotationPeriod");
    expectRejected(send("PATCH", "/v1/keys/k1", '{"key":5}'), "REQUEST_INVALID", "key");
    // Never echo what was sent: it may be plaintext.
    expect(rejection(send("POST", "/v1/encrypt", '{"plaintext":"not base64!"}')).message).not.toContain("not base64");
    // Characters beyond Latin-1 whose low byte is a base64 letter were decoded by it: "ŁŁŁŁ" as three zero bytes.
    expectRejected(send("POST", "/v1/encrypt", '{"plaintext":"ŁŁŁŁ"}'), "REQUEST_INVALID", "plaintext");
    expectRejected(send("POST", "/v1/decrypt", '{"keyId":"k","ciphertext":"AAAA","additionalAuthenticatedData":"řWFk"}'), "REQUEST_INVALID", "additionalAuthenticatedData");
  });

  test("a field given twice, or two members of a oneof", () => {
    expectRejected(send("POST", "/v1/encrypt", '{"keyId":"a","key_id":"b"}'), "REQUEST_INVALID", "key_id");
    // One name twice: JSON.parse kept the last, as Connect's JSON (protobuf-es's fromJsonString) does not.
    expect(rejection(send("POST", "/v1/encrypt", '{"keyId":"a","keyId":"b"}'))).toMatchObject({ reason: "MALFORMED_BODY", message: 'the request body has member "keyId" twice in one object' });
    expect(rejection(send("PATCH", "/v1/keys/k1", '{"key":{"name":"a","na\\u006de":"b"}}'))).toMatchObject({ reason: "MALFORMED_BODY", message: 'the request body has member "name" twice in one object' });
    expectRejected(send("PATCH", "/v1/shelves/s/items/i", '{"byEmail":"a","byPhone":"b"}'), "REQUEST_INVALID", "item.byPhone");
  });

  test("a body bound to one field", () => {
    expect(build(send("PATCH", "/v1/shelves/s/items/i", '{"name":"n"}', { query: "updateMask=name" }))).toEqual({
      shelf: "s",
      item: { id: "i", name: "n" },
      updateMask: "name",
    });
  });

  test("empty bodies, wrong media types, bodies where none belongs, and broken JSON", () => {
    const enable = "/v1/keys/k/versions/1/enable";
    expect(build(send("POST", enable, "", { contentType: "application/json" }))).toEqual({ keyId: "k", keyVersionId: 1 });
    expect(build(send("POST", enable, " \n", { contentType: "application/json" }))).toEqual({ keyId: "k", keyVersionId: 1 });
    // A body-less POST is a state change a web page could make a browser send without a preflight: from a page (an
    // Origin header, which browsers send with every POST) it must say application/json all the same; with no Origin,
    // no body and no Content-Type it is the document's own "Payload sent: none" (docs/access.md).
    expect(build(send("POST", enable))).toEqual({ keyId: "k", keyVersionId: 1 });
    expect(rejection(send("POST", enable, undefined, { origin: "https://page.example" }))).toEqual({
      reason: "UNSUPPORTED_CONTENT_TYPE",
      field: "",
      message: "a POST must be sent with Content-Type: application/json, even without a body (send {}), not none",
    });
    expectRejected(send("POST", enable, " \n", { contentType: "text/plain" }), "UNSUPPORTED_CONTENT_TYPE", "");
    expectRejected(send("POST", enable, "", { contentType: "text/plain" }), "UNSUPPORTED_CONTENT_TYPE", "");
    const charset = { contentType: "Application/JSON; charset=utf-8" };
    expect(build(send("POST", "/v1/encrypt", '{"keyId":"k"}', charset))).toEqual({ keyId: "k" });
    const text = { contentType: "text/plain" };
    expectRejected(send("POST", "/v1/encrypt", '{"keyId":"k"}', text), "UNSUPPORTED_CONTENT_TYPE", "");
    const gzip = { contentEncoding: "gzip" };
    expectRejected(send("POST", "/v1/encrypt", '{"keyId":"k"}', gzip), "UNSUPPORTED_CONTENT_TYPE", "");
    expectRejected(send("GET", "/v1/keys/k1", '{"keyId":"k1"}'), "MALFORMED_BODY", "");
    expect(rejection(send("POST", "/v1/encrypt", '{"plaintext":"secret'))).toEqual({
      reason: "MALFORMED_BODY",
      field: "",
      message: "the request body is not valid JSON",
    });
    expectRejected(send("POST", "/v1/encrypt", "[1]"), "MALFORMED_BODY", "");
  });
});
