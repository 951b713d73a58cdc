import { describe, expect, test } from "vitest";
import { create, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { anyPack, durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { CryptoKeySchema } from "../../gen/kms/v1/kms_pb.js";
import { invalidArgument } from "../../src/errors/domain-error.js";
import type { DomainError } from "../../src/errors/domain-error.js";
import { statusPartsOf } from "../../src/errors/status-details.js";
import { toConnectError } from "../../src/errors/to-connect-error.js";
import { CallError } from "../../src/pipeline/call-error.js";

// A domain error as every adapter renders it.
const domainErrorToConnectError = (error: DomainError) => toConnectError(new CallError(statusPartsOf(error), false), null);
import { toRestJson } from "../../src/transport/rest/json-any.js";
import { connectErrorToStatusJson, httpStatusOfError, retryAfterSeconds } from "../../src/transport/rest/status-json.js";
import { requestTooLarge } from "../../src/errors/protocol-errors.js";
import { methodNotAllowed } from "../../src/errors/protocol-errors.js";
import { schema } from "./rest-fixture.js";

const info = create(ErrorInfoSchema, { reason: "CRYPTO_KEY_NOT_FOUND", domain: "kms", metadata: { keyId: "k1" } });
const infoAny = { typeUrl: "type.googleapis.com/google.rpc.ErrorInfo", value: Buffer.from(toBinary(ErrorInfoSchema, info)).toString("base64") };

describe("toRestJson", () => {
  test("google.rpc.Status details are written as typeUrl/value", () => {
    const status = create(StatusSchema, { code: 5, message: "no such key", details: [anyPack(ErrorInfoSchema, info)] });
    const json = toRestJson(StatusSchema, status);
    expect(json).toEqual({ code: 5, message: "no such key", details: [infoAny] });
    const value = (json as { details: { value: string }[] }).details[0]?.value ?? "";
    expect(fromBinary(ErrorInfoSchema, base64Decode(value))).toEqual(info);
  });

  test("Any nested, repeated, in maps and in recursive messages; the rest stays canonical", () => {
    const Envelope = schema("Envelope");
    const any = anyPack(ErrorInfoSchema, info);
    const msg = create(Envelope, {
      note: "n",
      ttl: durationFromMs(90_000),
      payload: any,
      extras: [any, any],
      named: { a: any },
      next: { next: { payload: any } },
      items: [{ id: "i", kind: 2, size: 3n }],
    });
    const json = toRestJson(Envelope, msg);
    expect(Object.keys(json as object)).toEqual(["note", "payload", "extras", "named", "next", "items", "ttl"]);
    expect(json).toEqual({
      note: "n",
      ttl: "90s",
      payload: infoAny,
      extras: [infoAny, infoAny],
      named: { a: infoAny },
      next: { next: { payload: infoAny } },
      items: [{ id: "i", kind: "LARGE", size: "3" }],
    });
  });

  test("an empty Any and unset fields are omitted like other defaults", () => {
    const Envelope = schema("Envelope");
    expect(toRestJson(Envelope, create(Envelope, { payload: {} }))).toEqual({ payload: {} });
    expect(toRestJson(Envelope, create(Envelope))).toEqual({});
  });

  test("messages without Any are plain toJson", () => {
    const key = create(CryptoKeySchema, { id: "k", labels: ["a"], defaultAlgorithm: 3, rotationPeriod: durationFromMs(86_400_000) });
    expect(toRestJson(CryptoKeySchema, key)).toEqual(toJson(CryptoKeySchema, key));
  });
});

describe("connectErrorToStatusJson", () => {
  test("outgoing details ({desc, value}) from a DomainError", () => {
    const error = domainErrorToConnectError(invalidArgument("kms", [{ field: "page.limit", description: "at most 1000" }]));
    const json = connectErrorToStatusJson(error);
    expect(json.code).toBe(3);
    expect(json.message).toBe("page.limit: at most 1000");
    expect(json.details.map((d) => d["typeUrl"])).toEqual([
      "type.googleapis.com/google.rpc.ErrorInfo",
      "type.googleapis.com/google.rpc.BadRequest",
    ]);
    const bad = fromBinary(BadRequestSchema, base64Decode(String(json.details[1]?.["value"])));
    expect(bad.fieldViolations[0]).toMatchObject({ field: "page.limit", description: "at most 1000" });
    expect(httpStatusOfError(error)).toBe(400);
  });

  test("incoming details ({type, value}) from a call", () => {
    const error = new ConnectError("gone", Code.NotFound);
    error.details.push({ type: "google.rpc.ErrorInfo", value: toBinary(ErrorInfoSchema, info) });
    expect(connectErrorToStatusJson(error)).toEqual({ code: 5, message: "gone", details: [infoAny] });
    expect(httpStatusOfError(error)).toBe(404);
  });

  test("413 and 405 for the REST layer's own reasons", () => {
    expect(httpStatusOfError(domainErrorToConnectError(requestTooLarge("kms", 10)))).toBe(413);
    expect(httpStatusOfError(domainErrorToConnectError(methodNotAllowed("kms", "PUT", "/v1/keys", ["GET"])))).toBe(405);
    expect(httpStatusOfError(new ConnectError("x", Code.Unimplemented))).toBe(501);
  });

  test("Retry-After seconds from RetryInfo, rounded up", () => {
    const limited = (ms: number, code = Code.ResourceExhausted) =>
      new ConnectError("slow down", code, undefined, [{ desc: RetryInfoSchema, value: { retryDelay: durationFromMs(ms) } }]);
    expect(retryAfterSeconds(limited(1500))).toBe(2);
    expect(retryAfterSeconds(limited(3000))).toBe(3);
    expect(retryAfterSeconds(limited(3000, Code.Unavailable))).toBe(3);
    expect(retryAfterSeconds(limited(3000, Code.InvalidArgument))).toBeUndefined();
    expect(retryAfterSeconds(new ConnectError("x", Code.ResourceExhausted))).toBeUndefined();
    expect(httpStatusOfError(limited(1000))).toBe(429);
  });
});
