import grpc from "@grpc/grpc-js";
import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { adminAuth } from "../support/credentials.js";
import { frame } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { frames, fromBase64Segments, trailerFrame } from "../support/wire-call.js";

// A call to a method (or a service) this server does not have is UNIMPLEMENTED in the caller's own protocol: a
// gRPC status from @grpc/grpc-js's point of view, gRPC-web's trailer frame, Connect's error JSON with 404. It used to
// fall through to the REST routes: HTTP 404 with a REST JSON body, which grpc-js reported as "Received HTTP status
// code 404" (a probe, 2026-11-27). A plain JSON POST is still the REST surface's 404.

function errorInfo(detailsBin: Buffer): { reason: string; domain: string } {
  const status = fromBinary(StatusSchema, detailsBin);
  const info = status.details.map((d) => anyUnpack(d, ErrorInfoSchema)).find((d) => d !== undefined);
  return { reason: info?.reason ?? "", domain: info?.domain ?? "" };
}

function grpcJsCall(url: string, path: string): Promise<grpc.ServiceError> {
  const client = new grpc.Client(url.replace("http://", ""), grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set("authorization", adminAuth(url).authorization);
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(path, (x: Buffer) => x, (x: Buffer) => x, Buffer.alloc(0), metadata, (err) => {
      client.close();
      if (err === null) reject(new Error(`${path} succeeded`));
      else resolve(err);
    });
  });
}

describe.each(["direct", "connect"])("a call to a method the server does not have, on the %s call path", (callPath) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath } });
  });
  afterAll(() => server.stop());

  it.each([
    ["/kms.v1.KeyManagerService/Nope", "kms"],
    ["/compute.cluster.v1.TaskService/Nope", "compute"],
    ["/no.such.Service/Call", "cloudplane"],
  ])("gRPC (grpc-js) %s: UNIMPLEMENTED with its ErrorInfo, domain %s", async (path, domain) => {
    const err = await grpcJsCall(server.url, path);
    expect(err.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(err.details).toBe(`this server has no method ${path}; gRPC server reflection lists the methods it has`);
    const bin = err.metadata.get("grpc-status-details-bin")[0];
    expect(errorInfo(bin as Buffer)).toEqual({ reason: "PROCEDURE_NOT_FOUND", domain });
    expect(err.metadata.get("x-request-id")[0]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("gRPC (grpc-js), a stream the client keeps open: UNIMPLEMENTED at once", async () => {
    const client = new grpc.Client(server.url.replace("http://", ""), grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set("authorization", adminAuth(server.url).authorization);
    const stream = client.makeBidiStreamRequest("/kms.v1.KeyManagerService/NopeStream", (x: Buffer) => x, (x: Buffer) => x, metadata);
    stream.write(Buffer.alloc(0));
    const err = await new Promise<grpc.ServiceError>((resolve) => stream.on("error", resolve));
    client.close();
    expect(err.code).toBe(grpc.status.UNIMPLEMENTED);
  });

  it("gRPC-web, binary and text: the status in the trailer frame", async () => {
    for (const text of [false, true]) {
      const res = await fetch(`${server.url}/kms.v1.KeyManagerService/Nope`, {
        method: "POST",
        headers: { "content-type": text ? "application/grpc-web-text" : "application/grpc-web+proto", "x-grpc-web": "1", ...adminAuth(server.url) },
        body: text ? frame(new Uint8Array(0)).toString("base64") : new Uint8Array(frame(new Uint8Array(0))),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe(text ? "application/grpc-web-text+proto" : "application/grpc-web+proto");
      const raw = Buffer.from(await res.arrayBuffer());
      const body = text ? fromBase64Segments(raw.toString("latin1")) : raw;
      const [flag, payload] = frames(body).at(-1) ?? [0, Buffer.alloc(0)];
      expect(flag).toBe(0x80);
      const trailer = trailerFrame(payload);
      expect(trailer["grpc-status"]).toBe("12");
      expect(errorInfo(Buffer.from(trailer["grpc-status-details-bin"] ?? "", "base64"))).toEqual({ reason: "PROCEDURE_NOT_FOUND", domain: "kms" });
    }
  });

  it("Connect: 404 with the error JSON, code unimplemented", async () => {
    const res = await fetch(`${server.url}/kms.v1.KeyManagerService/Nope`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1", ...adminAuth(server.url) },
      body: "{}",
    });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("application/json");
    const body = (await res.json()) as { code: string; message: string; details: { type: string }[] };
    expect(body.code).toBe("unimplemented");
    expect(body.message).toBe("this server has no method /kms.v1.KeyManagerService/Nope; gRPC server reflection lists the methods it has");
    expect(body.details.map((d) => d.type)).toEqual(["google.rpc.ErrorInfo"]);
  });

  it("a plain JSON POST without Connect's header stays the REST surface's 404", async () => {
    const res = await fetch(`${server.url}/kms.v1.KeyManagerService/Nope`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: "{}",
    });
    expect(res.status).toBe(404);
    const body = (await res.json()) as { code: number; message: string };
    expect(body).toMatchObject({ code: 5, message: "no REST route matches POST /kms.v1.KeyManagerService/Nope" });
  });
});
