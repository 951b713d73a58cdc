import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CreateCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth } from "../support/credentials.js";
import { frame } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { storeRows } from "../support/store-rows.js";

// A caller's deadline counts from the request's headers, as gRPC defines grpc-timeout and as Connect counts it, not
// from the end of its body: a CreateCryptoKey whose body comes after its deadline has passed is DEADLINE_EXCEEDED
// and creates nothing, on both call paths. The direct gRPC path counted from the body's end and ran the handler
// (a probe, 2026-11-27).

const PATH = "/kms.v1.KeyManagerService/CreateCryptoKey";

// Sends the headers, then the body `delayMs` later; resolves with the status.
function lateBody(url: string, delayMs: number, parentId: string): Promise<{ status: string | undefined; message: string | undefined }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    const req = session.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers", "grpc-timeout": "300m", ...adminAuth(url) });
    let status: string | undefined;
    let message: string | undefined;
    const read = (h: http2.IncomingHttpHeaders): void => {
      if (h["grpc-status"] !== undefined) {
        status = String(h["grpc-status"]);
        message = decodeURIComponent(String(h["grpc-message"] ?? ""));
      }
    };
    req.on("response", read);
    req.on("trailers", read);
    req.on("data", () => {});
    req.on("close", () => {
      session.close();
      resolve({ status, message });
    });
    req.on("error", reject);
    setTimeout(() => req.end(frame(toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, { parentId })))), delayMs);
  });
}

describe.each(["direct", "connect"])("a body that arrives after the caller's deadline, on the %s call path", (callPath) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath } });
  });
  afterAll(() => server.stop());

  it("is DEADLINE_EXCEEDED and creates no key", async () => {
    const parentId = `late-${callPath}`;
    const answer = await lateBody(server.url, 600, parentId);
    expect(answer).toEqual({ status: "4", message: "the call did not finish within its deadline" });
    expect(await storeRows(server, "SELECT id FROM kms_keys WHERE parent_id = ?", [parentId])).toEqual([]);
  });

  it("within the deadline, is served", async () => {
    const answer = await lateBody(server.url, 0, `early-${callPath}`);
    expect(answer.status).toBe("0");
  });
});
