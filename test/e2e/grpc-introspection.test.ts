import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { anyUnpack, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { ConnectRouter } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, assert, beforeAll, describe, expect, it, vi } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { createLogger } from "../../src/logger.js";
import { MethodTable } from "../../src/pipeline/method-table.js";
import { stagesWithoutAccess } from "../support/method-table.js";
import { FairTurns } from "../../src/transport/fair-turns.js";
import { BodyBudget } from "../../src/transport/limits/body-budget.js";
import { createConnectAdapter } from "../../src/transport/connect/connect-adapter.js";
import { createHealthService, HealthStatus } from "../../src/transport/grpc/health-service.js";
import { createReflectionServices } from "../../src/transport/grpc/reflection-service.js";
import { startServer as startApp } from "../support/server.js";
import type { TestServer as App } from "../support/server.js";

const KMS = "kms.v1.KeyManagerService";

// Shapes of the messages as @grpc/proto-loader decodes them with the options below.
interface HealthResponse {
  status: keyof typeof ServingStatus;
}

interface ReflectionRequest {
  host?: string;
  listServices?: string;
  fileByFilename?: string;
  fileContainingSymbol?: string;
  fileContainingExtension?: { containingType: string; extensionNumber: number };
  allExtensionNumbersOfType?: string;
}

interface ReflectionResponse {
  validHost: string;
  originalRequest: ReflectionRequest | null;
  messageResponse: string;
  fileDescriptorResponse?: { fileDescriptorProto: Uint8Array[] };
  allExtensionNumbersResponse?: { baseTypeName: string; extensionNumber: number[] };
  listServicesResponse?: { service: { name: string }[] };
  errorResponse?: { errorCode: number; errorMessage: string };
}

const packageDefinition = protoLoader.loadSync(
  ["grpc/health/v1/health.proto", "grpc/reflection/v1/reflection.proto", "grpc/reflection/v1alpha/reflection.proto"],
  { includeDirs: ["proto"], enums: String, defaults: true, oneofs: true },
);

function method<Response>(service: string, name: string) {
  const definition = (packageDefinition[service] as protoLoader.ServiceDefinition)[name];
  if (definition === undefined) {
    throw new Error(`no method ${service}.${name}`);
  }
  return {
    path: definition.path,
    serialize: definition.requestSerialize,
    // The loaded definitions are untyped; the interfaces above describe them.
    deserialize: (bytes: Buffer) => definition.responseDeserialize(bytes) as Response,
  };
}

interface TestServer {
  client: grpc.Client;
  status: HealthStatus;
  shutdown: AbortController;
  close(): Promise<void>;
}

async function startServer(): Promise<TestServer> {
  const status = new HealthStatus();
  const shutdown = new AbortController();
  const reflection = createReflectionServices([KeyManagerService, Health, ServerReflectionV1, ServerReflectionV1alpha]);
  const routes = (router: ConnectRouter) => {
    // Reflection needs only the descriptor of the KMS service.
    router.service(KeyManagerService, {});
    router.service(Health, createHealthService(status));
    router.service(ServerReflectionV1, reflection.v1);
    router.service(ServerReflectionV1alpha, reflection.v1alpha);
  };
  const logger = createLogger("silent");
  const stages = stagesWithoutAccess(logger);
  const table = new MethodTable([], [KeyManagerService, Health, ServerReflectionV1, ServerReflectionV1alpha], stages);
  const connect = createConnectAdapter({
    table,
    routes,
    shutdownSignal: shutdown.signal,
    jsonOptions: {},
    readMaxBytes: 4 * 1024 * 1024,
    turns: new FairTurns(8, (err) => logger.warn({ err }, "call failed")),
    bodyBudget: new BodyBudget(64 * 1024 * 1024),
    fallback: (_req, res) => {
      res.writeHead(404);
      res.end();
    },
    logger,
  });
  const server = http2.createServer(connect.handle);
  // Tracked so that close() does not wait for streams a failed test left open.
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return {
    client,
    status,
    shutdown,
    async close() {
      client.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const session of sessions) {
        session.destroy();
      }
      await closed;
    },
  };
}

function healthCall<Response>(client: grpc.Client, name: "Check" | "List", request: object): Promise<Response> {
  const { path, serialize, deserialize } = method<Response>("grpc.health.v1.Health", name);
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(path, serialize, deserialize, request, (error, response) => {
      if (error !== null || response === undefined) {
        reject(error);
      } else {
        resolve(response);
      }
    });
  });
}

function check(client: grpc.Client, service: string): Promise<HealthResponse> {
  return healthCall<HealthResponse>(client, "Check", { service });
}

function watch(client: grpc.Client, service: string) {
  const { path, serialize, deserialize } = method<HealthResponse>("grpc.health.v1.Health", "Watch");
  const call = client.makeServerStreamRequest(path, serialize, deserialize, { service });
  const updates: AsyncIterator<HealthResponse> = call[Symbol.asyncIterator]();
  return { call, next: async () => (await updates.next()).value as HealthResponse };
}

/** One reflection stream, asked one request at a time. */
function reflectionStream(client: grpc.Client, version: "v1" | "v1alpha") {
  const { path, serialize, deserialize } = method<ReflectionResponse>(
    `grpc.reflection.${version}.ServerReflection`,
    "ServerReflectionInfo",
  );
  const call = client.makeBidiStreamRequest(path, serialize, deserialize);
  const responses: AsyncIterator<ReflectionResponse> = call[Symbol.asyncIterator]();
  return {
    async ask(request: ReflectionRequest): Promise<ReflectionResponse> {
      call.write(request);
      const { value, done } = await responses.next();
      if (done === true) {
        throw new Error("reflection stream ended");
      }
      return value;
    },
    end: () => call.end(),
  };
}

function decodeFiles(response: ReflectionResponse): FileDescriptorProto[] {
  expect(response.messageResponse).toBe("fileDescriptorResponse");
  return (response.fileDescriptorResponse?.fileDescriptorProto ?? []).map((bytes) =>
    fromBinary(FileDescriptorProtoSchema, bytes),
  );
}

const kmsFileAndDependencies = [
  "kms/v1/kms.proto",
  "cloudplane/api/v1/policy.proto",
  "google/api/annotations.proto",
  "google/api/client.proto",
  "google/api/field_behavior.proto",
  "google/protobuf/duration.proto",
  "google/protobuf/field_mask.proto",
  "google/protobuf/timestamp.proto",
  "google/protobuf/descriptor.proto",
  "google/api/http.proto",
  "google/api/launch_stage.proto",
];

describe("grpc.health.v1.Health", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server.close());

  it("reports the whole server as SERVING", async () => {
    expect(await check(server.client, "")).toEqual({ status: "SERVING" });
  });

  it("fails Check of an unknown service with NOT_FOUND and ErrorInfo HEALTH_SERVICE_UNKNOWN", async () => {
    const error = (await check(server.client, "no.such.Service").catch((e: unknown) => e)) as grpc.ServiceError;
    expect(error.code).toBe(grpc.status.NOT_FOUND);
    const status = fromBinary(StatusSchema, error.metadata.get("grpc-status-details-bin")[0] as Buffer);
    expect(status.details.map((d) => anyUnpack(d, ErrorInfoSchema)?.reason)).toContain("HEALTH_SERVICE_UNKNOWN");
  });

  it("lists every known status", async () => {
    server.status.set("listed.Service", ServingStatus.NOT_SERVING);
    const response = await healthCall<{ statuses: Record<string, HealthResponse> }>(server.client, "List", {});
    expect(response.statuses).toMatchObject({ "": { status: "SERVING" }, "listed.Service": { status: "NOT_SERVING" } });
  });

  it("streams status changes to Watch and drops the listener on cancel", async () => {
    server.status.set(KMS, ServingStatus.SERVING);
    const watcher = watch(server.client, KMS);
    expect(await watcher.next()).toEqual({ status: "SERVING" });
    await vi.waitFor(() => expect(server.status.listenerCount(KMS)).toBe(1));

    server.status.set(KMS, ServingStatus.SERVING);
    server.status.set(KMS, ServingStatus.NOT_SERVING);
    expect(await watcher.next()).toEqual({ status: "NOT_SERVING" });

    watcher.call.on("error", () => {});
    watcher.call.cancel();
    await vi.waitFor(() => expect(server.status.listenerCount(KMS)).toBe(0));
  });

  it("answers Watch of an unknown service with SERVICE_UNKNOWN and keeps watching", async () => {
    const watcher = watch(server.client, "later.Service");
    expect(await watcher.next()).toEqual({ status: "SERVICE_UNKNOWN" });
    server.status.set("later.Service", ServingStatus.SERVING);
    expect(await watcher.next()).toEqual({ status: "SERVING" });
    watcher.call.on("error", () => {});
    watcher.call.cancel();
    await vi.waitFor(() => expect(server.status.listenerCount("later.Service")).toBe(0));
  });
});

describe("HealthStatus.shutdown", () => {
  it("turns every service NOT_SERVING, ignores later updates, and Watch ends with the server", async () => {
    const server = await startServer();
    try {
      server.status.set(KMS, ServingStatus.SERVING);
      const watcher = watch(server.client, KMS);
      expect(await watcher.next()).toEqual({ status: "SERVING" });

      server.status.shutdown();
      expect(await watcher.next()).toEqual({ status: "NOT_SERVING" });
      server.status.set(KMS, ServingStatus.SERVING);
      expect(await check(server.client, "")).toEqual({ status: "NOT_SERVING" });
      expect(await check(server.client, KMS)).toEqual({ status: "NOT_SERVING" });

      const ended = new Promise<grpc.StatusObject>((resolve) => watcher.call.on("status", resolve));
      watcher.call.on("error", () => {});
      server.shutdown.abort();
      expect((await ended).code).toBe(grpc.status.CANCELLED);
      expect(server.status.listenerCount(KMS)).toBe(0);
    } finally {
      await server.close();
    }
  });
});

describe("HealthStatus.register", () => {
  it("names services by descriptor, keeps a status already set, and registers NOT_SERVING after shutdown", () => {
    const status = new HealthStatus();
    status.set(Health.typeName, ServingStatus.NOT_SERVING);
    status.register([KeyManagerService, Health, KeyManagerService]);
    expect(status.get(KMS)).toBe(ServingStatus.SERVING);
    expect(status.get(Health.typeName)).toBe(ServingStatus.NOT_SERVING);
    status.shutdown();
    status.register([ServerReflectionV1]);
    expect(status.get(ServerReflectionV1.typeName)).toBe(ServingStatus.NOT_SERVING);
  });
});

// Every service the real server registers, by the names a load balancer or grpc_health_probe would ask for.
const servedServices = [
  KMS,
  "compute.auth.v2.AuthService",
  "compute.cluster.v1.NodePoolService",
  "compute.cluster.v1.TaskService",
  "compute.configs.v2.ConfigService",
  "compute.vapp.v1.VAppService",
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
];

describe("grpc.health.v1.Health on the real server", () => {
  let app: App;
  let client: grpc.Client;
  let connect: ReturnType<typeof createClient<typeof Health>>;
  beforeAll(async () => {
    app = await startApp();
    client = new grpc.Client(`127.0.0.1:${app.port}`, grpc.credentials.createInsecure());
    connect = createClient(Health, createConnectTransport({ baseUrl: app.url, httpVersion: "1.1" }));
  });
  afterAll(async () => {
    client.close();
    await app.stop();
  });

  const checkConnect = async (service: string) => ServingStatus[(await connect.check({ service })).status];

  it("reports every registered service, and no other, SERVING over gRPC and Connect", async () => {
    for (const service of ["", ...servedServices]) {
      expect(await check(client, service), service).toEqual({ status: "SERVING" });
      expect(await checkConnect(service), service).toBe("SERVING");
    }
    const list = await healthCall<{ statuses: Record<string, HealthResponse> }>(client, "List", {});
    expect(Object.keys(list.statuses).sort()).toEqual(["", ...servedServices].sort());

    const grpcError = (await check(client, "no.such.Service").catch((e: unknown) => e)) as grpc.ServiceError;
    expect(grpcError.code).toBe(grpc.status.NOT_FOUND);
    const connectError = await connect.check({ service: "no.such.Service" }).catch((e: unknown) => e);
    expect(ConnectError.from(connectError).code).toBe(Code.NotFound);
  });

  it("reports every service NOT_SERVING once shutdown starts, and Watch sees the change", async () => {
    const watcher = watch(client, "compute.cluster.v1.NodePoolService");
    expect(await watcher.next()).toEqual({ status: "SERVING" });

    // What close() does first; called alone so that the server still answers Check.
    app.app.health.shutdown();
    expect(await watcher.next()).toEqual({ status: "NOT_SERVING" });
    for (const service of ["", ...servedServices]) {
      expect(await check(client, service), service).toEqual({ status: "NOT_SERVING" });
      expect(await checkConnect(service), service).toBe("NOT_SERVING");
    }
    const error = (await check(client, "no.such.Service").catch((e: unknown) => e)) as grpc.ServiceError;
    expect(error.code).toBe(grpc.status.NOT_FOUND);
    watcher.call.on("error", () => {});
    watcher.call.cancel();
  });
});

describe.each(["v1", "v1alpha"] as const)("grpc.reflection.%s.ServerReflection", (version) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server.close());

  it("lists the registered services", async () => {
    const stream = reflectionStream(server.client, version);
    const response = await stream.ask({ host: "example", listServices: "" });
    stream.end();
    expect(response.validHost).toBe("example");
    expect(response.originalRequest).toMatchObject({ host: "example", listServices: "" });
    expect(response.listServicesResponse?.service.map((s) => s.name).sort()).toEqual([
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection",
      KMS,
    ]);
  });

  it("sends the file of a symbol first and each dependency once per stream", async () => {
    const stream = reflectionStream(server.client, version);

    const first = decodeFiles(await stream.ask({ fileContainingSymbol: KMS }));
    expect(first.map((file) => file.name)).toEqual(kmsFileAndDependencies);
    const [kmsFile] = first;
    assert(kmsFile);
    expect(kmsFile).toMatchObject({ name: "kms/v1/kms.proto", package: "kms.v1", syntax: "proto3" });
    expect(kmsFile.service.map((service) => service.name)).toEqual(["KeyManagerService"]);
    // The files are complete: together they resolve every type they refer to.
    const registry = createFileRegistry(kmsFile, (name) => first.find((file) => file.name === name));
    expect(registry.getEnum("kms.v1.CryptoKeyVersion.State")?.values.map((v) => v.name)).toContain("ENABLED");

    const again = decodeFiles(await stream.ask({ fileContainingSymbol: "kms.v1.CryptoKeyVersion.State" }));
    expect(again.map((file) => file.name)).toEqual(["kms/v1/kms.proto"]);
    stream.end();
  });

  it("resolves nested types, methods, fields and enum values on a fresh stream", async () => {
    for (const symbol of [
      "kms.v1.CryptoKeyVersion.State",
      "kms.v1.KeyManagerService.Encrypt",
      "kms.v1.CryptoKey.name",
      "kms.v1.CryptoKeyVersion.ENABLED",
    ]) {
      const stream = reflectionStream(server.client, version);
      const files = decodeFiles(await stream.ask({ fileContainingSymbol: symbol }));
      stream.end();
      expect(files.map((file) => file.name)).toEqual(kmsFileAndDependencies);
    }
  });

  it("answers unknown symbols, files and types with NOT_FOUND in the stream", async () => {
    const stream = reflectionStream(server.client, version);
    for (const request of [
      { fileContainingSymbol: "kms.v1.Nope" },
      { fileByFilename: "nope.proto" },
      { fileContainingExtension: { containingType: "google.protobuf.MethodOptions", extensionNumber: 1 } },
      { allExtensionNumbersOfType: "kms.v1.Nope" },
    ]) {
      const response = await stream.ask(request);
      expect(response.messageResponse).toBe("errorResponse");
      expect(response.errorResponse?.errorCode).toBe(grpc.status.NOT_FOUND);
    }
    // The stream is still usable after errors.
    const files = decodeFiles(await stream.ask({ fileByFilename: "google/protobuf/timestamp.proto" }));
    expect(files.map((file) => file.name)).toEqual(["google/protobuf/timestamp.proto"]);
    stream.end();
  });

  it("fails the stream on a request without message_request", async () => {
    const stream = reflectionStream(server.client, version);
    await expect(stream.ask({ host: "example" })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
  });

  it("answers extension requests from the known files", async () => {
    const stream = reflectionStream(server.client, version);
    const numbers = await stream.ask({ allExtensionNumbersOfType: "google.protobuf.MethodOptions" });
    // google.api.http, cloudplane.api.v1.method_policy and google.api.method_signature.
    expect(numbers.allExtensionNumbersResponse).toEqual({
      baseTypeName: "google.protobuf.MethodOptions",
      extensionNumber: [1051, 51000, 72295728],
    });
    const noExtensions = await stream.ask({ allExtensionNumbersOfType: "kms.v1.CryptoKey" });
    expect(noExtensions.allExtensionNumbersResponse?.extensionNumber).toEqual([]);

    const files = decodeFiles(
      await stream.ask({
        fileContainingExtension: { containingType: "google.protobuf.MethodOptions", extensionNumber: 72295728 },
      }),
    );
    expect(files.map((file) => file.name)).toEqual([
      "google/api/annotations.proto",
      "google/api/http.proto",
      "google/protobuf/descriptor.proto",
    ]);
    stream.end();
  });
});
