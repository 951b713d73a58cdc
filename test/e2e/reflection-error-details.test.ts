import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import type { DescMessage } from "@bufbuild/protobuf";
import { anyUnpack, FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import type { Any, FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { GetCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { toBinary } from "@bufbuild/protobuf";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// The error details every method may answer with (google/rpc/status.proto, error_details.proto) are resolvable by
// reflection, so that grpcurl and buf curl decode grpc-status-details-bin: FileContainingSymbol google.rpc.ErrorInfo
// answered "symbol google.rpc.ErrorInfo not found" (docs/callers.md). Checked on the real server, with a client
// that knows nothing but what reflection tells it.

interface ReflectionResponse {
  messageResponse: string;
  fileDescriptorResponse?: { fileDescriptorProto: Uint8Array[] };
  listServicesResponse?: { service: { name: string }[] };
  errorResponse?: { errorCode: number; errorMessage: string };
}

const definitions = protoLoader.loadSync(["grpc/reflection/v1/reflection.proto", "grpc/reflection/v1alpha/reflection.proto"], {
  includeDirs: ["proto"],
  enums: String,
  defaults: true,
  oneofs: true,
});

let server: TestServer;
let client: grpc.Client;

beforeAll(async () => {
  server = await startServer();
  client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
});
afterAll(async () => {
  client.close();
  await server.stop();
});

// One request on a stream of its own (each stream sends a dependency once).
function ask(version: "v1" | "v1alpha", request: object): Promise<ReflectionResponse> {
  const definition = (definitions[`grpc.reflection.${version}.ServerReflection`] as protoLoader.ServiceDefinition).ServerReflectionInfo!;
  const call = client.makeBidiStreamRequest(definition.path, definition.requestSerialize, (b: Buffer) => definition.responseDeserialize(b) as ReflectionResponse);
  return new Promise((resolve, reject) => {
    call.once("data", (response: ReflectionResponse) => {
      call.end();
      resolve(response);
    });
    call.once("error", reject);
    call.write(request);
  });
}

function files(response: ReflectionResponse): FileDescriptorProto[] {
  expect(response.errorResponse).toBeUndefined();
  return (response.fileDescriptorResponse?.fileDescriptorProto ?? []).map((b) => fromBinary(FileDescriptorProtoSchema, b));
}

describe.each(["v1", "v1alpha"] as const)("grpc.reflection.%s and the error details", (version) => {
  test.each([
    ["google.rpc.ErrorInfo", ["google/rpc/error_details.proto", "google/protobuf/duration.proto"]],
    ["google.rpc.BadRequest.FieldViolation", ["google/rpc/error_details.proto", "google/protobuf/duration.proto"]],
    ["google.rpc.Status", ["google/rpc/status.proto", "google/protobuf/any.proto"]],
  ])("FileContainingSymbol %s: its file and the files it imports", async (symbol, expected) => {
    expect(files(await ask(version, { fileContainingSymbol: symbol })).map((f) => f.name)).toEqual(expected);
  });

  test("FileByFilename google/rpc/error_details.proto", async () => {
    const [file] = files(await ask(version, { fileByFilename: "google/rpc/error_details.proto" }));
    expect(file?.messageType.map((m) => m.name)).toContain("QuotaFailure");
  });

  test("ListServices lists services only", async () => {
    const response = await ask(version, { listServices: "" });
    expect(response.listServicesResponse?.service.map((s) => s.name).filter((n) => n.startsWith("google.rpc"))).toEqual([]);
  });

  test("the details of a real refusal decode with the descriptors reflection gives", async () => {
    const protos = [
      ...files(await ask(version, { fileContainingSymbol: "google.rpc.Status" })),
      ...files(await ask(version, { fileContainingSymbol: "google.rpc.ErrorInfo" })),
    ];
    // Each response has a file before the files it imports; the registry wants them the other way round.
    const unique = [...new Map(protos.map((p) => [p.name, p])).values()].reverse();
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: unique }));
    const res = await rawCall(server.url, "/kms.v1.KeyManagerService/GetCryptoKey", frame(toBinary(GetCryptoKeyRequestSchema, create(GetCryptoKeyRequestSchema, { keyId: "no-such-key" }))));
    expect(res.trailers["grpc-status"]).toBe("5");
    const statusDesc = registry.getMessage("google.rpc.Status") as DescMessage;
    const status = fromBinary(statusDesc, Buffer.from(String(res.trailers["grpc-status-details-bin"]), "base64")) as unknown as { details: Any[] };
    const details = status.details.map((d) => anyUnpack(d, registry) as unknown as { $typeName: string; reason?: string; resourceName?: string });
    expect(details.map((d) => d.$typeName)).toEqual(["google.rpc.ErrorInfo", "google.rpc.ResourceInfo"]);
    expect(details[0]?.reason).toBe("CRYPTO_KEY_NOT_FOUND");
  });
});
