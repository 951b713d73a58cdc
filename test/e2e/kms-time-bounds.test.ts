import { create } from "@bufbuild/protobuf";
import type { DescMethod } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth } from "../support/credentials.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { AUDIT_TABLE, storeSnapshot } from "../support/store-snapshot.js";
import { wireCall } from "../support/wire-call.js";
import type { WireAnswer, WireProtocol } from "../support/wire-call.js";

// The rotation's Timestamp and Duration at and beyond their ranges (a probe, 2026-11-27). 9999-12-31T23:59:59.9995Z
// was rounded up to the year 10000 and stored, after which the key and every list of its namespace were INTERNAL
// over REST and Connect, restarts included; gRPC's binary form took seconds past the Timestamp's maximum, nanos of
// more than a second, a Duration of mixed signs, and seconds the store's INTEGER column refused (INTERNAL). Each is
// now INVALID_ARGUMENT naming the field, and nothing is written.

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server.stop());

const kms = KeyManagerService.method;
const notWrittenByCalls = [AUDIT_TABLE, "compute_workers"];

function call(protocol: WireProtocol, m: DescMethod, init: object): Promise<WireAnswer> {
  return wireCall(server.url, protocol, m, create(m.input, init as never) as never, adminAuth(server.url));
}

async function rotatingKey(): Promise<string> {
  const created = await call("grpc", kms.createCryptoKey, { parentId: "times", rotationPeriod: { seconds: 86400n } });
  expect(created.code, created.message).toBe(0);
  return (created.response as { id: string }).id;
}

async function refusedWritingNothing(protocol: WireProtocol, m: DescMethod, init: object, field: string, description: string): Promise<void> {
  const before = storeSnapshot(server.dataDir, { except: notWrittenByCalls });
  const answer = await call(protocol, m, init);
  expect({ code: answer.code, message: answer.message }).toEqual({ code: 3, message: `${field}: ${description}` });
  expect(storeSnapshot(server.dataDir, { except: notWrittenByCalls })).toEqual(before);
}

const badTimestamp = "is not a valid Timestamp: it must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999999Z, with nanos from 0 to 999999999";
const mask = (...paths: string[]) => ({ paths });

describe("nextRotationTime", () => {
  it("takes the last millisecond of the year 9999, truncating, and the key and its namespace read as JSON", async () => {
    const id = await rotatingKey();
    const time = { seconds: 253402300799n, nanos: 999_500_000 };
    const updated = await call("rest", kms.updateCryptoKey, { key: { id, nextRotationTime: time }, updateMask: mask("next_rotation_time") });
    expect(updated.code, updated.message).toBe(0);
    expect(updated.response).toMatchObject({ nextRotationTime: "9999-12-31T23:59:59.999Z" });
    for (const protocol of ["rest", "connect-json"] as const) {
      const read = await call(protocol, kms.getCryptoKey, { keyId: id });
      expect([protocol, read.code, read.response]).toEqual([protocol, 0, expect.objectContaining({ nextRotationTime: "9999-12-31T23:59:59.999Z" })]);
      const list = await call(protocol, kms.listCryptoKeys, { parentId: "times" });
      expect([protocol, list.code]).toEqual([protocol, 0]);
    }
  });

  it("past the Timestamp's range, or with nanos out of 0 to 999999999 (gRPC's binary form): INVALID_ARGUMENT, nothing written", async () => {
    const id = await rotatingKey();
    for (const time of [{ seconds: 253402300800n }, { seconds: 100_000_000_000_000_000n }, { seconds: 4102444800n, nanos: 1_500_000_000 }, { seconds: 4102444800n, nanos: -1 }]) {
      await refusedWritingNothing("grpc", kms.updateCryptoKey, { key: { id, nextRotationTime: time }, updateMask: mask("next_rotation_time") }, "key.nextRotationTime", badTimestamp);
    }
  });

  it("given while the same mask clears rotationPeriod: INVALID_ARGUMENT, not dropped", async () => {
    const id = await rotatingKey();
    const init = { key: { id, nextRotationTime: { seconds: 4102444800n } }, updateMask: mask("rotation_period", "next_rotation_time") };
    for (const protocol of ["grpc", "rest"] as const) {
      await refusedWritingNothing(protocol, kms.updateCryptoKey, init, "key.nextRotationTime", "a next rotation time needs a rotationPeriod");
    }
  });
});

describe("rotationPeriod", () => {
  it("a Duration whose nanos disagree with its seconds in sign, or exceed a second: INVALID_ARGUMENT", async () => {
    const description = "is not a valid Duration: nanos must be below one second, of the same sign as seconds";
    for (const period of [{ seconds: 86400n, nanos: -1 }, { seconds: 86400n, nanos: 1_000_000_000 }]) {
      await refusedWritingNothing("grpc", kms.createCryptoKey, { parentId: "times", rotationPeriod: period }, "rotationPeriod", description);
    }
  });

  it("one nanosecond over the 100 years: INVALID_ARGUMENT; the 100 years themselves are taken", async () => {
    for (const protocol of ["grpc", "rest"] as const) {
      await refusedWritingNothing(protocol, kms.createCryptoKey, { parentId: "times", rotationPeriod: { seconds: 3155760000n, nanos: 1 } }, "rotationPeriod", "must be between 86400s and 3155760000s (100 years), got 3155760000.000000001s");
    }
    const exact = await call("rest", kms.createCryptoKey, { parentId: "times", rotationPeriod: { seconds: 3155760000n } });
    expect(exact.code, exact.message).toBe(0);
  });
});

describe("a nextRotationTime that names no moment (RFC 3339 5.7)", () => {
  it("is INVALID_ARGUMENT naming the field on REST and Connect's JSON, not another day; nothing is written", async () => {
    const id = await rotatingKey();
    const description = 'invalid value; expected an RFC 3339 timestamp, e.g. "2024-01-31T12:00:00Z"';
    for (const time of ["2031-02-30T00:00:00Z", "2031-02-29T00:00:00Z", "2031-04-31T12:00:00Z", "2031-06-15T24:00:00Z"]) {
      const body = JSON.stringify({ key: { id, nextRotationTime: time }, updateMask: "nextRotationTime" });
      const before = storeSnapshot(server.dataDir, { except: notWrittenByCalls });
      const rest = await fetch(`${server.url}/v1/keys/${id}`, { method: "PATCH", headers: { ...adminAuth(server.url), "content-type": "application/json" }, body });
      expect([time, rest.status, ((await rest.json()) as { message: string }).message]).toEqual([time, 400, `key.nextRotationTime: ${description}`]);
      const connect = await fetch(`${server.url}/kms.v1.KeyManagerService/UpdateCryptoKey`, {
        method: "POST",
        headers: { ...adminAuth(server.url), "content-type": "application/json", "connect-protocol-version": "1" },
        body,
      });
      expect([time, connect.status, await connect.json()]).toEqual([time, 400, expect.objectContaining({ code: "invalid_argument", message: `key.nextRotationTime: ${description}` })]);
      expect(storeSnapshot(server.dataDir, { except: notWrittenByCalls })).toEqual(before);
    }
    const real = await call("rest", kms.updateCryptoKey, { key: { id, nextRotationTime: { seconds: 1929744000n } }, updateMask: mask("next_rotation_time") });
    expect([real.code, real.response]).toEqual([0, expect.objectContaining({ nextRotationTime: "2031-02-25T00:00:00Z" })]);
  });
});
